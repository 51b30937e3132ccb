"""Every human request answered exactly once: batched requests, replies recorded when
given, replies in seed 000's shapes, mode switches while a run is in progress, the
mirror, ``on_approval`` and the end of an approved plan -- through the real Runner."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.adk.events import Event
from google.genai import types

from harness import WRITES, Harness, Read, Write, final_text, make_agent, tool_results
from plangate.adk import PlanOptions, plan_runtime
from plangate.adk.runner import build_runner, function_reply
from plangate.adk.scope import PlanScope
from plangate.adk.session import PlanSession
from plangate.agent.todos import todo_write_tool
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.plan.prompts import PLAN_AWARENESS_MARKER
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.policy.effects import Effect, declare_effect

TWO_QUESTIONS = [
    call("ask_user_question", question="Which database?", options=["PostgreSQL", "SQLite"]),
    call("ask_user_question", question="Which port?"),
]


async def open_session(
    database_url: str,
    model: ScriptedLlm,
    *,
    options: PlanOptions | None = None,
    tools: list[Any] | None = None,
    state: dict[str, Any] | None = None,
) -> PlanSession:
    agent = make_agent(model, options, tools=tools)
    runner = build_runner(agent, database_url=database_url, app_name="hitl")
    return await PlanSession.open(runner, session_id="s1", state=state)


async def collect(session: PlanSession, message: Any, **kwargs: Any) -> list[Event]:
    return [event async for event in session.run(message, **kwargs)]


def responses_seen(request: Any) -> list[dict[str, Any]]:
    """Every function response the model was shown, in order."""
    return [
        dict(part.function_response.response or {})
        for content in request.contents
        for part in content.parts or []
        if part.function_response is not None
    ]


def echo_responses(request: Any) -> list[types.Part]:
    return [text(json.dumps(responses_seen(request)))]


async def mirror_equals_store(session: PlanSession) -> bool:
    record = await session.record()
    stored = (await session.session()).state.get(session.runtime.state_key)
    return stored == (record.dump() if record else None)


# -- several requests in one step ---------------------------------------------------------


@pytest.mark.parametrize("order", ["asked", "reversed"])
async def test_two_questions_in_one_step_answered_in_either_order(
    database_url: str, order: str
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(list(TWO_QUESTIONS))
    await collect(session, "add persistence")
    asked = await session.pending()
    assert [p.payload["message"] for p in asked] == ["Which database?", "Which port?"]
    assert [p.question_id for p in asked] == [1, 2]  # numbered in the order asked
    assert [p.payload["question_id"] for p in asked] == [1, 2]
    answers = {asked[0].call_id: "PostgreSQL", asked[1].call_id: "5432"}
    first, second = asked if order == "asked" else asked[::-1]

    waiting = await session.submit(PlanSession.answer(first, answers[first.call_id]))
    # Recorded at once, shown once: only the other question is still open.
    assert not waiting.ready and [p.call_id for p in waiting.open] == [second.call_id]
    assert [p.call_id for p in await session.pending()] == [second.call_id]
    record = await session.record()
    assert {q.question: q.answer for q in record.asked_questions}[
        first.payload["message"]
    ] == answers[first.call_id]
    assert await session.resume_message() is None

    waiting = await session.submit(PlanSession.answer(second, answers[second.call_id]))
    assert waiting.ready and waiting.open == []
    calls_before = len(model.requests)
    model.add(echo_responses)
    events = await collect(session, waiting.message)
    assert len(model.requests) == calls_before + 1  # resumed once
    seen = [r for r in json.loads(final_text(events)) if r.get("question_id")]
    assert [(r["status"], r["answer"]) for r in seen] == [
        ("answered", "PostgreSQL"),
        ("answered", "5432"),
    ]
    assert all(r["message"].startswith("The user answered") for r in seen)
    record = await session.record()
    assert record.pending == []
    assert [q.answer for q in record.asked_questions] == ["PostgreSQL", "5432"]
    assert await mirror_equals_store(session)


async def test_a_second_answer_to_a_question_is_refused_with_a_code(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(list(TWO_QUESTIONS))
    await collect(session, "task")
    first, _ = await session.pending()
    await session.submit(PlanSession.answer(first, "PostgreSQL"))
    await session.submit(PlanSession.answer(first, "PostgreSQL"))  # the same reply: no-op
    with pytest.raises(ReplyError) as raised:
        await session.submit(PlanSession.answer(first, "SQLite"))
    assert raised.value.code is ReplyErrorCode.ALREADY_ANSWERED
    assert raised.value.hint
    wrong_question = PlanSession.answer(first, "x")
    wrong_question.parts[0].function_response.id = "nobody-asked"
    with pytest.raises(ReplyError) as raised:
        await session.submit(wrong_question)
    assert raised.value.code is ReplyErrorCode.UNKNOWN_REQUEST
    assert (await session.record()).asked_questions[0].answer == "PostgreSQL"


async def test_a_stale_approval_is_refused_and_changes_nothing(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. x")], [call("exit_plan_mode")])
    await collect(session, "task")
    [request] = await session.pending()
    stale = PlanSession.approve(request)
    stale.parts[0].function_response.response["revision"] = 99
    with pytest.raises(ReplyError) as raised:
        await session.submit(stale)
    assert raised.value.code is ReplyErrorCode.STALE_REPLY
    assert (await session.record()).status is PlanStatus.PENDING_APPROVAL
    assert len(await session.pending()) == 1


async def test_partial_answers_over_the_wire_are_recorded_when_given(database_url: str) -> None:
    """A host calling the runner directly with one reply at a time."""
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(list(TWO_QUESTIONS))
    await collect(session, "task")
    first, second = await session.pending()
    await collect(session, PlanSession.answer(second, "5432"))  # ADK waits for the other
    assert [p.call_id for p in await session.pending()] == [first.call_id]
    assert (await session.record()).asked_questions[1].answer == "5432"
    model.add(echo_responses)
    events = await collect(session, PlanSession.answer(first, "SQLite"))
    seen = [r for r in json.loads(final_text(events)) if r.get("question_id")]
    assert sorted(r["answer"] for r in seen) == ["5432", "SQLite"]
    assert (await session.record()).pending == []


async def test_update_and_submit_in_one_step_leave_the_mirror_equal_to_the_store(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. draft")],
        [
            call("update_plan_content", content="2. more"),
            call("exit_plan_mode", summary="ready"),
        ],
    )
    await collect(session, "task")
    record = await session.record()
    assert record.status is PlanStatus.PENDING_APPROVAL
    assert await mirror_equals_store(session)
    [request] = await session.pending()
    model.add([text("implementing")])
    await collect(session, PlanSession.approve(request))
    assert await mirror_equals_store(session)
    assert (await session.session()).state["agent_mode"] == "agent"


async def test_over_the_wire_the_batched_mirror_equals_the_store(database_url: str) -> None:
    """A host driving the runner itself (no PlanSession to settle anything afterwards)."""
    model = ScriptedLlm()
    agent = make_agent(model)
    h = Harness(agent, database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. draft")],
        [
            call("update_plan_content", content="2. more"),
            call("exit_plan_mode", summary="ready"),
        ],
    )
    await h.send("task")
    scope = PlanScope(h.app_name, h.user_id, h.session_id, agent.name)
    stored = (await plan_runtime(agent).load(scope)).state.record
    assert stored.status is PlanStatus.PENDING_APPROVAL
    assert (await h.state())["plan:orchestrator"] == stored.dump()


async def test_approving_withdraws_an_open_question_and_the_run_resumes(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. x")],
        [call("ask_user_question", question="Tabs or spaces?"), call("exit_plan_mode")],
    )
    await collect(session, "task")
    question, approval = await session.pending()
    assert (question.kind, approval.kind) == ("question", "exit")
    waiting = await session.submit(PlanSession.approve(approval))
    assert waiting.ready and waiting.open == []
    model.add(echo_responses)
    events = await collect(session, waiting.message)
    seen = json.loads(final_text(events))
    statuses = [r["status"] for r in seen if r.get("status") in ("approved", "withdrawn")]
    assert sorted(statuses) == ["approved", "withdrawn"]
    withdrawn = next(r for r in seen if r.get("status") == "withdrawn")
    assert "approved the plan before this question was answered" in withdrawn["message"]
    record = await session.record()
    assert record.status is PlanStatus.APPROVED and record.pending == []
    assert record.asked_questions[0].answer is None
    with pytest.raises(ReplyError) as raised:
        await session.submit(PlanSession.answer(question, "tabs"))
    assert raised.value.code is ReplyErrorCode.ALREADY_ANSWERED
    assert await mirror_equals_store(session)


async def test_approval_over_the_wire_answers_the_withdrawn_question_too(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. x")],
        [call("ask_user_question", question="Tabs or spaces?"), call("exit_plan_mode")],
    )
    await collect(session, "task")
    _, approval = await session.pending()
    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await collect(session, PlanSession.approve(approval))  # only the approval
    assert tool_results(events, "Write") == [{"written": "a"}]
    assert WRITES == [("a", "b")]


async def test_leaving_plan_mode_withdraws_every_open_request(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(list(TWO_QUESTIONS))
    await collect(session, "task")
    await session.leave_plan()
    waiting = await session.awaiting()
    assert waiting.open == [] and waiting.ready
    model.add(echo_responses)
    events = await collect(session, waiting.message)
    seen = json.loads(final_text(events))
    assert [r["status"] for r in seen[-2:]] == ["cancelled", "cancelled"]


async def test_a_restart_between_two_answers_continues(tmp_path: Any, database_url: str) -> None:
    from test_plan_durability import run

    started = run("ask-two", database_url, str(tmp_path))
    assert started["open"] == 1
    finished = run("answer-second", database_url, str(tmp_path), started["session_id"])
    assert finished == {
        "seen": [["answered", "PostgreSQL"], ["answered", "5432"]],
        "pending": [],
        "answers": ["PostgreSQL", "5432"],
        "model_calls": 1,
    }


# -- replies in seed 000's shapes -----------------------------------------------------------


def without_id(name: str, response: dict[str, Any]) -> types.Content:
    return types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(name=name, response=response))],
    )


async def test_a_reply_without_id_is_applied_when_it_is_unique(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. x")], [call("exit_plan_mode")])
    await collect(session, "task")
    model.add(echo_responses)
    events = await collect(session, without_id("exit_plan_mode", {"status": "approved"}))
    seen = json.loads(final_text(events))
    assert seen[-1]["status"] == "approved" and "unlocked" in seen[-1]["message"]
    assert (await session.record()).status is PlanStatus.APPROVED


async def test_a_reply_without_id_matching_several_or_none_is_an_error(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add(list(TWO_QUESTIONS))
    await collect(session, "task")
    answer = without_id("ask_user_question", {"status": "answered", "answer": "x"})
    with pytest.raises(ReplyError) as raised:
        await session.submit(answer)
    assert raised.value.code is ReplyErrorCode.AMBIGUOUS_REPLY
    with pytest.raises(RuntimeError) as wire:  # over the wire: the runner raises
        await collect(session, answer)
    assert isinstance(wire.value.__cause__, ReplyError)
    assert wire.value.__cause__.code is ReplyErrorCode.AMBIGUOUS_REPLY
    approval = without_id("exit_plan_mode", {"status": "approved"})
    with pytest.raises(ReplyError) as raised:
        await session.submit(approval)
    assert raised.value.code is ReplyErrorCode.NO_MATCHING_REQUEST
    with pytest.raises(RuntimeError) as wire:
        await collect(session, approval)
    assert wire.value.__cause__.code is ReplyErrorCode.NO_MATCHING_REQUEST
    assert len(await session.pending()) == 2  # nothing recorded, nothing lost
    first, _ = await session.pending()
    waiting = await session.submit(PlanSession.answer(first, "PostgreSQL"))
    assert len(waiting.open) == 1
    # The one still open can now be answered without an id.
    waiting = await session.submit(answer)
    assert waiting.ready


@pytest.mark.parametrize("name", ["exit_plan_mode", ""])
async def test_a_wrong_tool_name_with_a_known_id_never_asks_twice(
    database_url: str, name: str
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add([call("ask_user_question", question="Which database?")])
    await collect(session, "task")
    [request] = await session.pending()
    model.add(echo_responses)
    reply = function_reply(
        request.call_id, name, {"status": "answered", "question_id": 1, "answer": "SQLite"}
    )
    events = await collect(session, reply)
    record = await session.record()
    assert record.pending == [] and len(record.asked_questions) == 1
    assert record.asked_questions[0].answer == "SQLite"
    assert json.loads(final_text(events))[-1]["answer"] == "SQLite"


# -- mode switches while a run is in progress ---------------------------------------------


class Gate:
    """A read-only tool that blocks until released, so a test can act mid-run."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

        async def Inspect(path: str) -> dict[str, Any]:
            """Inspect a path slowly."""
            self.started.set()
            await self.release.wait()
            return {"inspected": path}

        self.tool = declare_effect(Inspect, Effect.READ)


async def run_with_switch(session: PlanSession, gate: Gate, switch: Any) -> tuple[list, Any]:
    run = asyncio.create_task(collect(session, "do the task"))
    await asyncio.wait_for(gate.started.wait(), 30)
    switched = await switch()
    mode = await session.mode()
    gate.release.set()
    return await asyncio.wait_for(run, 60), (switched, mode)


async def test_selecting_plan_mode_mid_run_applies_at_the_next_step(database_url: str) -> None:
    gate = Gate()
    model = ScriptedLlm()
    session = await open_session(database_url, model, tools=[Read, Write, gate.tool])
    model.add(
        [call("Inspect", path="src")],
        [call("Write", path="a", content="b")],
        [text("planning now")],
    )
    events, (message, during) = await run_with_switch(session, gate, session.select_plan)
    assert message.startswith("Entering plan mode")
    assert (during.active, during.pending) == (False, True)
    assert tool_results(events, "Inspect") == [{"inspected": "src"}]  # the result is kept
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    assert WRITES == []
    after = await session.mode()
    assert (after.active, after.pending, after.plan_status) == (True, None, "exploring")
    assert (await session.session()).state["agent_mode"] == "plan"
    assert await mirror_equals_store(session)


async def test_leaving_plan_mode_mid_run_applies_at_the_next_step(database_url: str) -> None:
    gate = Gate()
    model = ScriptedLlm()
    session = await open_session(
        database_url, model, tools=[Read, Write, gate.tool], state={"agent_mode": "plan"}
    )
    model.add(
        [call("Inspect", path="src")],
        [call("Write", path="a", content="b")],
        [text("done")],
    )
    events, (message, during) = await run_with_switch(session, gate, session.leave_plan)
    assert message.startswith("Leaving plan mode at the next step")
    assert (during.active, during.pending) == (True, False)
    assert tool_results(events, "Inspect") == [{"inspected": "src"}]
    assert tool_results(events, "Write") == [{"written": "a"}]
    assert (await session.record()).status is PlanStatus.CANCELLED
    after = await session.mode()
    assert (after.active, after.pending) == (False, None)
    assert (await session.session()).state["agent_mode"] == "agent"
    assert await mirror_equals_store(session)


async def test_a_leave_no_boundary_applied_applies_when_the_run_ends(
    database_url: str,
) -> None:
    """The run pauses after the step the exit was requested in: no boundary follows, so
    the exit applies when the run ends, withdrawing the question it paused on."""
    gate = Gate()
    model = ScriptedLlm()
    session = await open_session(
        database_url, model, tools=[Read, Write, gate.tool], state={"agent_mode": "plan"}
    )
    model.add([call("Inspect", path="src"), call("ask_user_question", question="Why?")])
    events, (message, _) = await run_with_switch(session, gate, session.leave_plan)
    assert message.startswith("Leaving plan mode at the next step")
    assert tool_results(events, "Inspect") == [{"inspected": "src"}]
    assert (await session.record()).status is PlanStatus.CANCELLED
    assert (await session.mode()).active is False
    waiting = await session.awaiting()
    assert waiting.open == [] and waiting.ready
    assert await mirror_equals_store(session)


# -- on_approval and the end of an approved plan ---------------------------------------------


async def test_on_approval_receives_the_plan_as_decided(database_url: str) -> None:
    decisions = []
    model = ScriptedLlm()
    session = await open_session(
        database_url,
        model,
        options=PlanOptions(on_approval=decisions.append),
        state={"agent_mode": "plan"},
    )
    model.add([call("update_plan_content", content="1. reviewed")], [call("exit_plan_mode")])
    await collect(session, "task")
    [request] = await session.pending()
    model.add([text("ok")])
    await collect(session, PlanSession.approve(request, content="1. reviewed\n2. edited"))
    [decision] = decisions
    assert decision.decision == "approved" and decision.agent_name == "orchestrator"
    assert decision.plan is not None
    assert decision.plan.status is PlanStatus.APPROVED
    assert decision.plan.content == "1. reviewed\n2. edited"
    assert decision.plan.content_revisions == decision.revision == 2
    assert decision.plan.sha256 == decision.sha256


async def test_awareness_returns_when_the_approved_plans_todos_are_done(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    session = await open_session(
        database_url,
        model,
        tools=[Read, Write, todo_write_tool("orchestrator")],
        state={"agent_mode": "plan"},
    )
    # A finished list from an earlier task must not finish the next plan.
    model.add(
        [call("update_plan_content", content="1. write a")],
        [call("exit_plan_mode")],
    )
    await collect(session, "task one")
    [request] = await session.pending()
    model.add(
        [call("todo_write", todos=[{"content": "write a", "status": "in_progress"}])],
        [call("Write", path="a", content="b")],
        [call("todo_write", todos=[{"content": "write a", "status": "completed"}])],
        [text("all done")],
    )
    await collect(session, PlanSession.approve(request))

    def system(index: int) -> str:
        instruction = model.requests[index].config.system_instruction
        return instruction if isinstance(instruction, str) else str(instruction)

    assert "## Approved plan" in system(-3)  # while implementing
    assert "## Approved plan" not in system(-1)  # after the last todo was completed
    assert PLAN_AWARENESS_MARKER in system(-1)
    record = await session.record()
    assert record.status is PlanStatus.APPROVED and record.finished_at is not None
    model.add([call("enter_plan_mode", objective="task two")])
    await collect(session, "now something unrelated")
    assert PLAN_AWARENESS_MARKER in system(-1) and "## Approved plan" not in system(-1)
    assert "enter_plan_mode" in [
        d.name for d in model.requests[-1].config.tools[0].function_declarations
    ]
    second = await session.record()
    assert second.id != record.id and second.status is PlanStatus.PENDING_ENTER
    assert [p.id for p in await session.archived()] == [record.id]


async def test_an_unreadable_store_leaves_the_mirror_alone(database_url: str) -> None:
    from plangate.adk.runtime import STATE_KIND
    from plangate.store.shared import shared_store

    model = ScriptedLlm()
    session = await open_session(database_url, model, state={"agent_mode": "plan"})
    model.add([text("planning")])
    await collect(session, "task")
    mirrored = (await session.session()).state["plan:orchestrator"]
    store = await shared_store(database_url)
    document = await store.get(STATE_KIND, session.scope.key)
    async with store.transaction() as tx:
        await tx.put(
            STATE_KIND,
            session.scope.key,
            {"record": {"status": "bogus"}},
            expected_version=document.version,
        )
    model.add([text("still here")])
    await collect(session, "go on")
    assert (await session.session()).state["plan:orchestrator"] == mirrored


async def test_write_then_submit_in_one_step_apply_in_the_order_written(
    database_url: str,
) -> None:
    """ADK runs a step's calls in parallel; a slow hook before the write must not let the
    submit run first and find the plan empty."""
    model = ScriptedLlm()

    async def slow_before_write(tool: Any, args: dict[str, Any], tool_context: Any) -> None:
        if tool.name == "update_plan_content":
            await asyncio.sleep(0.2)
        return None

    agent = make_agent(model, PlanOptions())
    callbacks = agent.before_tool_callback
    agent.before_tool_callback = [
        *(callbacks if isinstance(callbacks, list) else [callbacks] if callbacks else []),
        slow_before_write,
    ]
    runner = build_runner(agent, database_url=database_url, app_name="hitl")
    session = await PlanSession.open(runner, session_id="s1", state={"agent_mode": "plan"})
    model.add(
        [
            call("update_plan_content", content="1. fix the bug"),
            call("exit_plan_mode", summary="ready"),
        ]
    )
    events = await collect(session, "task")
    assert not [r for r in tool_results(events) if "error" in r]
    record = await session.record()
    assert record.status is PlanStatus.PENDING_APPROVAL
    assert "fix the bug" in record.content
    assert await mirror_equals_store(session)


async def test_a_stopped_run_answers_the_calls_it_cut_off(database_url: str) -> None:
    """Providers that pair each tool call with its result (OpenAI, Anthropic) refuse a
    history with a call left unanswered; a stop must not leave one behind."""
    started = asyncio.Event()

    async def slow_lookup(key: str) -> dict[str, Any]:
        """Look a key up (slowly)."""
        started.set()
        await asyncio.sleep(60)
        return {"value": key}

    model = ScriptedLlm()
    session = await open_session(database_url, model, tools=[slow_lookup])
    model.add([call("slow_lookup", key="a")])
    run = asyncio.create_task(collect(session, "look it up"))
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await session.note_stopped(surface="test")

    model.add(echo_responses)
    events = await collect(session, "what happened?")
    [seen] = json.loads(final_text(events))
    assert seen["error"].startswith("RUN_STOPPED")
    request = model.requests[-1]
    calls = [p.function_call.id for c in request.contents for p in c.parts or [] if p.function_call]
    answered = [
        p.function_response.id
        for c in request.contents
        for p in c.parts or []
        if p.function_response
    ]
    assert calls and calls == answered
    assert any(entry.event.kind == "run.stopped" for entry in await session.journal())


# -- housekeeping -----------------------------------------------------------------------


async def test_plan_locks_are_dropped_once_their_sessions_are_idle(database_url: str) -> None:
    """A server sees many sessions; the per-plan locks of idle ones must not pile up."""
    import gc

    from plangate.adk import tools as plan_tools

    model = ScriptedLlm()
    agent = make_agent(model)
    runner = build_runner(agent, database_url=database_url, app_name="hitl")
    for number in range(12):
        session = await PlanSession.open(
            runner, session_id=f"many-{number}", state={"agent_mode": "plan"}
        )
        model.add(list(TWO_QUESTIONS))
        await collect(session, "add persistence")
        assert len(await session.pending()) == 2
    gc.collect()
    assert len(plan_tools._locks) == 0
