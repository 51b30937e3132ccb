"""Plan Mode through the real ADK Runner, a scripted model and a real SQLite database.

Covers the scenarios of the original Plan Mode, each of its known bugs as a regression
test, and the gate-bypass cases users reported against other agents.
"""

from __future__ import annotations

import json

import pytest
from google.adk.agents import LlmAgent

from harness import (
    WRITES,
    Harness,
    Read,
    Write,
    final_text,
    make_agent,
    paused_call_id,
    tool_results,
)
from plangate.adk import PlanOptions, get_plan_record, plan_runtime, setup_plan
from plangate.adk.runtime import STATE_KIND
from plangate.adk.scope import PlanScope
from plangate.models.scripted import ScriptedLlm, call, last_tool_result, text
from plangate.plan import DEFAULT_PLAN_AWARENESS_PROMPT, PlanStatus
from plangate.plan.prompts import PLAN_AWARENESS_MARKER, PLAN_MODE_MARKER
from plangate.store.shared import shared_store


def system_text(model: ScriptedLlm, index: int = -1) -> str:
    instruction = model.requests[index].config.system_instruction
    return instruction if isinstance(instruction, str) else str(instruction)


async def enter_and_draft(
    h: Harness, model: ScriptedLlm, content: str = "1. Fix reserve\n2. Run tests"
) -> str:
    """Model enters, user confirms, model drafts and submits; returns the exit call id."""
    model.add([call("enter_plan_mode", objective="fix the bug")])
    enter_id = paused_call_id(await h.send("fix the stock bug"), "enter_plan_mode")
    model.add(
        [call("update_plan_content", content=content, mode="replace")],
        [call("exit_plan_mode", summary="fix reserve")],
    )
    events = await h.reply(enter_id, "enter_plan_mode", {"status": "approved"})
    return paused_call_id(events, "exit_plan_mode")


async def test_full_cycle_blocks_then_unlocks_writes(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([call("enter_plan_mode", objective="fix the bug")])
    enter_id = paused_call_id(await h.send("fix the stock bug"), "enter_plan_mode")
    assert (await h.record()).status is PlanStatus.PENDING_ENTER
    model.add(
        [call("Read", path="stock.py")],
        [call("Write", path="stock.py", content="early")],
        [call("update_plan_content", content="1. Fix reserve", mode="replace")],
        [call("exit_plan_mode", summary="ready")],
    )
    events = await h.reply(enter_id, "enter_plan_mode", {"status": "approved"})
    assert tool_results(events, "Read")[0]["content"] == "contents of stock.py"
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    assert WRITES == []
    exit_id = paused_call_id(events, "exit_plan_mode")
    record = await h.record()
    assert record.status is PlanStatus.PENDING_APPROVAL
    assert record.pending[0].payload["content"] == "1. Fix reserve"
    model.add([call("Write", path="stock.py", content="fixed")], [text("done")])
    events = await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    assert tool_results(events, "Write") == [{"written": "stock.py"}]
    assert WRITES == [("stock.py", "fixed")]
    assert (await h.record()).status is PlanStatus.APPROVED


async def test_enter_rejection_through_hitl_lifts_the_gate(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([call("enter_plan_mode", objective="x")])
    enter_id = paused_call_id(await h.send("do x"), "enter_plan_mode")
    model.add(lambda req: [text(last_tool_result(req, "enter_plan_mode")["message"])])
    events = await h.reply(
        enter_id, "enter_plan_mode", {"status": "rejected", "reviewer_note": "just do it"}
    )
    assert final_text(events) == "just do it"
    assert (await h.record()).status is PlanStatus.CANCELLED


async def test_canonical_result_in_this_and_later_turns(database_url: str) -> None:
    """Regression: the raw host reply used to be seen only by the first model call."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model)
    model.add([text("implementing")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    model.add([text("still here")])
    await h.send("thanks")
    for request in model.requests[-2:]:
        result = last_tool_result(request, "exit_plan_mode")
        assert result["status"] == "approved"
        assert result["plan"]["status"] == "approved"
        assert "Write tools are unlocked" in result["message"]


async def test_canonical_result_when_adk_assigns_the_call_ids(database_url: str) -> None:
    """ADK strips the ids it generates before calling the model; replies still map."""
    model = ScriptedLlm(assign_ids=False)
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model)
    assert exit_id.startswith("adk-")
    model.add([text("implementing")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    result = last_tool_result(model.requests[-1], "exit_plan_mode")
    assert result["status"] == "approved" and result["plan"]["status"] == "approved"
    entered = last_tool_result(model.requests[-1], "enter_plan_mode")
    assert entered["plan"]["status"] == "exploring"


async def test_prompts_awareness_then_plan_then_approved_note(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([text("hello")])
    await h.send("hi")
    assert PLAN_AWARENESS_MARKER in system_text(model)
    assert PLAN_MODE_MARKER not in system_text(model)
    exit_id = await enter_and_draft(h, model, content="1. unique-plan-line")
    plan_prompt = system_text(model)
    assert plan_prompt.count(PLAN_MODE_MARKER) == 1
    assert "unique-plan-line" in plan_prompt and "status: drafting" in plan_prompt
    assert PLAN_AWARENESS_MARKER not in plan_prompt
    model.add([text("ok")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    after = system_text(model)
    assert "## Approved plan" in after and "unique-plan-line" in after
    assert PLAN_AWARENESS_MARKER not in after and PLAN_MODE_MARKER not in after


async def test_custom_prompts_and_injection_switches(database_url: str) -> None:
    model = ScriptedLlm()
    options = PlanOptions(awareness_prompt="CUSTOM AWARENESS", inject_prompt=False)
    h = Harness(make_agent(model, options), database_url)
    await h.start()
    model.add([text("hello")])
    await h.send("hi")
    assert "CUSTOM AWARENESS" in system_text(model)
    await enter_and_draft(h, model)
    assert PLAN_MODE_MARKER not in system_text(model)
    model2 = ScriptedLlm()
    h2 = Harness(
        make_agent(model2, PlanOptions(inject_awareness=False)), database_url, app_name="other"
    )
    await h2.start()
    model2.add([text("hello")])
    await h2.send("hi")
    assert DEFAULT_PLAN_AWARENESS_PROMPT.splitlines()[0] not in system_text(model2)


async def test_question_documented_payload_and_idempotency(database_url: str) -> None:
    """Regression: {status: answered, ...} was silently ignored and never recorded."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("ask_user_question", question="Which database?", options=["PostgreSQL", "SQLite"])]
    )
    ask_id = paused_call_id(await h.send("add persistence"), "ask_user_question")
    record = await h.record()
    assert record.pending[0].payload["question_id"] == 1
    model.add(lambda req: [text(last_tool_result(req, "ask_user_question")["message"])])
    events = await h.reply(
        ask_id,
        "ask_user_question",
        {"status": "answered", "question_id": 1, "answer": "PostgreSQL"},
    )
    assert final_text(events) == "The user answered: PostgreSQL"
    assert (await h.record()).asked_questions[0].answer == "PostgreSQL"
    model.add(lambda req: [text(json.dumps(last_tool_result(req, "ask_user_question")))])
    events = await h.reply(
        ask_id, "ask_user_question", {"status": "answered", "question_id": 1, "answer": "SQLite"}
    )
    assert "duplicate reply" in final_text(events)
    assert (await h.record()).asked_questions[0].answer == "PostgreSQL"


async def test_reject_revise_reapprove_does_not_replay_old_rejection(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model, content="1. v1")
    model.add(
        [call("Write", path="a", content="after rejection")],
        [call("update_plan_content", content="1. v2", mode="replace")],
        [call("exit_plan_mode", summary="v2")],
    )
    events = await h.reply(
        exit_id, "exit_plan_mode", {"status": "rejected", "reviewer_note": "needs v2"}
    )
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    second_id = paused_call_id(events, "exit_plan_mode")
    model.add([call("Write", path="a", content="ok")], [text("done")])
    events = await h.reply(second_id, "exit_plan_mode", {"status": "approved"})
    assert WRITES == [("a", "ok")]
    record = await h.record()
    assert record.status is PlanStatus.APPROVED
    assert [a.decision for a in record.approvals if a.kind == "exit"] == ["rejected", "approved"]


async def test_rejection_keeps_reviewer_draft_as_suggestion(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model, content="1. old")
    model.add(lambda req: [text(json.dumps(last_tool_result(req, "exit_plan_mode")))])
    events = await h.reply(
        exit_id,
        "exit_plan_mode",
        {"status": "rejected", "reviewer_note": "use this", "content": "1. edited"},
    )
    seen = json.loads(final_text(events))
    assert seen["suggested_content"] == "1. edited" and seen["reviewer_note"] == "use this"
    record = await h.record()
    assert record.status is PlanStatus.DRAFTING and record.suggested_content == "1. edited"
    assert "1. edited" in system_text(model)


async def test_approval_with_edited_content_becomes_a_reviewer_revision(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model, content="1. model plan")
    model.add([text("ok")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved", "content": "1. reviewer plan"})
    record = await h.record()
    assert record.content == "1. reviewer plan"
    assert [r.author for r in record.revisions] == ["model", "reviewer"]
    assert record.approvals[-1].revision == 2 and record.approvals[-1].sha256 == record.sha256


async def test_forced_entry_via_session_state(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("enter_plan_mode", objective="x")],
        [call("Write", path="a", content="b")],
        [text("planning")],
    )
    events = await h.send("Build a dashboard")
    record = await h.record()
    assert record.status is PlanStatus.EXPLORING and record.objective == "Build a dashboard"
    assert record.entry == "selection"
    enter_error = tool_results(events, "enter_plan_mode")[0]["error"]
    assert "selected Plan Mode in the UI" in enter_error
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    names = [d.name for d in model.requests[0].config.tools[0].function_declarations]
    assert "enter_plan_mode" not in names and "exit_plan_mode" in names


async def test_enter_plan_mode_offered_in_agent_mode(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([text("hi")])
    await h.send("hi")
    names = [d.name for d in model.requests[0].config.tools[0].function_declarations]
    assert {"enter_plan_mode", "update_plan_content", "exit_plan_mode", "ask_user_question"} <= set(
        names
    )


async def test_approved_plan_survives_a_still_set_selection(database_url: str) -> None:
    """Regression (PR #319 SEVERE): agent_mode=plan used to overwrite the approved plan."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. do it")], [call("exit_plan_mode")])
    exit_id = paused_call_id(await h.send("task"), "exit_plan_mode")
    model.add([text("implementing")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    assert (await h.state())["agent_mode"] == "agent"
    approved_id = (await h.record()).id
    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await h.send("continue")
    assert tool_results(events, "Write") == [{"written": "a"}]
    record = await h.record()
    assert record.id == approved_id and record.status is PlanStatus.APPROVED


async def test_new_selection_after_approval_keeps_old_plan_readable(database_url: str) -> None:
    model = ScriptedLlm()
    agent = make_agent(model)
    h = Harness(agent, database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. first")], [call("exit_plan_mode")])
    exit_id = paused_call_id(await h.send("task one"), "exit_plan_mode")
    model.add([text("ok")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    first = await h.record()
    model.add([text("planning again")])
    await h.send("task two", state_delta={"agent_mode": "plan"})
    second = await h.record()
    assert second.id != first.id and second.status is PlanStatus.EXPLORING
    runtime = plan_runtime(agent)
    archived = await runtime.archived(PlanScope(h.app_name, h.user_id, h.session_id, agent.name))
    assert [p.id for p in archived] == [first.id]
    assert archived[0].status is PlanStatus.APPROVED and archived[0].content == "1. first"


async def test_pending_enter_blocks_writes_and_is_not_a_dead_end(database_url: str) -> None:
    """Regression: pending_enter was not gated, and nothing but a resume could leave it."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([call("enter_plan_mode", objective="x")])
    await h.send("do x")
    model.add([call("Write", path="a", content="b")], [text("waiting")])
    events = await h.send("never mind the card, just write it")
    assert "'pending_enter'" in tool_results(events, "Write")[0]["error"]
    assert WRITES == []
    model.add([text("exploring")])
    await h.send("plan it", state_delta={"agent_mode": "plan"})
    record = await h.record()
    assert record.status is PlanStatus.EXPLORING and record.pending == []


async def test_switching_the_selection_away_is_a_user_exit(database_url: str) -> None:
    """Regression: switching the UI to agent did not lift the gate; a plan could not be left."""
    model = ScriptedLlm()
    agent = make_agent(model)
    h = Harness(agent, database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. x")], [call("exit_plan_mode")])
    await h.send("task")
    assert (await h.record()).status is PlanStatus.PENDING_APPROVAL
    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await h.send("forget the plan", state_delta={"agent_mode": "agent"})
    assert tool_results(events, "Write") == [{"written": "a"}]
    assert (await h.record()).status is PlanStatus.CANCELLED
    store = await shared_store(database_url)
    kinds = [e.event.kind for e in await store.journal()]
    assert "mode.selected" in kinds
    cancelled = [e.event for e in await store.journal() if e.event.to_state == "cancelled"]
    assert cancelled and cancelled[0].actor == "user"


async def test_invalid_long_running_calls_return_errors_in_the_same_run(database_url: str) -> None:
    """Regression: an error from a long-running tool used to end the run."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("exit_plan_mode", summary="empty")],
        [call("update_plan_content", content="x", mode="bogus")],
        [call("update_plan_content", content="1. real")],
        [call("exit_plan_mode", summary="now")],
    )
    events = await h.send("task")
    assert "plan is empty" in tool_results(events, "exit_plan_mode")[0]["error"]
    assert "mode must be" in tool_results(events, "update_plan_content")[0]["error"]
    paused_call_id(events, "exit_plan_mode")
    assert (await h.record()).status is PlanStatus.PENDING_APPROVAL


async def test_on_approval_fires_once_per_applied_decision(database_url: str) -> None:
    """Regression: on_approval fired for errors, ignored replies and later text turns."""
    decisions = []
    model = ScriptedLlm()
    h = Harness(make_agent(model, PlanOptions(on_approval=decisions.append)), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model)
    model.add([text("revising")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "rejected", "reviewer_note": "more"})
    model.add([text("ok")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})  # stale: already decided
    model.add([text("ok")])
    await h.send("hello")
    assert [(d.decision, d.note, d.agent_name) for d in decisions] == [
        ("rejected", "more", "orchestrator")
    ]


async def test_stale_approval_does_not_approve_a_newer_revision(database_url: str) -> None:
    """Regression: a delayed approve used to approve whatever plan was pending."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model, content="1. v1")
    shown = (await h.record()).pending[0].payload
    model.add(
        [call("update_plan_content", content="1. v2", mode="replace")], [call("exit_plan_mode")]
    )
    events = await h.reply(
        exit_id, "exit_plan_mode", {"status": "rejected", "reviewer_note": "v2 please"}
    )
    second_id = paused_call_id(events, "exit_plan_mode")
    model.add(lambda req: [text(json.dumps(last_tool_result(req, "exit_plan_mode")))])
    stale = {
        "status": "approved",
        "approval_id": shown["approval_id"],
        "revision": shown["revision"],
        "sha256": shown["sha256"],
    }
    events = await h.reply(second_id, "exit_plan_mode", stale)
    seen = json.loads(final_text(events))
    assert seen["status"] == "ignored" and "does not match" in seen["error"]
    assert (await h.record()).status is PlanStatus.PENDING_APPROVAL
    current = (await h.record()).pending[0].payload
    model.add([text("approved")])
    await h.reply(
        second_id,
        "exit_plan_mode",
        {
            "status": "approved",
            "approval_id": current["approval_id"],
            "revision": 2,
            "sha256": current["sha256"],
        },
    )
    assert (await h.record()).status is PlanStatus.APPROVED


async def test_foreign_reply_changes_nothing_and_model_is_told(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    exit_id = await enter_and_draft(h, model)
    model.add(lambda req: [text(json.dumps(last_tool_result(req, "exit_plan_mode")))])
    events = await h.reply(exit_id, "exit_plan_mode", {"status": "maybe"})
    seen = json.loads(final_text(events))
    assert seen["status"] == "ignored" and "status must be" in seen["error"]
    assert (await h.record()).status is PlanStatus.PENDING_APPROVAL
    model.add([text("approved now")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    assert (await h.record()).status is PlanStatus.APPROVED


async def test_default_deny_blocks_tools_outside_any_list(database_url: str) -> None:
    """Regression: write_file, MCP or custom tools passed the name denylist."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("write_file", path="a", content="b")], [text("blocked")])
    events = await h.send("task")
    assert "not declared read-only" in tool_results(events, "write_file")[0]["error"]
    assert WRITES == []
    store = await shared_store(database_url)
    denied = [e.event for e in await store.journal() if e.event.kind == "plan.gate.denied"]
    assert denied[0].detail["tool"] == "write_file"


async def test_denylist_option_reproduces_the_seed(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model, PlanOptions(gate_mode="denylist")), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("write_file", path="a", content="b")],
        [call("Write", path="a", content="b")],
        [text("x")],
    )
    events = await h.send("task")
    assert tool_results(events, "write_file") == [{"written": "a"}]
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")


async def test_corrupt_state_fails_closed(database_url: str) -> None:
    """Regression: a malformed stored plan meant 'no plan', so the gate opened. It gates
    like a plan being made (tests/test_corrupt_plan_state.py has every corrupt form)."""
    model = ScriptedLlm()
    agent = make_agent(model)
    h = Harness(agent, database_url)
    await h.start({"agent_mode": "plan"})
    model.add([text("planning")])
    await h.send("task")
    store = await shared_store(database_url)
    key = PlanScope(h.app_name, h.user_id, h.session_id, agent.name).key
    document = await store.get(STATE_KIND, key)
    async with store.transaction() as tx:
        await tx.put(
            STATE_KIND, key, {"record": {"status": "bogus"}}, expected_version=document.version
        )
    model.add([call("Write", path="a", content="b")], [call("Read", path="a")], [text("x")])
    events = await h.send("write it")
    assert "stored plan state is corrupt" in tool_results(events, "Write")[0]["error"]
    assert tool_results(events, "Read")[0]["content"] == "contents of a"
    assert WRITES == []


async def test_get_plan_record_default_finds_the_agents_plan(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add([text("x")])
    await h.send("task")
    session = await h.session()
    assert "plan:orchestrator" in session.state
    assert get_plan_record(session).status is PlanStatus.EXPLORING
    assert get_plan_record(session.state, branch="orchestrator").status is PlanStatus.EXPLORING


def test_setup_plan_twice_mounts_once() -> None:
    agent = LlmAgent(name="a", model=ScriptedLlm(), tools=[Read])
    setup_plan(agent)
    tools, before_model, before_tool = (
        len(agent.tools),
        list(agent.before_model_callback),
        list(agent.before_tool_callback),
    )
    setup_plan(agent, PlanOptions())
    assert len(agent.tools) == tools
    assert agent.before_model_callback == before_model
    assert agent.before_tool_callback == before_tool


def test_options_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="temp:"):
        PlanOptions(state_key_prefix="temp:plan")
    with pytest.raises(ValueError, match="differ"):
        PlanOptions(force_enter_plan_state_value="agent")


async def test_existing_callbacks_run_after_the_gate(database_url: str) -> None:
    """Deny first: a user callback cannot pre-empt the gate."""
    seen = []

    def audit(tool, args, tool_context):
        seen.append(tool.name)
        return None

    model = ScriptedLlm()
    agent = LlmAgent(
        name="orchestrator", model=model, tools=[Read, Write], before_tool_callback=audit
    )
    setup_plan(agent)
    h = Harness(agent, database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("Write", path="a", content="b")], [call("Read", path="a")], [text("x")])
    await h.send("task")
    assert seen == ["Read"]


async def test_sub_agents_cannot_escape_the_gate(database_url: str) -> None:
    """A delegated agent (transfer) runs under the same gate as its parent."""
    model = ScriptedLlm()
    worker = LlmAgent(name="worker", model=model, tools=[Write], description="writes files")
    h = Harness(make_agent(model, sub_agents=[worker]), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("transfer_to_agent", agent_name="worker")],
        [call("Write", path="a", content="b")],
        [text("blocked")],
    )
    events = await h.send("task")
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    assert WRITES == []


async def test_write_in_the_same_batch_as_submission_is_refused(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. x")],
        [call("exit_plan_mode"), call("Write", path="a", content="b")],
    )
    events = await h.send("task")
    # Both calls of the batch run concurrently: the write is refused whether it is judged
    # before the submission lands (drafting) or after it (pending_approval).
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    assert WRITES == []
    assert (await h.record()).status is PlanStatus.PENDING_APPROVAL


async def test_parallel_updates_lose_nothing(database_url: str) -> None:
    """Two updates in one turn: each one the model is told succeeded is in the plan."""
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [
            call("update_plan_content", content="1. alpha"),
            call("update_plan_content", content="2. beta"),
        ],
        [text("x")],
    )
    events = await h.send("task")
    results = tool_results(events, "update_plan_content")
    assert len(results) == 2
    record = await h.record()
    applied = [r for r in results if "error" not in r]
    conflicts = [r for r in results if "error" in r]
    assert applied
    for result in applied:
        line = result["plan"]["content"].splitlines()[-1]
        assert line in record.content
    for result in conflicts:
        assert result["error"].startswith("PLAN_CONFLICT")
    assert record.content_revisions == len(applied)


async def test_todo_write_is_refused_while_planning_and_validates_after(
    database_url: str,
) -> None:
    from plangate.agent.todos import todo_write_tool

    model = ScriptedLlm()
    h = Harness(make_agent(model, tools=[todo_write_tool("orchestrator")]), database_url)
    await h.start({"agent_mode": "plan"})
    model.add([call("todo_write", todos=[{"content": "a"}])], [text("x")])
    events = await h.send("task")
    assert tool_results(events, "todo_write")[0]["error"].startswith("PLAN_MODE_GATE")
    model.add(
        [call("todo_write", todos=[{"content": "a", "status": "later"}])],
        [call("todo_write", todos=[{"content": "a", "status": "in_progress"}, {"content": "b"}])],
        [text("x")],
    )
    events = await h.send("go", state_delta={"agent_mode": "agent"})
    bad, good = tool_results(events, "todo_write")
    assert bad["error"].startswith("INVALID_ARGS: todo #1 status")
    assert good["message"] == "0/2 completed"
    assert (await h.state())["todos:orchestrator"] == [
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "pending"},
    ]
