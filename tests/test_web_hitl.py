"""Every human request answered exactly once, over AG-UI (issue 9, the web part).

Each resume entry is submitted through ``PlanSession.submit`` the moment it arrives; the
run resumes only once every paused call is answered; a refused reply ends the run with
``RUN_ERROR`` and its code and changes nothing; a restart between two answers goes on;
the Plan/Agent toggle and Stop work while a run is in progress. Through the real app
(httpx ASGITransport), the real Runner, a scripted model and SQLite / PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from google.genai import types

from harness import WRITES, Read, Write, make_agent
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.policy.effects import Effect, declare_effect
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
THREAD = "t-batch"

TWO_QUESTIONS = [
    call("ask_user_question", question="Which database?", options=["PostgreSQL", "SQLite"]),
    call("ask_user_question", question="Which port?"),
]


def echo_responses(request: Any) -> list[types.Part]:
    """The model says back every function response it was shown."""
    seen = [
        dict(part.function_response.response or {})
        for content in request.contents
        for part in content.parts or []
        if part.function_response is not None
    ]
    return [text(json.dumps(seen))]


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


class Web:
    """The app over a scripted model, an HTTP client, and the thread's PlanSession."""

    def __init__(self, database_url: str, model: ScriptedLlm, tools: list[Any] | None = None):
        self.model = model
        agent = make_agent(model, tools=tools)
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

    async def say(self, words: str, mode: str | None = None) -> list[dict[str, Any]]:
        state = {"agent_mode": mode} if mode else None
        return await self.run(messages=[user_message(words)], state=state)

    async def resume(self, *entries: tuple[dict, dict], status: str = "resolved") -> list[dict]:
        resume = [{"interruptId": i["id"], "status": status, "payload": p} for i, p in entries]
        return await self.run(resume=resume)

    async def footprint(self) -> tuple[int, int, Any]:
        session = self.session
        stored = await session.session()
        state = await session.plan_state()
        return len(stored.events), len(await session.journal()), state.model_dump(mode="json")

    async def close(self) -> None:
        await self.http.aclose()


@pytest.fixture
async def web(database_url: str):
    client = Web(database_url, ScriptedLlm())
    yield client
    await client.close()


def interrupts(events: list[dict]) -> list[dict]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt"
    return finished["outcome"]["interrupts"]


def replies(events: list[dict]) -> dict[str, dict]:
    """The canonical result of each human reply the run carried, by call id."""
    return {
        e["toolCallId"]: json.loads(e["content"])
        for e in events
        if e["type"] == "TOOL_CALL_RESULT" and e["messageId"].startswith("reply:")
    }


def said(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def ask_two(web: Web) -> list[dict]:
    web.model.add(list(TWO_QUESTIONS))
    asked = interrupts(await web.say("add persistence", mode="plan"))
    assert [i["message"] for i in asked] == ["Which database?", "Which port?"]
    # A reload lists them in the order asked too (the two calls ran concurrently).
    thread = (await web.http.get(f"/api/threads/{THREAD}")).json()
    assert [i["id"] for i in thread["interrupts"]] == [i["id"] for i in asked]
    return asked


# -- several requests in one step ---------------------------------------------------------


async def test_fix_9_each_answer_is_recorded_when_given_and_the_run_resumes_once(
    web: Web,
) -> None:
    first, second = await ask_two(web)
    calls = len(web.model.requests)
    events = await web.resume((second, {"answer": "5432"}))  # answers in any order
    # Recorded at once, the run does not resume yet: the other question is still open.
    assert [e["type"] for e in events][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert [i["id"] for i in interrupts(events)] == [first["id"]]
    assert replies(events)[second["toolCallId"]]["answer"] == "5432"
    assert len(web.model.requests) == calls
    record = await web.session.record()
    assert [q.answer for q in record.asked_questions] == [None, "5432"]
    thread = (await web.http.get(f"/api/threads/{THREAD}")).json()
    assert [i["id"] for i in thread["interrupts"]] == [first["id"]]

    web.model.add(echo_responses)
    events = await web.resume((first, {"answer": "PostgreSQL"}))
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success"
    assert len(web.model.requests) == calls + 1  # resumed once, with both answers
    seen = [r for r in json.loads(said(events)) if r.get("question_id")]
    assert [(r["question_id"], r["answer"]) for r in seen] == [(1, "PostgreSQL"), (2, "5432")]
    assert set(replies(events)) == {first["toolCallId"], second["toolCallId"]}
    # The same answer again answers nothing pending and changes nothing.
    before = await web.footprint()
    events = await web.resume((first, {"answer": "SQLite"}))
    assert events[-1]["code"] == "STALE_RESUME"
    assert await web.footprint() == before


async def test_fix_9_a_restart_between_two_answers_continues(database_url: str) -> None:
    before = Web(database_url, ScriptedLlm())
    first, second = await ask_two(before)
    await before.resume((first, {"answer": "PostgreSQL"}))
    await before.close()

    model = ScriptedLlm().add(echo_responses)
    after = Web(database_url, model)  # a new process: new runner, app and client
    try:
        thread = (await after.http.get(f"/api/threads/{THREAD}")).json()
        assert [i["id"] for i in thread["interrupts"]] == [second["id"]]
        events = await after.resume((second, {"answer": "5432"}))
        seen = [r for r in json.loads(said(events)) if r.get("question_id")]
        assert [r["answer"] for r in seen] == ["PostgreSQL", "5432"]
        assert len(model.requests) == 1
        assert await after.session.pending() == []
    finally:
        await after.close()


async def test_fix_9_both_answers_in_one_resume_are_taken_in_call_order(web: Web) -> None:
    web.model.add(
        [call("update_plan_content", content="1. x")],
        [call("ask_user_question", question="Tabs or spaces?"), call("exit_plan_mode")],
        echo_responses,
    )
    question, approval = interrupts(await web.say("task", mode="plan"))
    # The approval comes first in the list; the question beside it still gets its answer.
    events = await web.resume((approval, {"status": "approved"}), (question, {"answer": "tabs"}))
    results = replies(events)
    assert results[question["toolCallId"]]["answer"] == "tabs"
    assert results[approval["toolCallId"]]["status"] == "approved"
    assert (await web.session.record()).status is PlanStatus.APPROVED


async def test_fix_9_approving_withdraws_the_open_question_and_says_so(web: Web) -> None:
    web.model.add(
        [call("update_plan_content", content="1. x")],
        [call("ask_user_question", question="Tabs or spaces?"), call("exit_plan_mode")],
        echo_responses,
    )
    question, approval = interrupts(await web.say("task", mode="plan"))
    events = await web.resume((approval, {"decision": "approve"}))
    assert events[-1]["outcome"]["type"] == "success"
    results = replies(events)
    assert results[approval["toolCallId"]]["status"] == "approved"
    assert results[question["toolCallId"]]["status"] == "withdrawn"
    thread = (await web.http.get(f"/api/threads/{THREAD}")).json()
    assert thread["interrupts"] == []
    shown = {
        m["toolCallId"]: json.loads(m["content"]) for m in thread["messages"] if m["role"] == "tool"
    }
    assert shown[question["toolCallId"]]["status"] == "withdrawn"
    events = await web.resume((question, {"answer": "tabs"}))
    assert events[-1]["code"] == "STALE_RESUME"


# -- reply shapes and refusals ------------------------------------------------------------


async def test_fix_9_the_readme_adk_shapes_are_accepted_beside_decision(web: Web) -> None:
    web.model.add(
        [call("update_plan_content", content="1. x"), call("exit_plan_mode")],
        [call("update_plan_content", content="1. y"), call("exit_plan_mode")],
        [text("done")],
    )
    [approval] = interrupts(await web.say("task", mode="plan"))
    contradiction = {"interruptId": approval["id"], "status": "resolved"}
    for payload, words in (
        ({"status": "approved", "decision": "reject"}, "contradicts"),
        ({"status": "maybe"}, "'status'"),
        ({}, "'decision'"),
    ):
        response = await web.http.post(
            "/api/agent", json=run_input(THREAD, resume=[{**contradiction, "payload": payload}])
        )
        assert response.status_code == 422 and words in response.json()["error"]
    events = await web.resume((approval, {"status": "rejected", "reviewer_note": "use y"}))
    [again] = interrupts(events)
    assert replies(events)[approval["toolCallId"]]["status"] == "rejected"
    events = await web.resume((again, {"status": "approved"}))
    assert events[-1]["outcome"]["type"] == "success"
    assert (await web.session.record()).status is PlanStatus.APPROVED


def unbound(response: dict[str, Any]) -> dict[str, Any]:
    """A seed 000 reply: a tool message without a call id."""
    return {"id": "m-unbound", "role": "tool", "toolCallId": "", "content": json.dumps(response)}


async def test_fix_9_a_reply_without_id_is_matched_or_refused_with_its_code(web: Web) -> None:
    first, second = await ask_two(web)
    before = await web.footprint()
    events = await web.run(messages=[unbound({"answer": "PostgreSQL"})])
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "AMBIGUOUS_REPLY"
    assert not events[-1]["message"].startswith("AMBIGUOUS_REPLY")  # the code once
    assert "call id" in events[-1]["message"]
    events = await web.run(messages=[unbound({"status": "approved"})])
    assert events[-1]["code"] == "NO_MATCHING_REQUEST"
    assert await web.footprint() == before  # nothing recorded, nothing appended
    response = await web.http.post(
        "/api/agent", json=run_input(THREAD, messages=[unbound({"hello": 1})])
    )
    assert response.status_code == 422 and "without a toolCallId" in response.json()["error"]

    await web.resume((first, {"answer": "PostgreSQL"}))
    web.model.add(echo_responses)
    events = await web.run(messages=[unbound({"answer": "5432"})])  # the single open one
    assert events[-1]["outcome"]["type"] == "success"
    assert replies(events)[second["toolCallId"]]["answer"] == "5432"


# -- while a run is in progress -----------------------------------------------------------


async def test_fix_9_the_plan_toggle_during_a_run_applies_at_the_next_step(
    database_url: str,
) -> None:
    gate = Gate()
    model = ScriptedLlm().add(
        [call("Inspect", path="src")], [call("Write", path="a", content="b")], [text("ok")]
    )
    web = Web(database_url, model, tools=[Read, Write, gate.tool])
    try:
        running = asyncio.create_task(web.say("do the task"))
        await asyncio.wait_for(gate.started.wait(), 30)
        response = await web.http.post(f"/api/threads/{THREAD}/mode", json={"mode": "plan"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["message"].startswith("Entering plan mode")
        assert body["mode"] == {"active": False, "pending": True, "planStatus": None}
        assert body["running"] is True
        gate.release.set()
        events = await asyncio.wait_for(running, 60)
        results = {
            e["toolCallId"]: json.loads(e["content"])
            for e in events
            if e["type"] == "TOOL_CALL_RESULT"
        }
        assert {"inspected": "src"} in results.values()  # the running tool's result is kept
        refused = [r for r in results.values() if "error" in r]
        assert refused and refused[0]["error"].startswith("PLAN_MODE_GATE")
        assert WRITES == []
        kinds = [
            e["kind"] for e in (await web.http.get(f"/api/threads/{THREAD}")).json()["journal"]
        ]
        assert "mode.requested" in kinds
        bad = await web.http.post(f"/api/threads/{THREAD}/mode", json={"mode": "turbo"})
        assert bad.status_code == 422
    finally:
        await web.close()


async def test_fix_9_leave_plan_during_a_run_is_recorded_not_refused(database_url: str) -> None:
    gate = Gate()
    model = ScriptedLlm().add(
        [call("Inspect", path="src")], [call("Write", path="a", content="b")], [text("ok")]
    )
    web = Web(database_url, model, tools=[Read, Write, gate.tool])
    try:
        running = asyncio.create_task(web.say("do the task", mode="plan"))
        await asyncio.wait_for(gate.started.wait(), 30)
        response = await web.http.post(f"/api/threads/{THREAD}/leave-plan", json={})
        assert response.status_code == 200, response.text
        assert response.json()["message"].startswith("Leaving plan mode at the next step")
        gate.release.set()
        await asyncio.wait_for(running, 60)
        assert WRITES == [("a", "b")]
        assert (await web.session.record()).status is PlanStatus.CANCELLED
    finally:
        await web.close()


async def test_fix_10_stop_ends_the_run_journals_it_and_the_thread_goes_on(
    database_url: str,
) -> None:
    gate = Gate()
    model = ScriptedLlm().add([call("Inspect", path="src")], [text("never")])
    web = Web(database_url, model, tools=[Read, Write, gate.tool])
    try:
        idle = await web.http.post(f"/api/threads/{THREAD}/stop", json={})
        assert idle.status_code == 404  # no such thread yet
        running = asyncio.create_task(web.say("do the task"))
        await asyncio.wait_for(gate.started.wait(), 30)
        response = await web.http.post(f"/api/threads/{THREAD}/stop", json={})
        assert response.json()["stopped"] is True
        events = await asyncio.wait_for(running, 30)
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "RUN_STOPPED"
        assert "never" not in said(events)
        thread = (await web.http.get(f"/api/threads/{THREAD}")).json()
        assert thread["running"] is False
        stopped = [e for e in thread["journal"] if e["kind"] == "run.stopped"]
        assert stopped and stopped[0]["actor"] == "user"
        again = await web.http.post(f"/api/threads/{THREAD}/stop", json={})
        assert again.json()["stopped"] is False
        model.add([text("back again")])
        events = await web.say("go on")
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    finally:
        await web.close()


async def test_fix_10_the_thread_list_names_every_thread_newest_first(web: Web) -> None:
    web.model.add([text("one")], [text("two")])
    await web.http.post("/api/agent", json=run_input("t-a", messages=[user_message("first task")]))
    await web.http.post("/api/agent", json=run_input("t-b", messages=[user_message("second")]))
    listed = (await web.http.get("/api/threads")).json()["threads"]
    assert [(t["threadId"], t["title"]) for t in listed] == [
        ("t-b", "second"),
        ("t-a", "first task"),
    ]
    assert all(t["running"] is False for t in listed)
