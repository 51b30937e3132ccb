"""The approved plan as a capability over AG-UI (issue 14, the web part).

The approval interrupt carries the scope (its line and its parts) and asks for the scope
and the permission in its reply schema; a call outside the scope ends the run with a
``scope_amendment`` interrupt and, under ``ask_each_edit``, every write with an
``edit_review`` interrupt holding its unified diff; each answer is recorded when given and
the run resumes after the last one, whose result is in the stream; a bad scope or
permission is refused with its code and changes nothing; ADK's confirmation of a paused
call never shows as a tool call, live or read back. Through the real app (httpx
ASGITransport), the real Runner, the coding agent's real tools, a scripted model, SQLite
and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from plangate.adk.capability import CONFIRMATION_CALL
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.plan.scope import Scope
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
THREAD = "t-scope"
PLAN = "1. Fix the guard in inventory/stock.py\n2. Run the tests\n"
SCOPE = {"write": ["inventory/stock.py"], "commands": ["python -m pytest"]}
STOCK = "inventory/stock.py"
DRIFT = "CHANGELOG.md"


class Web:
    """The app over the coding agent and a scripted model, an HTTP client, the session."""

    def __init__(self, database_url: str, workspace: Path) -> None:
        from plangate.web.server import create_app

        self.model = ScriptedLlm()
        self.workspace = workspace
        agent = build_coding_agent(workspace, self.model)
        self.runner = build_runner(agent, database_url=database_url, app_name="web")
        app = create_app(runner=self.runner, require_token=False, token=None)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)

    @property
    def session(self) -> PlanSession:
        return PlanSession(self.runner, user_id="user", session_id=THREAD)

    async def run(self, **fields: Any) -> list[dict[str, Any]]:
        response = await self.http.post("/api/agent", json=run_input(THREAD, **fields))
        assert response.status_code == 200, response.text
        return sse_events(response.text)

    async def answer(self, interrupt: dict[str, Any], **payload: Any) -> list[dict[str, Any]]:
        entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
        return await self.run(resume=[entry])

    async def planned(self, *after: Any) -> dict[str, Any]:
        """The plan with SCOPE waits for approval; the model then plays ``after``."""
        self.model.add(
            [call("update_plan_content", content=PLAN, mode="replace", scope=SCOPE)],
            [call("exit_plan_mode", summary="ready")],
            *after,
        )
        events = await self.run(messages=[user_message("fix it")], state={"agent_mode": "plan"})
        (approval,) = interrupts(events)
        return approval

    async def footprint(self) -> tuple[int, int, Any]:
        stored = await self.session.session()
        state = await self.session.plan_state()
        return len(stored.events), len(await self.session.journal()), state.model_dump()

    async def thread(self) -> dict[str, Any]:
        return (await self.http.get(f"/api/threads/{THREAD}")).json()


@pytest.fixture
async def web(database_url: str, tmp_path: Path):
    client = Web(database_url, copy_sample_workspace(tmp_path / "ws"))
    yield client
    await client.http.aclose()


def interrupts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt", finished
    return finished["outcome"]["interrupts"]


def replies(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        e["toolCallId"]: json.loads(e["content"])
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e["messageId"].startswith("reply:")
    }


def tool_names(events: list[dict[str, Any]]) -> set[str]:
    return {e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"}


async def test_the_approval_interrupt_shows_the_scope_and_asks_for_scope_and_permission(
    web: Web,
) -> None:
    approval = await web.planned()
    assert approval["reason"] == "plan_approval"
    meta = approval["metadata"]
    assert meta["scope"] == {**SCOPE, "network": False}
    assert meta["scope_summary"] == (
        "This plan may write `inventory/stock.py`; run `python -m pytest`; no network."
    )
    assert meta["permission_options"] == ["auto", "ask_each_edit"]
    properties = approval["responseSchema"]["properties"]
    assert properties["permission"]["enum"] == ["auto", "ask_each_edit"]
    assert set(properties["scope"]["properties"]) == {"write", "commands", "network"}
    assert properties["scope"]["additionalProperties"] is False


async def test_a_bad_scope_or_permission_is_refused_with_its_code_and_changes_nothing(
    web: Web,
) -> None:
    approval = await web.planned()
    before = await web.footprint()
    bad = [
        ({"scope": {"write": ["../outside.txt"]}}, "leaves the workspace"),
        ({"scope": {"write": ["/etc/passwd"]}}, "relative to the workspace"),
        ({"scope": {"writes": ["a.py"]}}, "unknown field"),
        ({"scope": {"network": "yes"}}, "network"),
        ({"scope": ["not", "an", "object"]}, "must be an object"),
        ({"permission": "yolo"}, "'permission' must be 'auto' or 'ask_each_edit'"),
        ({"permission": 1}, "'permission' must be"),
    ]
    for payload, reason in bad:
        events = await web.answer(approval, decision="approve", **payload)
        error = events[-1]
        assert error["type"] == "RUN_ERROR", (payload, error)
        assert error["code"] == "INVALID_REPLY" and reason in error["message"], (payload, error)
        assert await web.footprint() == before, payload
    assert [i["id"] for i in (await web.thread())["interrupts"]] == [approval["id"]]
    assert not (web.workspace / "outside.txt").exists()


async def test_a_drift_pauses_for_an_amendment_and_approving_widens_the_scope(
    web: Web,
) -> None:
    approval = await web.planned(
        [
            call("Write", path=STOCK, content="# fixed\n"),
            call("Write", path=DRIFT, content="- fixed\n"),
        ],
        [text("done")],
    )
    events = await web.answer(approval, decision="approve", permission="auto")
    (amendment,) = interrupts(events)
    assert amendment["reason"] == "scope_amendment"
    assert amendment["message"] == f"The agent also wants to write `{DRIFT}` (Write {DRIFT})."
    meta = amendment["metadata"]
    assert meta["wants"] == {"write": [DRIFT], "commands": [], "network": False}
    assert meta["scope"] == {**SCOPE, "network": False} and meta["revision"] == 1
    assert meta["diff"].startswith(f"--- /dev/null\n+++ b/{DRIFT}\n")
    assert "scope" in amendment["responseSchema"]["properties"]
    assert CONFIRMATION_CALL not in tool_names(events)
    assert (web.workspace / STOCK).read_text() == "# fixed\n"
    assert not (web.workspace / DRIFT).exists()
    # An answer bound to another revision than the one shown changes nothing.
    events = await web.answer(amendment, decision="approve", revision=7)
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STALE_RESUME"
    assert not (web.workspace / DRIFT).exists()
    # The reviewer grants a glob rather than the one file.
    widened = {**SCOPE, "write": [STOCK, "*.md"]}
    events = await web.answer(amendment, decision="approve", scope=widened)
    assert events[-1]["outcome"]["type"] == "success"
    (result,) = replies(events).values()
    assert result["status"] == "approved" and result["request"] == "amendment"
    assert (web.workspace / DRIFT).read_text() == "- fixed\n"
    record = await web.session.record()
    assert record is not None and record.scope == Scope(**widened)
    assert record.content_revisions == 2 and record.revisions[-1].author == "reviewer"
    journal = [e.event for e in await web.session.journal()]
    decided = next(e for e in journal if e.kind == "plan.amendment")
    assert decided.actor == "user" and decided.detail["outcome"] == "approved"


async def test_a_refused_amendment_leaves_the_file_and_tells_the_model(web: Web) -> None:
    approval = await web.planned(
        [call("Write", path=DRIFT, content="- fixed\n")], [text("understood")]
    )
    (amendment,) = interrupts(await web.answer(approval, decision="approve"))
    events = await web.answer(amendment, decision="reject", reviewer_note="not in this task")
    assert events[-1]["outcome"]["type"] == "success"
    (result,) = replies(events).values()
    assert result["code"] == "SCOPE_AMENDMENT_REFUSED" and result["request"] == "amendment"
    assert not (web.workspace / DRIFT).exists()
    seen = [
        p.function_response.response
        for p in web.model.requests[-1].contents[-1].parts or []
        if p.function_response is not None
    ]
    assert [s["code"] for s in seen if s] == ["SCOPE_AMENDMENT_REFUSED"]
    record = await web.session.record()
    assert record is not None and record.scope == Scope(**SCOPE)


async def test_ask_each_edit_pauses_every_write_of_a_batch_with_its_diff(web: Web) -> None:
    old = (web.workspace / STOCK).read_text()
    new = old.replace("quantity > on_hand + 1", "quantity > on_hand")
    approval = await web.planned(
        [
            call("Write", path=STOCK, content=new),
            call("Edit", path=STOCK, old_string="def available", new_string="def on_hand"),
        ],
        [text("done")],
    )
    events = await web.answer(approval, decision="approve", permission="ask_each_edit")
    first, second = interrupts(events)
    assert [first["reason"], second["reason"]] == ["edit_review", "edit_review"]
    # Asked in the model's call order, whichever of the two paused calls committed first.
    pending = await web.session.pending()
    assert [(p.tool_name, p.call_index) for p in pending] == [("Write", 0), ("Edit", 1)]
    assert (
        "-        if quantity > on_hand + 1:\n+        if quantity > on_hand:\n"
        in (first["metadata"]["diff"])
    )
    assert "+    def on_hand(" in second["metadata"]["diff"]
    assert set(first["responseSchema"]["properties"]) == {
        "decision",
        "reviewer_note",
        "revision",
        "sha256",
    }
    assert (web.workspace / STOCK).read_text() == old
    # The first answer is recorded and shown; the run waits for the second.
    events = await web.answer(first, decision="approve")
    assert replies(events) == {
        first["toolCallId"]: {
            "status": "approved",
            "message": "The user approved the edit; the call ran.",
            "request": "edit",
        }
    }
    assert [i["id"] for i in interrupts(events)] == [second["id"]]
    assert (web.workspace / STOCK).read_text() == old
    # The last answer resumes the run, and its result is in the stream too.
    events = await web.answer(second, decision="reject")
    assert replies(events)[second["toolCallId"]]["code"] == "EDIT_REFUSED"
    assert events[-1]["outcome"]["type"] == "success"
    assert (web.workspace / STOCK).read_text() == new
    assert CONFIRMATION_CALL not in tool_names(events)
    # Read back: one reply per decision, no confirmation plumbing.
    thread = await web.thread()
    names = [
        c["function"]["name"]
        for m in thread["messages"]
        if m["role"] == "assistant"
        for c in m.get("toolCalls") or []
    ]
    assert CONFIRMATION_CALL not in names and names.count("Write") == 1
    decided = [
        json.loads(m["content"]).get("request")
        for m in thread["messages"]
        if m["role"] == "tool" and m["id"].startswith("reply:")
    ]
    assert decided == [None, "edit", "edit"]  # the plan approval, then the two edits


async def test_a_seed_style_tool_message_answers_an_amendment(web: Web) -> None:
    approval = await web.planned([call("Write", path=DRIFT, content="x\n")], [text("done")])
    (amendment,) = interrupts(await web.answer(approval, decision="approve"))
    reply = {
        "id": "m1",
        "role": "tool",
        "toolCallId": amendment["toolCallId"],
        "content": json.dumps({"status": "approved"}),
    }
    events = await web.run(messages=[reply])
    assert events[-1]["outcome"]["type"] == "success"
    assert (web.workspace / DRIFT).read_text() == "x\n"
    record = await web.session.record()
    assert record is not None and record.status is PlanStatus.APPROVED
    assert record.scope is not None and DRIFT in record.scope.write


POLICY = """
version = 1

[[tool]]
name = "deploy"
effect = "network"
planning = "deny"
acting = "ask"
justification = "it reaches production"
"""


async def test_a_call_the_policy_file_asks_for_is_a_tool_call_interrupt(
    database_url: str, tmp_path: Path
) -> None:
    from harness import make_agent
    from plangate.adk import PlanOptions
    from plangate.web.server import create_app

    deployed: list[str] = []

    def deploy(target: str) -> dict[str, Any]:
        """Deploy the service."""
        deployed.append(target)
        return {"deployed": target}

    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    model = ScriptedLlm()
    agent = make_agent(model, PlanOptions(policy_file=policy), tools=[deploy])
    runner = build_runner(agent, database_url=database_url, app_name="web")
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:

        async def run(**fields: Any) -> list[dict[str, Any]]:
            response = await http.post("/api/agent", json=run_input(THREAD, **fields))
            return sse_events(response.text)

        model.add(
            [call("update_plan_content", content="1. deploy\n")],
            [call("exit_plan_mode")],
            [call("deploy", target="prod")],
            [text("deployed")],
        )
        (approval,) = interrupts(
            await run(messages=[user_message("ship it")], state={"agent_mode": "plan"})
        )
        approve = {"decision": "approve"}
        resume = [{"interruptId": approval["id"], "status": "resolved", "payload": approve}]
        (asked,) = interrupts(await run(resume=resume))
        assert asked["reason"] == "tool_call" and asked["metadata"]["tool_name"] == "deploy"
        assert "it reaches production" in asked["message"]
        assert "scope" not in asked["responseSchema"]["properties"]
        assert deployed == []
        approve = {"decision": "approve"}
        resume = [{"interruptId": asked["id"], "status": "resolved", "payload": approve}]
        events = await run(resume=resume)
        assert events[-1]["outcome"]["type"] == "success"
        assert replies(events)[asked["toolCallId"]]["request"] == "tool"
        assert deployed == ["prod"]
