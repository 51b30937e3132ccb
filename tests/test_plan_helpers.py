"""The tRPC-Agent Plan Mode helpers: the plan's state key and text form, its ASCII card
and task subjects (pure), and the two tool builders -- the last through the real Runner,
as are the pending payloads a paused call publishes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness import Harness, make_agent, paused_call_id, tool_results
from plangate.adk import (
    PlanToolSet,
    UpdatePlanContentTool,
    get_plan_record,
    make_enter_plan_mode_tool,
    plan_runtime,
)
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import (
    PlanDecodeError,
    PlanRecord,
    PlanStatus,
    decode_plan,
    encode_plan,
    plan_to_task_subjects,
    render_plan,
    state_key,
)
from plangate.plan import transitions as t

NOW = 1_700_000_000.0


def drafting(content: str = "## Setup\n## Implement") -> PlanRecord:
    record = t.force_enter(None, objective="Build a dashboard", now=NOW)
    assert record is not None
    return t.update_content(record.record, content=content, mode="replace", now=NOW + 1).record


def last_reply_seen(model: ScriptedLlm) -> dict[str, Any]:
    """The function response the model was shown last."""
    part = (model.requests[-1].contents[-1].parts or [])[0]
    assert part.function_response is not None
    return dict(part.function_response.response or {})


# -- pure helpers ---------------------------------------------------------------------------


def test_encode_decode_roundtrip() -> None:
    record = drafting()
    text_form = encode_plan(record)
    assert isinstance(text_form, str) and json.loads(text_form)["status"] == "drafting"
    for form in (text_form, record.dump(), json.loads(text_form)):
        decoded = decode_plan(form)
        assert decoded == record
        assert decoded is not None and decoded.objective == "Build a dashboard"
        assert decoded.status is PlanStatus.DRAFTING


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "list, not an object"),
        ('"drafting"', "str, not an object"),
        ({}, "invalid id"),
        ({"id": "p", "status": "done", "objective": "o"}, "invalid status"),
    ],
)
def test_a_malformed_plan_raises_instead_of_reading_as_no_plan(value: object, reason: str) -> None:
    with pytest.raises(PlanDecodeError, match=reason):
        decode_plan(value)  # type: ignore[arg-type]


def test_only_none_decodes_to_no_plan() -> None:
    assert decode_plan(None) is None


def test_state_key_names_the_branch() -> None:
    assert state_key("orchestrator") == "plan:orchestrator"
    assert state_key() == "plan"
    assert state_key("a", prefix="design") == "design:a"
    with pytest.raises(ValueError, match="temp:"):
        state_key("a", prefix="temp:plan")


def test_plan_to_task_subjects() -> None:
    content = (
        "# Title\nintro line\n## Setup\nplain line\n### detail\n## Implement ##\n"
        "```md\n## not a heading\n```\n##no-space\n"
    )
    assert plan_to_task_subjects(content) == ["Setup", "Implement"]
    assert plan_to_task_subjects("no headings at all") == []


def test_render_plan_shows_the_first_eight_lines_in_a_card() -> None:
    content = "\n".join(f"line {i}" for i in range(1, 13))
    card = render_plan(drafting(content)).splitlines()
    assert card[0] == card[3] == card[-1] == "+" + "-" * 70 + "+"
    assert all(len(row) == 72 for row in card)
    assert "Plan: Build a dashboard" in card[1]
    assert "status: drafting" in card[2] and "revision: 1" in card[2]
    body = [row.strip("| ").rstrip() for row in card[4:-1]]
    assert body == [*(f"line {i}" for i in range(1, 9)), "... (4 more lines)"]


def test_render_plan_makes_hidden_characters_visible() -> None:
    card = render_plan(drafting("approve\u202e evil\x1b[2J"))
    assert "\u202e" not in card and "\x1b" not in card
    assert "approve\\u202e evil\\u001b[2J" in card
    exploring = t.force_enter(None, objective="o", now=NOW)
    assert exploring is not None
    assert "(no content yet)" in render_plan(exploring.record)


# -- the tool builders, through the Runner -----------------------------------------------------


async def test_the_toolset_mounts_the_tools_the_builders_make() -> None:
    agent = make_agent(ScriptedLlm())
    runtime = plan_runtime(agent)
    assert runtime is not None
    toolset = next(tool for tool in agent.tools if isinstance(tool, PlanToolSet))
    tools = {tool.name: tool for tool in await toolset.get_tools()}
    assert isinstance(tools["update_plan_content"], UpdatePlanContentTool)
    assert tools["enter_plan_mode"].is_long_running
    assert not tools["update_plan_content"].is_long_running
    built = make_enter_plan_mode_tool(runtime)
    assert built.name == "enter_plan_mode" and built.is_long_running
    assert UpdatePlanContentTool(runtime).name == "update_plan_content"


async def test_request_enter_approve_and_reject(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start()
    model.add([call("enter_plan_mode", objective="fix the bug")])
    enter_id = paused_call_id(await h.send("fix the stock bug"), "enter_plan_mode")
    record = await h.record()
    assert record is not None and record.status is PlanStatus.PENDING_ENTER
    model.add([text("exploring")])
    await h.reply(enter_id, "enter_plan_mode", {"status": "approved"})
    record = await h.record()
    assert record is not None and record.status is PlanStatus.EXPLORING
    assert last_reply_seen(model)["status"] == "approved"

    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url, app_name="reject")
    await h.start()
    model.add([call("enter_plan_mode", objective="fix the bug")])
    enter_id = paused_call_id(await h.send("fix the stock bug"), "enter_plan_mode")
    model.add([text("acting")])
    await h.reply(enter_id, "enter_plan_mode", {"status": "rejected", "reviewer_note": "no"})
    assert last_reply_seen(model)["status"] == "rejected"
    record = await h.record()
    assert record is not None and not record.is_gate_active()


async def test_state_machine_enter_update_exit_approve(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="## Setup\n## Implement", mode="replace")],
        [call("exit_plan_mode", summary="ready")],
    )
    events = await h.send("build a dashboard")
    assert tool_results(events, "update_plan_content")[0]["plan"]["status"] == "drafting"
    exit_id = paused_call_id(events, "exit_plan_mode")
    record = await h.record()
    assert record is not None and record.status is PlanStatus.PENDING_APPROVAL
    model.add([text("implementing")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    record = await h.record()
    assert record is not None and record.status is PlanStatus.APPROVED
    assert plan_to_task_subjects(record.content) == ["Setup", "Implement"]
    # The mirror decodes with the helpers as it is stored, and as text.
    mirrored = (await h.state())[state_key("orchestrator")]
    assert decode_plan(mirrored) == decode_plan(encode_plan(record)) == record


async def test_reject_returns_to_drafting(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. Do it", mode="replace")],
        [call("exit_plan_mode")],
    )
    exit_id = paused_call_id(await h.send("build it"), "exit_plan_mode")
    model.add([text("revising")])
    await h.reply(exit_id, "exit_plan_mode", {"status": "rejected", "reviewer_note": "tests?"})
    record = await h.record()
    assert record is not None and record.status is PlanStatus.DRAFTING
    assert record.reviewer_note == "tests?"
    assert last_reply_seen(model)["status"] == "rejected"


async def test_a_corrupt_mirror_is_not_read_as_no_plan(database_url: str) -> None:
    model = ScriptedLlm()
    h = Harness(make_agent(model), database_url)
    await h.start({"plan:orchestrator": "{corrupt"})
    with pytest.raises(PlanDecodeError):
        get_plan_record(await h.session())


# -- what a paused call publishes ----------------------------------------------------------


async def test_each_paused_call_publishes_its_pending_payload(database_url: str) -> None:
    """A paused call has no tool result (ADK pauses only on ``None``); its pending payload
    is the request's ``payload``, in ``PlanSession.pending()`` and in the state mirror."""
    model = ScriptedLlm()
    agent = make_agent(model)
    h = Harness(agent, database_url)
    await h.start()
    session = PlanSession(h.runner, user_id=h.user_id, session_id=h.session_id)

    async def published(name: str) -> dict[str, object]:
        (request,) = await session.pending()
        assert request.tool_name == name
        mirrored = (await h.state())[state_key("orchestrator")]["pending"]
        assert [p["payload"] for p in mirrored] == [request.payload]
        return request.payload

    model.add([call("enter_plan_mode", objective="fix the bug")])
    events = await h.send("fix the stock bug")
    enter_id = paused_call_id(events, "enter_plan_mode")
    assert tool_results(events, "enter_plan_mode") == []  # paused: no result in the run
    paused = next(e for e in events if e.long_running_tool_ids)
    assert enter_id in (paused.long_running_tool_ids or set())
    payload = await published("enter_plan_mode")
    assert payload["status"] == "pending_enter" and payload["objective"] == "fix the bug"
    assert {"message", "plan_id", "approval_id", "timestamp"} <= payload.keys()

    model.add([call("ask_user_question", question="Which database?", options=["PG", "SQLite"])])
    events = await h.reply(enter_id, "enter_plan_mode", {"status": "approved"})
    ask_id = paused_call_id(events, "ask_user_question")
    payload = await published("ask_user_question")
    assert payload["status"] == "pending_question" and payload["question_id"] == 1
    assert payload["message"] == "Which database?" and payload["options"] == ["PG", "SQLite"]

    model.add(
        [call("update_plan_content", content="1. Use PG", mode="replace")],
        [call("exit_plan_mode", summary="use PG")],
    )
    events = await h.reply(ask_id, "ask_user_question", {"answer": "PG", "question_id": 1})
    paused_call_id(events, "exit_plan_mode")
    payload = await published("exit_plan_mode")
    assert payload["status"] == "pending_approval" and payload["content"] == "1. Use PG"
    assert payload["message"] == "use PG" and payload["preview"] == "1. Use PG"
