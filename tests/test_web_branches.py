"""Branching and deleting threads over HTTP: "Branch from here" starts a new thread where
the old one is (messages, waiting requests, plan) and the two go their own ways; "Delete"
removes a thread. Bad input gets a code: unknown thread 404 ``NO_THREAD``, a running
thread 409 ``RUN_IN_PROGRESS``. Through the real app (httpx ASGITransport), the real
Runner, a scripted model and SQLite / PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from harness import Read, Write, make_agent
from plangate.adk.runner import build_runner
from plangate.adk.runtime import ARCHIVE_KIND
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.effects import Effect, declare_effect
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
THREAD = "t-source"


class Web:
    def __init__(self, database_url: str, model: ScriptedLlm, tools: list[Any] | None = None):
        self.model = model
        self.runner = build_runner(
            make_agent(model, tools=tools), database_url=database_url, app_name="web"
        )
        app = create_app(runner=self.runner, require_token=False, token=None)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)

    def session(self, thread_id: str) -> PlanSession:
        return PlanSession(self.runner, user_id="user", session_id=thread_id)

    async def run(self, thread_id: str, **fields: Any) -> list[dict[str, Any]]:
        response = await self.http.post("/api/agent", json=run_input(thread_id, **fields))
        assert response.status_code == 200, response.text
        return sse_events(response.text)

    async def thread(self, thread_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/api/threads/{thread_id}")
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
async def web(database_url: str):
    client = Web(database_url, ScriptedLlm())
    yield client
    await client.http.aclose()


async def ask_question(web: Web) -> dict[str, Any]:
    web.model.add([call("ask_user_question", question="Which database?", options=["A", "B"])])
    events = await web.run(
        THREAD, messages=[user_message("add persistence")], state={"agent_mode": "plan"}
    )
    [asked] = events[-1]["outcome"]["interrupts"]
    return asked


async def test_a_branch_starts_where_the_thread_is_and_goes_its_own_way(web: Web) -> None:
    asked = await ask_question(web)
    response = await web.http.post(f"/api/threads/{THREAD}/branch", json={})
    assert response.status_code == 201, response.text
    branch = response.json()["threadId"]
    assert branch != THREAD and response.json()["from"] == THREAD

    source, copy = await web.thread(THREAD), await web.thread(branch)
    assert copy["messages"] == source["messages"]
    assert [i["id"] for i in copy["interrupts"]] == [asked["id"]]
    forked = [e["detail"] for e in copy["journal"] if e["kind"] == "session.forked"]
    assert forked == [{"from": THREAD, "to": branch}]
    listed = (await web.http.get("/api/threads")).json()["threads"]
    assert {(t["threadId"], t["branchOf"]) for t in listed} == {(THREAD, None), (branch, THREAD)}

    # Answered in the branch, the run goes on there; the source still waits.
    web.model.add([text("Using A.")])
    resume = [{"interruptId": asked["id"], "status": "resolved", "payload": {"answer": "A"}}]
    events = await web.run(branch, resume=resume)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert (await web.thread(branch))["interrupts"] == []
    assert [i["id"] for i in (await web.thread(THREAD))["interrupts"]] == [asked["id"]]
    said = [m.get("content") for m in (await web.thread(branch))["messages"]]
    assert "Using A." in said
    assert "Using A." not in [m.get("content") for m in source["messages"]]


async def test_deleting_a_thread_removes_it_and_keeps_its_branches(web: Web) -> None:
    await ask_question(web)
    branch = (await web.http.post(f"/api/threads/{THREAD}/branch", json={})).json()["threadId"]

    deleted = await web.http.delete(f"/api/threads/{THREAD}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True, "threadId": THREAD}
    gone = await web.http.get(f"/api/threads/{THREAD}")
    assert gone.status_code == 404 and gone.json()["code"] == "NO_THREAD"
    listed = (await web.http.get("/api/threads")).json()["threads"]
    assert [t["threadId"] for t in listed] == [branch]
    assert await web.session(THREAD).record() is None, "the plan state went with it"
    # The audit trail stays, with the deletion in it.
    kinds = [e.event.kind for e in await web.session(THREAD).journal()]
    assert kinds[-1] == "session.deleted" and "session.forked" in kinds
    # The branch is a thread of its own: it still opens, with its waiting question.
    assert len((await web.thread(branch))["interrupts"]) == 1


async def test_unknown_bad_or_foreign_requests_get_a_code_and_change_nothing(web: Web) -> None:
    await ask_question(web)
    for method, path in (("DELETE", "/api/threads/t-nope"), ("POST", "/api/threads/t-nope/branch")):
        response = await web.http.request(method, path, json={})
        assert response.status_code == 404 and response.json()["code"] == "NO_THREAD"
    bad = await web.http.delete("/api/threads/..%2Fetc")
    assert bad.status_code in (404, 422)
    plain = await web.http.post(f"/api/threads/{THREAD}/branch", content=b"{}")
    assert plain.status_code == 415 and plain.json()["code"] == "BAD_INPUT"
    foreign = await web.http.delete(f"/api/threads/{THREAD}", headers={"Origin": "http://evil"})
    assert foreign.status_code == 403 and foreign.json()["code"] == "CROSS_ORIGIN"
    listed = (await web.http.get("/api/threads")).json()["threads"]
    assert [t["threadId"] for t in listed] == [THREAD]


async def test_a_running_thread_can_be_neither_branched_nor_deleted(database_url: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def Inspect(path: str) -> dict[str, Any]:
        """Inspect a path slowly."""
        started.set()
        await release.wait()
        return {"inspected": path}

    model = ScriptedLlm().add([call("Inspect", path="src")], [text("done")])
    web = Web(database_url, model, tools=[Read, Write, declare_effect(Inspect, Effect.READ)])
    try:
        running = asyncio.create_task(web.run(THREAD, messages=[user_message("look")]))
        await asyncio.wait_for(started.wait(), 30)
        for method, path in (
            ("DELETE", f"/api/threads/{THREAD}"),
            ("POST", f"/api/threads/{THREAD}/branch"),
        ):
            response = await web.http.request(method, path, json={})
            assert response.status_code == 409, response.text
            assert response.json()["code"] == "RUN_IN_PROGRESS"
        release.set()
        events = await asyncio.wait_for(running, 60)
        assert events[-1]["type"] == "RUN_FINISHED"
        assert json.dumps({"inspected": "src"}) in [
            e.get("content") for e in events if e["type"] == "TOOL_CALL_RESULT"
        ]
        listed = (await web.http.get("/api/threads")).json()["threads"]
        assert [t["threadId"] for t in listed] == [THREAD]
        # Once the run is over, both work.
        assert (await web.http.post(f"/api/threads/{THREAD}/branch", json={})).status_code == 201
        assert (await web.http.delete(f"/api/threads/{THREAD}")).status_code == 200
    finally:
        await web.http.aclose()


async def test_deleting_one_thread_leaves_a_thread_whose_id_it_would_match_as_a_pattern(
    web: Web,
) -> None:
    """``_`` is a wildcard in SQL LIKE: deleting ``t_1`` must not touch ``ta1``'s plan."""
    for thread_id in ("t_1", "ta1"):
        web.model.add([call("ask_user_question", question="Which?", options=["A", "B"])])
        await web.run(thread_id, messages=[user_message("go")], state={"agent_mode": "plan"})
    assert (await web.http.delete("/api/threads/t_1")).status_code == 200
    assert len((await web.thread("ta1"))["interrupts"]) == 1
    assert await web.session("ta1").record() is not None
    # The same for archived plans: ``t_1`` lists none of ``ta1``'s.
    other = web.session("ta1")
    record = await other.record()
    assert record is not None
    store = await other.runtime.store()
    async with store.transaction() as tx:
        await tx.put(
            ARCHIVE_KIND,
            f"{other.scope.key}#{record.id}",
            record.model_dump(mode="json", by_alias=True),
            expected_version=0,
        )
    assert [p.id for p in await other.archived()] == [record.id]
    assert await web.session("t_1").archived() == []
