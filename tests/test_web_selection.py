"""The Plan/Agent selection an AG-UI client sends in ``state``: only a change of it by
the user is a choice. A client that keeps sending ``agent_mode=plan`` after approval
switched the thread back to ``agent`` (the seed's page does: it ignores state deltas)
does not start a new plan. Through the real app (httpx ASGITransport), the real Runner,
a scripted model and SQLite / PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from harness import WRITES, make_agent
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
THREAD = "t-selection"


class SeedClient:
    """A client like the seed's page: every run carries ``state.agent_mode`` from its own
    toggle, and it answers a paused call with an assistant + ``role: "tool"`` pair."""

    def __init__(self, database_url: str, model: ScriptedLlm) -> None:
        self.model = model
        self.toggle = "agent"
        self.runner = build_runner(make_agent(model), database_url=database_url, app_name="web")
        app = create_app(runner=self.runner, require_token=False, token=None)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)

    @property
    def session(self) -> PlanSession:
        return PlanSession(self.runner, user_id="user", session_id=THREAD)

    async def run(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        body = run_input(THREAD, messages=messages, state={"agent_mode": self.toggle})
        response = await self.http.post("/api/agent", json=body)
        assert response.status_code == 200, response.text
        events = sse_events(response.text)
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        return events

    async def say(self, words: str) -> list[dict[str, Any]]:
        return await self.run([user_message(words)])

    async def answer(self, interrupt: dict[str, Any], reply: dict[str, Any]) -> list[dict]:
        call_id = interrupt["toolCallId"]
        name = interrupt["metadata"]["tool_name"]
        assistant = {
            "id": uuid.uuid4().hex,
            "role": "assistant",
            "toolCalls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        }
        tool = {
            "id": uuid.uuid4().hex,
            "role": "tool",
            "toolCallId": call_id,
            "content": json.dumps(reply),
        }
        return await self.run([assistant, tool])

    async def close(self) -> None:
        await self.http.aclose()


@pytest.fixture
async def client(database_url: str):
    seed = SeedClient(database_url, ScriptedLlm())
    yield seed
    await seed.close()


def results(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    ids = {e["toolCallId"] for e in events if e.get("toolCallName") == name}
    return [
        json.loads(e["content"])
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] in ids
    ]


def snapshot(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT")


async def approve_a_plan(client: SeedClient) -> str:
    """The user toggles Plan, the agent drafts, the user approves; the plan's id."""
    client.toggle = "plan"
    client.model.add(
        [call("update_plan_content", content="1. Write a", mode="replace")],
        [call("exit_plan_mode", summary="write a")],
    )
    events = await client.say("plan the change")
    [approval] = events[-1]["outcome"]["interrupts"]
    client.model.add([text("approved, implementing")])
    events = await client.answer(approval, {"status": "approved", "reviewer_note": ""})
    record = await client.session.record()
    assert record is not None and record.status is PlanStatus.APPROVED
    stored = await client.session.session()
    assert stored.state["agent_mode"] == "agent"  # approval switched the thread back
    return record.id


async def test_a_client_still_sending_plan_after_approval_keeps_the_approved_plan(
    client: SeedClient,
) -> None:
    approved = await approve_a_plan(client)
    assert client.toggle == "plan"  # the seed's page still shows Plan
    client.model.add([call("Write", path="a", content="b")], [text("done")])
    events = await client.say("go on")
    assert results(events, "Write") == [{"written": "a"}]
    assert WRITES == [("a", "b")]
    record = await client.session.record()
    assert record is not None and record.id == approved and record.status is PlanStatus.APPROVED
    assert snapshot(events)["agent_mode"] == "agent"
    assert "agent_mode:sent" not in snapshot(events)  # kept for the server, not shared
    assert (await client.session.mode()).active is False


async def test_toggling_away_and_back_to_plan_starts_a_new_plan(client: SeedClient) -> None:
    approved = await approve_a_plan(client)
    client.toggle = "agent"  # the user's toggle: a change, but the thread is in agent already
    client.model.add([text("ok")])
    await client.say("thanks")
    record = await client.session.record()
    assert record is not None and record.id == approved and record.status is PlanStatus.APPROVED

    client.toggle = "plan"  # a change back: the user wants a new plan
    client.model.add([call("Write", path="c", content="d")], [text("planning")])
    events = await client.say("plan the next task")
    assert results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    record = await client.session.record()
    assert record is not None and record.id != approved
    assert record.status is PlanStatus.EXPLORING
    assert WRITES == []


async def test_the_first_plan_sent_on_a_thread_enters_plan_mode(client: SeedClient) -> None:
    client.toggle = "plan"
    client.model.add([text("exploring")])
    events = await client.say("hello")
    assert snapshot(events)["agent_mode"] == "plan"
    record = await client.session.record()
    assert record is not None and record.status is PlanStatus.EXPLORING
    client.model.add([text("still exploring")])
    await client.say("and?")  # the same selection again changes nothing
    again = await client.session.record()
    assert again is not None and again.id == record.id
