"""The AG-UI endpoint over HTTP: event order, state sync, interrupts and resume, safety,
and protocol governance (state, handoffs, failed runs, journal).

Everything runs through the real app (httpx ASGITransport), the real ADK Runner, the
coding agent (with the data tools of ``plangate serve`` for the protocol tests) and the
offline demo model over a copied sample workspace and the shipped sample database.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from ag_ui.core import TextMessageContentEvent
from google.adk.agents import LlmAgent

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.protocols import get_protocol_state
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.data import DataCatalog
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.web.agui import (
    StateKeys,
    StateMirror,
    event_text,
    protocol_failure,
    shared_state,
)
from plangate.web.server import create_app
from web_support import demo_app, run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
THREAD = "t-protocol"


class Client:
    """One app, one HTTP client, and the thread's PlanSession for reading state back."""

    def __init__(self, app: Any, http: httpx.AsyncClient, workspace: Path) -> None:
        self.app = app
        self.http = http
        self.workspace = workspace

    @property
    def runner(self):
        return self.app.state.web.runner

    def session(self, thread: str = THREAD) -> PlanSession:
        return PlanSession(self.runner, user_id="user", session_id=thread)

    async def run(self, thread: str = THREAD, **fields: Any) -> list[dict[str, Any]]:
        response = await self.http.post("/api/agent", json=run_input(thread, **fields))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_events(response.text)

    async def say(self, text: str, thread: str = THREAD, mode: str | None = None) -> list[dict]:
        state = {"agent_mode": mode} if mode else None
        return await self.run(thread, messages=[user_message(text)], state=state)

    async def resume(self, interrupt: dict, thread: str = THREAD, status="resolved", **payload):
        entry = {"interruptId": interrupt["id"], "status": status, "payload": payload}
        return await self.run(thread, resume=[entry])

    async def stored_state(self, thread: str = THREAD) -> dict[str, Any]:
        session = self.session(thread)
        return shared_state((await session.session()).state, StateKeys.of(session))

    async def footprint(self, thread: str = THREAD) -> tuple[int, int, Any]:
        """What a refused input must leave untouched: events, journal and plan state."""
        session = self.session(thread)
        stored = await session.session()
        journal = await session.journal()
        state = await session.plan_state()
        return len(stored.events), len(journal), state.model_dump(mode="json")


@pytest.fixture
async def client(tmp_path: Path):
    app, workspace = demo_app(tmp_path)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield Client(app, http, workspace)


def types_of(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def replay(events: list[dict]) -> dict[str, Any]:
    """The client's view of state after a run: the snapshot with every delta applied."""
    [snapshot] = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    state = snapshot["snapshot"]
    for event in events:
        if event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


def interrupts(events: list[dict]) -> list[dict]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"]["type"] == "interrupt"
    return finished["outcome"]["interrupts"]


def tool_results(events: list[dict], name: str) -> list[dict]:
    names = {e["toolCallId"]: e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"}
    return [
        json.loads(e["content"])
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and names.get(e["toolCallId"]) == name
    ]


def assert_well_formed(events: list[dict]) -> None:
    """RUN_STARTED, STATE_SNAPSHOT first; one terminal event last; streams nest properly."""
    kinds = types_of(events)
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert sum(k in ("RUN_FINISHED", "RUN_ERROR") for k in kinds) == 1
    open_text: str | None = None
    open_calls: set[str] = set()
    started: set[str] = set()
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            assert open_text is None
            open_text = event["messageId"]
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] == open_text and event["delta"]
        elif kind == "TEXT_MESSAGE_END":
            assert event["messageId"] == open_text
            open_text = None
        elif kind == "TOOL_CALL_START":
            open_calls.add(event["toolCallId"])
            started.add(event["toolCallId"])
        elif kind == "TOOL_CALL_ARGS":
            assert event["toolCallId"] in open_calls
            json.loads(event["delta"])
        elif kind == "TOOL_CALL_END":
            open_calls.remove(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            assert event["toolCallId"] not in open_calls
            assert event["toolCallId"] in started or event["messageId"].startswith("reply:")
    assert open_text is None and not open_calls


async def plan_to_question(client: Client) -> list[dict]:
    events = await client.say("Fix the failing test", mode="plan")
    [question] = interrupts(events)
    assert question["reason"] == "question"
    return events


async def plan_to_approval(client: Client) -> tuple[list[dict], dict]:
    [question] = interrupts(await plan_to_question(client))
    events = await client.resume(question, answer="Raise an error")
    [approval] = interrupts(events)
    assert approval["reason"] == "plan_approval"
    return events, approval


# -- event order and state ----------------------------------------------------------------


async def test_a_plan_run_streams_in_order_and_pauses_on_the_question(client: Client) -> None:
    events = await plan_to_question(client)
    assert_well_formed(events)
    kinds = types_of(events)
    assert events[0]["threadId"] == THREAD and events[0]["protocolVersion"] == "1.0"
    assert events[-1]["threadId"] == THREAD and events[-1]["runId"] == events[0]["runId"]
    # The selection arrives as state and is reflected back from the first event on.
    assert events[1]["snapshot"]["agent_mode"] == "plan"
    assert "TEXT_MESSAGE_CONTENT" in kinds and "STATE_DELTA" in kinds
    refused = tool_results(events, "Edit")
    assert refused and refused[0]["error"].startswith("PLAN_MODE_GATE")
    [question] = interrupts(events)
    ask = [e for e in events if e.get("toolCallName") == "ask_user_question"]
    assert question["toolCallId"] == ask[0]["toolCallId"]
    assert question["metadata"]["question_id"] == 1
    assert len(question["metadata"]["options"]) == 2
    assert question["responseSchema"]["required"] == ["answer"]
    assert replay(events) == await client.stored_state()


async def test_snapshot_and_deltas_track_the_plan_while_the_run_streams(client: Client) -> None:
    events, approval = await plan_to_approval(client)
    assert_well_formed(events)
    assert replay(events) == await client.stored_state()
    # The draft reaches the client as a delta before the run ends, not only at the end.
    state = events[1]["snapshot"]
    drafting_at = None
    for index, event in enumerate(events):
        if event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
            plan = state["plan:orchestrator"]
            if plan["status"] == "drafting" and plan["content"] and drafting_at is None:
                drafting_at = index
    assert drafting_at is not None and drafting_at < len(events) - 2
    # The human's answer comes back as the canonical result of the paused call.
    [reply] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"][:1]
    assert reply["messageId"].startswith("reply:")
    assert json.loads(reply["content"])["answer"] == "Raise an error"
    record = state["plan:orchestrator"]
    assert approval["metadata"]["revision"] == record["contentRevisions"] == 1
    assert approval["metadata"]["sha256"] == record["sha256"]
    assert approval["metadata"]["content"] == record["content"]
    assert approval["id"] == record["pending"][0]["approvalId"]


async def test_approve_with_an_edit_unlocks_writes_and_flips_to_agent(client: Client) -> None:
    _, approval = await plan_to_approval(client)
    edited = approval["metadata"]["content"] + "\n## Note\nKeep the change minimal.\n"
    events = await client.resume(approval, decision="approve", content=edited, reviewer_note="ok")
    assert_well_formed(events)
    assert events[-1]["outcome"]["type"] == "success"
    assert tool_results(events, "Edit")[0] == {"path": "inventory/stock.py", "replacements": 1}
    assert tool_results(events, "Bash")[0]["exit_code"] == 0
    assert "5 passed" in tool_results(events, "Bash")[0]["stdout"]
    state = replay(events)
    assert state == await client.stored_state()
    assert state["agent_mode"] == "agent"
    assert state["plan:orchestrator"]["status"] == "approved"
    assert state["plan:orchestrator"]["content"] == edited
    assert state["plan:orchestrator"]["revisions"][-1]["author"] == "reviewer"
    assert all(t["status"] == "completed" for t in state["todos:orchestrator"])
    assert "if quantity > on_hand:\n" in (client.workspace / "inventory/stock.py").read_text()


async def test_entry_confirmation_interrupt_and_both_answers(client: Client) -> None:
    events = await client.say("Fix the failing test", thread="t-enter")
    [entry] = interrupts(events)
    assert entry["reason"] == "plan_entry"
    assert entry["responseSchema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert "Fix the failing test" in entry["message"]
    events = await client.resume(entry, thread="t-enter", decision="approve")
    assert_well_formed(events)
    assert interrupts(events)[0]["reason"] == "question"
    assert replay(events) == await client.stored_state("t-enter")

    events = await client.say("Fix the failing test", thread="t-decline")
    [entry] = interrupts(events)
    events = await client.resume(entry, thread="t-decline", decision="reject")
    assert events[-1]["outcome"]["type"] == "success"
    assert replay(events)["plan:orchestrator"]["status"] == "cancelled"
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "no plan" in said


async def test_reject_sends_the_plan_back_and_a_new_revision_comes_for_approval(
    client: Client,
) -> None:
    _, first = await plan_to_approval(client)
    events = await client.resume(first, decision="reject", reviewer_note="Mention the docstring")
    [second] = interrupts(events)
    assert second["reason"] == "plan_approval" and second["id"] != first["id"]
    assert second["metadata"]["revision"] == 2
    assert "Mention the docstring" in second["metadata"]["content"]
    state = replay(events)
    assert state == await client.stored_state()
    revisions = state["plan:orchestrator"]["revisions"]
    assert [r["number"] for r in revisions] == [1, 2]


async def test_a_cancelled_resume_rejects_or_declines(client: Client) -> None:
    _, approval = await plan_to_approval(client)
    events = await client.resume(approval, status="cancelled")
    [again] = interrupts(events)
    assert again["metadata"]["revision"] == 2
    reply = json.loads(next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"])
    assert reply["status"] == "rejected"


# -- stale and duplicate answers ----------------------------------------------------------


async def test_a_duplicate_resume_is_refused_and_changes_nothing(client: Client) -> None:
    [question] = interrupts(await plan_to_question(client))
    await client.resume(question, answer="Raise an error")
    before = await client.footprint()
    events = await client.resume(question, answer="Allow backorders")
    assert types_of(events) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
    assert events[-1]["code"] == "STALE_RESUME"
    assert "not pending" in events[-1]["message"]
    assert await client.footprint() == before


async def test_an_approval_for_another_revision_or_hash_is_stale(client: Client) -> None:
    _, approval = await plan_to_approval(client)
    before = await client.footprint()
    for payload in ({"revision": 7}, {"sha256": "0" * 64}, {"approval_id": "someone-else"}):
        events = await client.resume(approval, decision="approve", **payload)
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STALE_RESUME"
    events = await client.run(resume=[{"interruptId": "no-such", "status": "resolved"}])
    assert events[-1]["code"] == "STALE_RESUME"
    assert await client.footprint() == before
    assert (await client.session().record()).status.value == "pending_approval"


async def test_seed_style_tool_message_replies(client: Client) -> None:
    [question] = interrupts(await plan_to_question(client))
    call_id = question["toolCallId"]
    answer = {"answer": "Raise an error", "question_id": 1}
    events = await client.run(
        messages=[
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "ask_user_question", "arguments": "{}"},
                    }
                ],
            },
            {"id": "r1", "role": "tool", "toolCallId": call_id, "content": json.dumps(answer)},
        ]
    )
    [approval] = interrupts(events)
    assert approval["reason"] == "plan_approval"
    reply = {"status": "approved", "reviewer_note": "go"}
    message = {
        "id": "r2",
        "role": "tool",
        "toolCallId": approval["toolCallId"],
        "content": json.dumps(reply),
    }
    events = await client.run(messages=[message])
    assert events[-1]["outcome"]["type"] == "success"
    assert replay(events)["plan:orchestrator"]["status"] == "approved"
    # The same reply again answers nothing pending.
    events = await client.run(messages=[message])
    assert events[-1]["code"] == "STALE_RESUME"


# -- thread read-back ---------------------------------------------------------------------


async def test_thread_read_back_restores_messages_state_interrupts_and_journal(
    client: Client,
) -> None:
    missing = await client.http.get("/api/threads/t-nobody")
    assert missing.status_code == 404
    _, approval = await plan_to_approval(client)
    thread = (await client.http.get(f"/api/threads/{THREAD}")).json()
    assert thread["state"] == await client.stored_state()
    assert [i["id"] for i in thread["interrupts"]] == [approval["id"]]
    assert thread["interrupts"][0]["metadata"]["sha256"] == approval["metadata"]["sha256"]
    assert thread["running"] is False
    messages = thread["messages"]
    assert messages[0] == {
        "id": messages[0]["id"],
        "role": "user",
        "content": "Fix the failing test",
    }
    calls = {c["id"]: c["function"]["name"] for m in messages for c in m.get("toolCalls") or []}
    results = {m["toolCallId"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
    edit = next(i for i, n in calls.items() if n == "Edit")
    assert results[edit]["error"].startswith("PLAN_MODE_GATE")
    ask = next(i for i, n in calls.items() if n == "ask_user_question")
    assert results[ask] == {
        "status": "answered",
        "question_id": 1,
        "answer": "Raise an error",
        "message": "The user answered: Raise an error",
    }
    assert approval["toolCallId"] in calls and approval["toolCallId"] not in results
    kinds = [e["kind"] for e in thread["journal"]]
    assert "plan.gate.denied" in kinds and "plan.answered" in kinds
    journal = (await client.http.get(f"/api/threads/{THREAD}/journal")).json()["journal"]
    assert journal == thread["journal"]


async def test_leaving_plan_mode_cancels_the_plan_and_withdraws_the_request(
    client: Client,
) -> None:
    _, approval = await plan_to_approval(client)
    leave = client.http.post
    assert (await leave("/api/threads/t-nobody/leave-plan", json={})).status_code == 404
    assert (await leave(f"/api/threads/{THREAD}/leave-plan", content=b"")).status_code == 415
    response = await leave(f"/api/threads/{THREAD}/leave-plan", json={})
    assert response.status_code == 200
    body = response.json()
    assert body["message"].startswith("Left plan mode")
    assert body["interrupts"] == []
    assert body["state"]["plan:orchestrator"]["status"] == "cancelled"
    assert body["state"]["agent_mode"] == "agent"
    assert any(
        e["kind"] == "plan.transition" and e["toState"] == "cancelled" for e in body["journal"]
    )
    events = await client.resume(approval, decision="approve")
    assert events[-1]["code"] == "STALE_RESUME"
    # The withdrawn call reads back as withdrawn.
    thread = (await client.http.get(f"/api/threads/{THREAD}")).json()
    results = {m["toolCallId"]: m for m in thread["messages"] if m["role"] == "tool"}
    withdrawn = results[approval["toolCallId"]]
    assert withdrawn["id"] == f"reply:{approval['toolCallId']}"
    assert json.loads(withdrawn["content"])["status"] == "cancelled"
    # The conversation goes on: the demo asks to plan again, and may.
    events = await client.say("Fix the failing test")
    assert_well_formed(events)
    assert interrupts(events)[0]["reason"] == "plan_entry"
    assert replay(events) == await client.stored_state()


# -- malformed input, limits, auth --------------------------------------------------------


async def test_malformed_input_gets_a_clear_4xx_and_changes_nothing(client: Client) -> None:
    [question] = interrupts(await plan_to_question(client))
    before = await client.footprint()
    post = client.http.post
    cases = [
        (await post("/api/agent", content=b"{not json", headers=_json), 400, "not valid JSON"),
        (await post("/api/agent", json=[1, 2]), 400, "JSON object"),
        (await post("/api/agent", content=b"{}", headers={"content-type": "text/plain"}), 415, "application/json"),
        (await post("/api/agent", json={"runId": "r", "messages": []}), 422, "threadId"),
        (await post("/api/agent", json=run_input(THREAD, messages=[{"id": "x", "role": "boss", "content": "hi"}])), 422, "messages"),
        (await post("/api/agent", json=run_input(THREAD)), 422, "nothing to run"),
        (await post("/api/agent", json=run_input(THREAD, messages=[user_message("  ")])), 422, "empty"),
        (await post("/api/agent", json=run_input("bad thread/id", messages=[user_message("hi")])), 422, "threadId"),
        (await post("/api/agent", json=run_input(THREAD, state={"agent_mode": "turbo"}, messages=[user_message("hi")])), 422, "agent_mode"),
        (await post("/api/agent", json=run_input(THREAD, resume=[{"interruptId": question["id"], "status": "resolved", "payload": {"answer": ""}}])), 422, "answer"),
        (await post("/api/agent", json=run_input(THREAD, resume=[{"interruptId": question["id"], "status": "maybe"}])), 422, "resume"),
        (await post("/api/agent", json=run_input(THREAD, messages=[{"id": "t", "role": "tool", "toolCallId": question["toolCallId"], "content": "yes"}])), 422, "JSON object"),
        # 1,000 levels in 2 KB: past the decoder's own stack, and past plangate's limit.
        (await post("/api/agent", content=b"[" * 1000 + b"]" * 1000, headers=_json), 400, "deeper than 100"),
        (await post("/api/agent", content=json.dumps(run_input(THREAD, state=_nested(150))).encode(), headers=_json), 400, "deeper than 100"),
        (await post(f"/api/threads/{THREAD}/mode", content=b'{"mode": ' + b"[" * 1000 + b"]" * 1000 + b"}", headers=_json), 400, "deeper than 100"),
    ]  # fmt: skip
    for response, status, words in cases:
        assert response.status_code == status, response.text
        assert words in response.json()["error"], response.json()
    assert await client.footprint() == before
    assert (await client.http.get("/api/threads/bad-thread-never-run")).status_code == 404


_json = {"content-type": "application/json"}


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_body_size_limit(tmp_path: Path) -> None:
    app, _ = demo_app(tmp_path, max_body_bytes=2048)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        big = run_input("t-big", messages=[user_message("x" * 4096)])
        response = await http.post("/api/agent", json=big)
        assert response.status_code == 413
        assert "larger than 2048 bytes" in response.json()["error"]

        async def chunks():  # no Content-Length: the limit holds while reading
            yield json.dumps(big).encode()

        response = await http.post("/api/agent", content=chunks(), headers=_json)
        assert response.status_code == 413
        assert (await http.get("/api/threads/t-big")).status_code == 404


async def test_token_is_required_when_configured(tmp_path: Path) -> None:
    app, _ = demo_app(tmp_path, require_token=True, token="s3cret-token")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://203.0.113.7:8765") as http:
        body = run_input(
            "t-auth", messages=[user_message("Fix the failing test")], state={"agent_mode": "plan"}
        )
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            response = await http.post("/api/agent", json=body, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
        assert (await http.get("/api/threads/t-auth")).status_code == 401
        assert (await http.get("/api/info")).status_code == 401
        # The page and its assets hold no data and load without the token.
        page = await http.get("/")
        assert page.status_code == 200 and "plangate" in page.text
        assert (await http.get("/static/app.js")).status_code == 200
        good = {"Authorization": "Bearer s3cret-token"}
        response = await http.post("/api/agent", json=body, headers=good)
        assert response.status_code == 200
        assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED"
        assert (await http.get("/api/threads/t-auth", headers=good)).status_code == 200
    with pytest.raises(ValueError):
        create_app(runner=app.state.web.runner, require_token=True, token=None)


async def test_loopback_only_without_token_no_cors_no_cross_origin_posts(client: Client) -> None:
    http = client.http
    rebound = await http.get("/api/info", headers={"host": "attacker.example"})
    assert rebound.status_code == 400
    assert (await http.get("/api/info", headers={"host": "localhost:8765"})).status_code == 200
    body = run_input(THREAD, messages=[user_message("hi")])
    cross = await http.post("/api/agent", json=body, headers={"origin": "http://attacker.example"})
    assert cross.status_code == 403
    preflight = await http.options(
        "/api/agent",
        headers={"origin": "http://attacker.example", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    page = await http.get("/", headers={"origin": "http://attacker.example"})
    assert "access-control-allow-origin" not in page.headers
    assert "script-src 'self'" in page.headers["content-security-policy"]
    same = await http.post("/api/agent", json=body, headers={"origin": BASE})
    assert same.status_code == 200


# -- one run per thread, failures ---------------------------------------------------------


async def test_a_second_concurrent_run_on_a_thread_gets_409(tmp_path: Path) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def Wait() -> dict:
        """Wait for the test to let go."""
        entered.set()
        await release.wait()
        return {"waited": True}

    model = ScriptedLlm()
    model.add([call("Wait")], [text("done")], [text("again")])
    agent = setup_plan(LlmAgent(name="orchestrator", model=model, tools=[Wait]))
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'busy.db'}")
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        first = asyncio.create_task(
            http.post("/api/agent", json=run_input("t-busy", messages=[user_message("go")]))
        )
        await asyncio.wait_for(entered.wait(), 10)
        second = await http.post(
            "/api/agent", json=run_input("t-busy", messages=[user_message("go")])
        )
        assert second.status_code == 409
        assert second.json()["code"] == "RUN_IN_PROGRESS"
        other = await http.post(
            "/api/agent", json=run_input("t-other", messages=[user_message("x")])
        )
        assert other.status_code == 200  # other threads are not blocked
        thread = (await http.get("/api/threads/t-busy")).json()
        assert thread["running"] is True
        release.set()
        response = await asyncio.wait_for(first, 10)
        assert sse_events(response.text)[-1]["outcome"]["type"] == "success"
        again = await http.post(
            "/api/agent", json=run_input("t-busy", messages=[user_message("go")])
        )
        assert again.status_code == 200


async def test_an_agent_failure_ends_the_run_with_run_error(tmp_path: Path) -> None:
    model = ScriptedLlm()  # no steps: the first model call fails
    agent = setup_plan(LlmAgent(name="orchestrator", model=model))
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'fail.db'}")
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        response = await http.post(
            "/api/agent", json=run_input("t-fail", messages=[user_message("hi")])
        )
        events = sse_events(response.text)
        assert types_of(events)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "AGENT_ERROR"
        assert "ScriptExhausted" in events[-1]["message"]
        model.add([text("back")])
        response = await http.post(
            "/api/agent", json=run_input("t-fail", messages=[user_message("hi")])
        )
        assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED"


def test_serve_command_line() -> None:
    import argparse

    from plangate.cli.serve import add_serve_parser, run_serve
    from plangate.web.server import is_loopback

    parser = argparse.ArgumentParser(prog="plangate")
    add_serve_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve"])
    assert (args.host, args.port, args.workspace, args.model, args.token) == (
        "127.0.0.1",
        8765,
        None,
        None,
        None,
    )
    assert args.func is run_serve
    args = parser.parse_args(["serve", "--host", "0.0.0.0", "--port", "0", "--token", "t"])
    assert (args.host, args.port, args.token) == ("0.0.0.0", 0, "t")
    assert run_serve(parser.parse_args(["serve", "--port", "70000"])) == 2
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.5", "example.com", "::"))


def test_streamed_text_becomes_one_message_and_calls_hang_off_it() -> None:
    from google.adk.events import Event
    from google.genai import types

    from plangate.web.agui import EventTranslator

    def event(*parts: types.Part, partial: bool = False) -> Event:
        return Event(
            author="orchestrator",
            invocation_id="i",
            partial=partial,
            content=types.Content(role="model", parts=list(parts)),
        )

    translator = EventTranslator()
    first = event(types.Part(text="Hel"), partial=True)
    out = translator.translate(first)
    out += translator.translate(event(types.Part(text="lo"), partial=True))
    call = types.Part(function_call=types.FunctionCall(id="c1", name="Read", args={"path": "a"}))
    out += translator.translate(event(types.Part(text="Hello"), call))
    dumped = [e.model_dump(mode="json", by_alias=True) for e in out]
    assert [e["type"] for e in dumped] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    assert "".join(e.get("delta", "") for e in dumped[:4]) == "Hello"
    assert {e.get("messageId") for e in dumped[:4]} == {first.id}
    assert dumped[4]["parentMessageId"] == first.id
    assert json.loads(dumped[5]["delta"]) == {"path": "a"}


def test_an_sse_frame_is_what_ag_ui_encoder_writes() -> None:
    """The server serialises each event once, for its response and its followers: the
    frame must stay AG-UI's own (its encoder is the reference), text and escapes alike."""
    from ag_ui.core import RunErrorEvent, StateDeltaEvent, TextMessageContentEvent
    from ag_ui.encoder import EventEncoder

    from plangate.web.agui import sse_frame

    encoder = EventEncoder(accept="text/event-stream")
    for event in (
        TextMessageContentEvent(message_id="m", delta='h\u00e9 \x00 "q" \n\u2028 😀'),
        StateDeltaEvent(delta=[{"op": "add", "path": "/a~1b", "value": {"x": [1, None]}}]),
        RunErrorEvent(message="boom", code="AGENT_ERROR"),
    ):
        assert sse_frame(event.model_dump_json(by_alias=True)) == encoder.encode(event)
    assert encoder.get_content_type() == "text/event-stream"


# -- protocol governance: the reference agent with the data tools -------------------------

PROTOCOL = "protocol:orchestrator"
REVENUE = {
    "North": "97,979.81",
    "East": "95,016.68",
    "South": "83,800.54",
    "West": "71,066.94",
    "Central": "30,216.51",
}
DATA_PHASES = [
    "scope",
    "semantic_grounding",
    "query_planning",
    "execution",
    "validation",
    "synthesis",
]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("data"))


@pytest.fixture
async def data_client(tmp_path: Path, catalog: DataCatalog):
    app, workspace = demo_app(tmp_path, data=catalog)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        yield Client(app, http, workspace)


def said(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def protocol_states(events: list[dict]) -> list[tuple[int, dict[str, Any]]]:
    """The client's protocol state after the snapshot and after each delta that changed it."""
    states: list[tuple[int, dict[str, Any]]] = []
    state: dict[str, Any] = {}
    for index, event in enumerate(events):
        if event["type"] == "STATE_SNAPSHOT":
            state = event["snapshot"]
        elif event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
        else:
            continue
        current = state.get(PROTOCOL)
        if current is not None and (not states or states[-1][1] != current):
            states.append((index, current))
    return states


async def test_the_data_demo_fails_then_hands_off_then_refines_over_ag_ui(
    data_client: Client,
) -> None:
    client = data_client
    thread = await client.http.get("/api/info")
    assert thread.json()["stateKeys"]["protocol"] == PROTOCOL

    # 1. Routed to general-task: the data tool is refused, the completion gate fails the run.
    events = await client.say("revenue by region last quarter")
    assert_well_formed(events)
    assert "RUN_FINISHED" not in types_of(events)
    error = events[-1]
    assert error["type"] == "RUN_ERROR" and error["code"] == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"
    refused = tool_results(events, "list_data_sources")
    assert refused and all(r["error"].startswith("ACTION_NOT_ALLOWED_IN_PHASE") for r in refused)
    assert said(events).endswith(error["message"])
    state = replay(events)
    assert state == await client.stored_state()
    failed = state[PROTOCOL]
    assert failed == get_protocol_state(await client.session().session(), "orchestrator")
    assert (failed["protocol"], failed["phase"]) == ("general-task", "understand")
    assert failed["run_status"] == "failed"
    assert failed["run_outcome_code"] == error["code"]
    assert failed["run_outcome_message"] == error["message"]
    assert failed["intent"]["text"] == "revenue by region last quarter"
    assert failed["route"]["source"] == "default"
    # The run was shown as running before it was shown as failed.
    assert protocol_states(events)[0][1]["run_status"] == "running"

    # 2. "try again" inherits the task, hands off to data-analysis and does the work.
    events = await client.say("try again")
    assert_well_formed(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"]["type"] == "success"
    states = protocol_states(events)
    assert states[0] == (1, failed)  # the snapshot still shows the earlier run
    finished = len(events) - 1
    handed = [i for i, s in states if s["handoffs"]]
    assert handed and handed[0] < finished
    [handoff_result] = [
        i
        for i, e in enumerate(events)
        if e["type"] == "TOOL_CALL_RESULT" and "protocol_handoff" in _call_names(events, e)
    ]
    first_data_call = next(
        i
        for i, e in enumerate(events)
        if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "list_data_sources"
    )
    # The handoff reaches the client while the run streams, before the data work starts.
    assert handoff_result < handed[0] < first_data_call
    phases = []
    for index, seen in states:
        if seen["protocol"] == "data-analysis" and seen["phase"] not in phases:
            assert index < finished
            phases.append(seen["phase"])
    assert phases == DATA_PHASES
    assert [s["protocol"] for _, s in states][1] == "general-task"  # routed first, then moved
    state = replay(events)
    assert state == await client.stored_state()
    done = state[PROTOCOL]
    assert done == get_protocol_state(await client.session().session(), "orchestrator")
    assert (done["protocol"], done["version"], done["phase"]) == ("data-analysis", 1, "synthesis")
    assert done["run_status"] == "completed" and "run_outcome_code" not in done
    assert done["route"]["reason_codes"] == ["SESSION_INTENT_INHERITED"]
    assert done["intent"]["change_kind"] == "handoff"
    assert done["intent"]["text"] == "revenue by region last quarter"
    [handoff] = done["handoffs"]
    assert (handoff["from_protocol"], handoff["to_protocol"]) == (
        "general-task@1",
        "data-analysis@1",
    )
    answer = said(events)
    for region, revenue in REVENUE.items():
        assert f"- {region}: {revenue}" in answer

    # 3. A refinement of the recorded analysis: data-analysis from the start, by month.
    events = await client.say("break it down by month")
    assert_well_formed(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"]["type"] == "success"
    state = replay(events)
    assert state == await client.stored_state()
    refined = state[PROTOCOL]
    assert refined["protocol"] == "data-analysis" and refined["run_status"] == "completed"
    assert refined["route"]["task_relation"] == "refine"
    assert refined["handoffs"] == []
    assert {s["protocol"] for _, s in protocol_states(events)[1:]} == {"data-analysis"}
    assert tool_results(events, "validate_result")[0]["row_count"] == 15
    assert len(re.findall(r"^- \w+ 2026-\d\d: [\d,]+\.\d\d$", said(events), re.M)) == 15

    # Read back: the protocol state, the refusal inline, and the protocol journal.
    thread = (await client.http.get(f"/api/threads/{THREAD}")).json()
    assert thread["stateKeys"]["protocol"] == PROTOCOL
    assert thread["state"] == await client.stored_state()
    results = [json.loads(m["content"]) for m in thread["messages"] if m["role"] == "tool"]
    assert results[0]["error"].startswith("ACTION_NOT_ALLOWED_IN_PHASE")
    kinds = [e["kind"] for e in thread["journal"]]
    for kind in (
        "protocol.route.resolved",
        "protocol.segment.started",
        "protocol.action.rejected",
        "protocol.run.failed",
        "protocol.handoff.proposed",
        "protocol.handoff.accepted",
        "protocol.phase.entered",
        "protocol.run.completed",
    ):
        assert kind in kinds, kind
    assert kinds.index("protocol.run.failed") < kinds.index("protocol.handoff.accepted")
    assert kinds.count("protocol.run.completed") == 2
    journal = (await client.http.get(f"/api/threads/{THREAD}/journal")).json()["journal"]
    assert journal == thread["journal"]


def _call_names(events: list[dict], result: dict) -> set[str]:
    return {
        e["toolCallName"]
        for e in events
        if e["type"] == "TOOL_CALL_START" and e["toolCallId"] == result["toolCallId"]
    }


async def test_plan_and_protocol_journals_merge_in_sequence_order(
    tmp_path: Path, catalog: DataCatalog
) -> None:
    # A plan branch of its own puts plan events under another journal scope than the
    # protocol's (which is the agent name); the thread shows both, in one order.
    app, _ = demo_app(tmp_path, data=catalog, plan_options=PlanOptions(branch="coding"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        body = run_input(
            THREAD,
            messages=[user_message("revenue by region last quarter")],
            state={"agent_mode": "plan"},
        )
        events = sse_events((await http.post("/api/agent", json=body)).text)
        assert events[-1]["code"] == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"
        assert set(replay(events)) == {"agent_mode", "plan:coding", PROTOCOL}
        thread = (await http.get(f"/api/threads/{THREAD}")).json()
    journal = thread["journal"]
    seqs = [e["seq"] for e in journal]
    assert seqs == sorted(set(seqs))
    kinds = [e["kind"] for e in journal]
    assert "mode.selected" in kinds and "plan.transition" in kinds
    assert kinds.index("protocol.route.resolved") < kinds.index("plan.transition")
    assert kinds.index("plan.transition") < kinds.index("protocol.action.rejected")
    assert kinds[-1] == "protocol.run.failed"


def test_only_a_run_that_failed_now_is_reported_as_failed() -> None:
    running = {"run_id": "r1", "run_status": "running"}
    failed = {
        "run_id": "r1",
        "run_status": "failed",
        "run_outcome_code": "DATA_ACTIONS_REJECTED_BY_PROTOCOL",
        "run_outcome_message": "DATA_ACTIONS_REJECTED_BY_PROTOCOL: 1 data tool call(s)",
    }
    error = protocol_failure({}, failed)
    assert error is not None and error.code == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"
    assert error.message == failed["run_outcome_message"]
    resumed = protocol_failure(running, failed)  # a paused run resumed and then failed
    assert resumed is not None and resumed.code == failed["run_outcome_code"]
    assert protocol_failure(failed, failed) is None  # an earlier run's failure
    assert protocol_failure(failed, {"run_id": "r2", "run_status": "completed"}) is None
    bare = protocol_failure(running, {"run_id": "r1", "run_status": "failed"})
    assert bare is not None and bare.code == "PROTOCOL_RUN_FAILED"


def test_serve_registers_data_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    monkeypatch.chdir(tmp_path)  # serve keeps its sample data under ./.plangate

    from plangate.cli.serve import add_serve_parser, data_sources, run_serve

    parser = argparse.ArgumentParser(prog="plangate")
    add_serve_parser(parser.add_subparsers(dest="command"))
    csv = tmp_path / "sales.csv"
    csv.write_text("region,revenue\nNorth,1\n")
    args = parser.parse_args(["serve", "--data", f"sales={csv}", "--data", "more=b.parquet"])
    assert args.data == [f"sales={csv}", "more=b.parquet"]
    assert data_sources(args.data) == [("sales", str(csv)), ("more", "b.parquet")]
    assert parser.parse_args(["serve"]).data == []
    for spec, words in (
        ("sales", "--data takes NAME=PATH"),
        (f"={csv}", "--data takes NAME=PATH"),
        (f"sales={tmp_path / 'missing.csv'}", "FILE_NOT_FOUND"),
        (f"1sales={csv}", "INVALID_NAME"),
        (f"sales={tmp_path / 'notes.txt'}", "UNSUPPORTED_FORMAT"),
    ):
        assert run_serve(parser.parse_args(["serve", "--port", "0", "--data", spec])) == 2
        assert words in capsys.readouterr().err
    # A bad source stops serve before it copies a workspace or listens.
    assert not (tmp_path / ".plangate" / "workspace").exists()


async def test_a_human_reply_comes_back_as_its_result_under_protocol_governance(
    data_client: Client,
) -> None:
    # Protocol routing writes state before the plan runtime takes the reply: the reply's
    # canonical result must still reach the client in that run.
    events, approval = await plan_to_approval(data_client)
    assert_well_formed(events)
    reply = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert reply["messageId"] == f"reply:{reply['toolCallId']}"
    assert json.loads(reply["content"])["answer"] == "Raise an error"
    state = replay(events)
    assert state == await data_client.stored_state()
    assert state[PROTOCOL]["protocol"] == "general-task"
    assert approval["metadata"]["revision"] == state["plan:orchestrator"]["contentRevisions"]


async def test_info_says_what_contains_the_agents_commands(
    sandbox_mode: str, client: Client
) -> None:
    info = (await client.http.get("/api/info")).json()["sandbox"]
    if sandbox_mode == "sandbox":
        assert info["available"] is True and info["detail"].startswith("bubblewrap sandbox")
    else:
        assert info["available"] is False
        assert "shell parser only" in info["detail"]


def test_a_state_delta_patches_only_the_keys_an_event_writes_and_replays_exactly() -> None:
    """Each event's delta goes out as a patch of the shared keys it writes: applied in
    order to the snapshot, the patches give exactly the state mirrored; an unshared key, or
    a value written again unchanged, sends nothing."""
    keys = StateKeys(
        plan="plan/mode~x",  # "/" and "~" must be escaped in the patch paths
        todos="todos",
        selection="mode",
        plan_value="plan",
        agent_value="agent",
        protocol="protocol:a",
    )
    snapshot: dict[str, Any] = {"todos": [{"t": "a"}, {"t": "b"}], "mode": "agent"}
    mirror = StateMirror(json.loads(json.dumps(snapshot)))
    client = json.loads(json.dumps(snapshot))
    deltas = [
        {"plan/mode~x": {"status": "drafting", "steps": ["one"]}, "private": 1},
        {"plan/mode~x": {"status": "drafting", "steps": ["one", "two"]}},
        {"todos": [{"t": "b"}, {"t": "a"}, {"t": "c"}], "mode": "plan"},
        {"protocol:a": {"phase": "explore"}, "plan/mode~x": None},
        {"mode": "plan"},
        {"private": 2},
    ]
    sent = 0
    for delta in deltas:
        event = mirror.apply_delta(delta, keys)
        if event is not None:
            sent += 1
            client = jsonpatch.apply_patch(client, event.model_dump(by_alias=True)["delta"])
        assert client == mirror.state
    assert sent == 4
    assert client == {
        "todos": [{"t": "b"}, {"t": "a"}, {"t": "c"}],
        "mode": "plan",
        "plan/mode~x": None,
        "protocol:a": {"phase": "explore"},
    }
    # The end of the run reconciles with the stored state: keys and fields removed too.
    stored = {"todos": [], "protocol:a": {"phase": "report", "run/id": "r~1"}, "mode": "plan"}
    event = mirror.update(stored)
    assert event is not None
    client = jsonpatch.apply_patch(client, event.model_dump(by_alias=True)["delta"])
    assert client == stored == mirror.state
    assert mirror.update(json.loads(json.dumps(stored))) is None


# -- text no UTF-8 can hold ----------------------------------------------------------------


async def test_an_unpaired_surrogate_in_a_message_is_kept_as_a_replacement_character(
    data_client: Client,
) -> None:
    """JSON can spell half of a surrogate pair (``"\\ud800"``), which no store, model or
    response can encode. Over the wire and through the library alike the message is kept
    with U+FFFD in its place, as every store keeps such text, and the run goes on to its
    end: routed, its intent recorded, every event sent."""
    raw = json.dumps(run_input(THREAD, messages=[user_message("hello \ud800 there")]))
    assert "\\ud800" in raw
    response = await data_client.http.post(
        "/api/agent", content=raw, headers={"content-type": "application/json"}
    )
    events = sse_events(response.text)
    assert_well_formed(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert (await data_client.stored_state())[PROTOCOL]["intent"]["text"] == "hello \ufffd there"
    stored = await data_client.session().session()
    assert stored is not None
    said_by_user = [e.content.parts[0].text for e in stored.events if e.author == "user"]
    assert said_by_user == ["hello \ufffd there"]

    # A host driving the runner itself hands the text over as it is: routing cleans it.
    session = await PlanSession.open(data_client.runner, session_id="t-library")
    async for _ in session.run("again \udc00 here"):
        pass
    stored = await session.session()
    assert stored is not None
    routed = get_protocol_state(stored, "orchestrator")
    assert routed["intent"]["text"] == "again \ufffd here"
    assert routed["run_status"] != "failed"


def test_an_event_no_utf8_can_hold_is_sent_with_a_replacement_character() -> None:
    """A surrogate a tool or a model passed on fails pydantic's JSON serialiser, which
    would end the stream mid-run; the event is sent with U+FFFD instead."""
    broken = TextMessageContentEvent(message_id="m", delta="a\ud800b")
    assert json.loads(event_text(broken))["delta"] == "a\ufffdb"
    plain = TextMessageContentEvent(message_id="m", delta="ab")
    assert event_text(plain) == plain.model_dump_json(by_alias=True)


async def test_an_answer_spelling_an_unpaired_surrogate_is_recorded_with_a_replacement(
    client: Client,
) -> None:
    [question] = interrupts(await plan_to_question(client))
    entry = {
        "interruptId": question["id"],
        "status": "resolved",
        "payload": {"answer": "No \udfff"},
    }
    raw = json.dumps(run_input(THREAD, resume=[entry]))
    assert "\\udfff" in raw
    response = await client.http.post(
        "/api/agent", content=raw, headers={"content-type": "application/json"}
    )
    events = sse_events(response.text)
    assert_well_formed(events)
    [approval] = interrupts(events)  # the answer was taken: the plan went on to approval
    assert approval["reason"] == "plan_approval"
    kinds = [(e.event.kind, e.event.detail) for e in await client.session().journal()]
    assert "No \ufffd" in json.dumps(kinds, ensure_ascii=False), kinds
