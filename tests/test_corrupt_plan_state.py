"""A corrupt stored plan state: the gate runs only what is read-only, and the user's exit
archives the raw document, resets the state and journals it.

Through the real ADK Runner with a scripted model, on SQLite and PostgreSQL; the web
leave-plan endpoint through the real app (httpx ASGITransport).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from harness import WRITES, make_agent, tool_results
from plangate.adk.runner import build_runner
from plangate.adk.runtime import CORRUPT_KIND, STATE_KIND
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan.gate import GatePolicy, ToolCall, decide
from plangate.plan.session_state import (
    CorruptPlanState,
    PlanSessionState,
    read_stored,
    salvage,
)
from plangate.policy.effects import Effect
from plangate.store.schema import documents
from plangate.store.store import Conflict
from plangate.web.server import create_app

NO_PLAN: dict[str, Any] = {"record": None, "selection": None, "resolutions": {}, "ignored": {}}
RECORD: dict[str, Any] = {
    "id": "p1",
    "status": "exploring",
    "objective": "fix it",
    "startedAt": 1.0,
    "updatedAt": 1.0,
}

# Each form of corrupt document, and what the refusal names about it.
CORRUPT_DOCUMENTS: dict[str, tuple[Any, str]] = {
    "empty object": ({}, "no 'record'"),
    "no record key": ({"selection": None, "resolutions": {}, "ignored": {}}, "no 'record'"),
    "array": ([NO_PLAN], "an array, not an object"),
    "string": ("plan", "a string, not an object"),
    "number": (7, "a number, not an object"),
    "null": (None, "null, not an object"),
    "unknown status": ({**NO_PLAN, "record": {**RECORD, "status": "bogus"}}, "record.status"),
    "record missing fields": ({**NO_PLAN, "record": {"status": "exploring"}}, "record.id"),
    "record not an object": ({**NO_PLAN, "record": "exploring"}, "invalid record"),
    "resolutions of the wrong type": ({**NO_PLAN, "resolutions": []}, "resolutions"),
    "selection of the wrong type": ({**NO_PLAN, "selection": 5}, "selection"),
    "unknown key": ({**NO_PLAN, "owner": {"x": 1}}, "unknown key 'owner'"),
    "null record under Plan Mode": (
        {**NO_PLAN, "selection": "plan"},
        "Plan Mode is applied but there is no plan record",
    ),
}


async def open_session(database_url: str, model: ScriptedLlm) -> PlanSession:
    runner = build_runner(make_agent(model), database_url=database_url, app_name="corrupt")
    return await PlanSession.open(runner, session_id="s1")


async def collect(session: PlanSession, message: str) -> list[Any]:
    return [event async for event in session.run(message)]


async def store_row(session: PlanSession, data: Any, version: Any = 1) -> None:
    """Put ``data`` in the session's plan-state row as someone else would, at ``version``."""
    store = await session.runtime.store()
    key = session.scope.key
    async with store.transaction() as tx:
        existing = await tx.get(STATE_KIND, key)
        await tx.put(STATE_KIND, key, data, expected_version=existing.version if existing else 0)
        await tx.connection.execute(
            update(documents)
            .where(documents.c.kind == STATE_KIND, documents.c.key == key)
            .values(version=version)
        )


async def archived_corrupt(session: PlanSession) -> list[tuple[str, Any]]:
    store = await session.runtime.store()
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                select(documents.c.key, documents.c.data).where(
                    documents.c.kind == CORRUPT_KIND,
                    documents.c.key.startswith(session.scope.key + "#"),
                )
            )
        ).all()
    return [(row.key, row.data) for row in rows]


async def assert_gated_then_reset(
    session: PlanSession, model: ScriptedLlm, raw: Any, names: str, version: Any = 1
) -> None:
    """Write refused and Read run while corrupt; the exit resets it and Write runs again."""
    model.add(
        [call("Write", path="a", content="early")],
        [call("Read", path="a")],
        [call("update_plan_content", content="1. x")],
        [text("stuck")],
    )
    events = await collect(session, "write it")
    refused = tool_results(events, "Write")[0]
    refusal = refused["error"]
    assert refusal.startswith("PLAN_MODE_GATE") and "stored plan state is corrupt" in refusal
    assert names in refusal and "/plan off" in refused["hint"]
    assert tool_results(events, "Read") == [{"path": "a", "content": "contents of a"}]
    plan_tool = tool_results(events, "update_plan_content")[0]["error"]
    assert "no readable plan" in plan_tool
    assert WRITES == []
    assert await session.corrupt_state() is not None

    message = await session.leave_plan()
    assert message.startswith("The corrupt plan state was reset")
    assert await session.corrupt_state() is None
    assert await session.plan_state() == PlanSessionState(selection="agent")
    assert (await session.session()).state["agent_mode"] == "agent"
    [(archive_key, archived)] = await archived_corrupt(session)
    assert archived == raw
    resets = [e.event for e in await session.journal() if e.event.kind == "plan.state.reset"]
    assert len(resets) == 1 and resets[0].actor == "user"
    assert resets[0].detail["archive_key"] == archive_key
    assert resets[0].detail["found_version"] == version
    assert names in resets[0].detail["reason"]

    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await collect(session, "write it now")
    assert tool_results(events, "Write") == [{"written": "a"}]
    assert WRITES == [("a", "b")]


@pytest.mark.parametrize("form", list(CORRUPT_DOCUMENTS))
async def test_corrupt_document_gates_reads_only_until_the_user_resets_it(
    database_url: str, form: str
) -> None:
    raw, names = CORRUPT_DOCUMENTS[form]
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await store_row(session, raw)
    await assert_gated_then_reset(session, model, raw, names)


@pytest.mark.parametrize("version", [0, -3])
async def test_bad_row_version_gates_reads_only_until_the_user_resets_it(
    database_url: str, version: int
) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await store_row(session, NO_PLAN, version=version)
    await assert_gated_then_reset(session, model, NO_PLAN, f"version {version}", version)
    store = await session.runtime.store()
    # Repaired to a valid version (later runs may have moved it on since).
    assert (await store.get(STATE_KIND, session.scope.key)).version >= 1


@pytest.mark.parametrize("version", [1.5, "abc"])
async def test_non_integer_row_version_is_corrupt(tmp_path: Path, version: Any) -> None:
    """Only SQLite can hold one: PostgreSQL's integer column refuses it."""
    model = ScriptedLlm()
    session = await open_session(f"sqlite:///{tmp_path / 'plangate.db'}", model)
    await store_row(session, NO_PLAN, version=version)
    await assert_gated_then_reset(session, model, NO_PLAN, f"version {version!r}", version)


async def test_what_the_code_writes_for_no_plan_is_not_corrupt(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await store_row(session, {**NO_PLAN, "selection": "agent"})
    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await collect(session, "write it")
    assert tool_results(events, "Write") == [{"written": "a"}]
    assert await session.leave_plan() == "Plan mode is already inactive."
    assert await archived_corrupt(session) == []


async def test_a_reset_that_loses_the_race_changes_nothing(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await store_row(session, {})
    runtime = session.runtime
    loaded = await runtime.load(session.scope)
    await store_row(session, {"other": "writer"}, version=2)

    with pytest.raises(Conflict):
        await runtime.reset_corrupt(session.scope, loaded, actor="user", selection="agent")
    assert await archived_corrupt(session) == []
    assert not [e for e in await session.journal() if e.event.kind == "plan.state.reset"]
    # The exit reads the row again, so it archives what is there now.
    assert (await session.leave_plan()).startswith("The corrupt plan state was reset")
    assert [data for _, data in await archived_corrupt(session)] == [{"other": "writer"}]


async def test_web_leave_plan_endpoint_resets_a_corrupt_state(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    raw = {**NO_PLAN, "record": {**RECORD, "status": "bogus"}}
    await store_row(session, raw)
    app = create_app(runner=session.runner, require_token=False, token=None)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        response = await http.post(f"/api/threads/{session.session_id}/leave-plan", json={})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"].startswith("The corrupt plan state was reset")
    assert body["state"]["agent_mode"] == "agent"
    assert any(e["kind"] == "plan.state.reset" for e in body["journal"])
    assert [data for _, data in await archived_corrupt(session)] == [raw]
    model.add([call("Write", path="a", content="b")], [text("done")])
    events = await collect(session, "write it")
    assert tool_results(events, "Write") == [{"written": "a"}]


# -- the pure pieces ---------------------------------------------------------------------


def test_read_stored_accepts_what_the_code_writes() -> None:
    assert read_stored(NO_PLAN) == PlanSessionState()
    assert read_stored({"record": None}) == PlanSessionState()  # fields added later default
    state = read_stored({**NO_PLAN, "record": RECORD, "selection": "plan"}, plan_selection="plan")
    assert state.record is not None and state.record.id == "p1"
    # A null record is only contradicted by an applied Plan Mode selection.
    assert read_stored({**NO_PLAN, "selection": "plan"}).selection == "plan"
    with pytest.raises(CorruptPlanState):
        read_stored({**NO_PLAN, "selection": "plan"}, plan_selection="plan")


@pytest.mark.parametrize("form", list(CORRUPT_DOCUMENTS))
def test_read_stored_refuses_every_corrupt_form(form: str) -> None:
    raw, names = CORRUPT_DOCUMENTS[form]
    with pytest.raises(CorruptPlanState) as caught:
        read_stored(raw, plan_selection="plan")
    assert names in caught.value.reason


def test_salvage_keeps_readable_history_and_withdraws_what_was_pending() -> None:
    raw = {
        "record": {**RECORD, "status": "bogus", "pending": [{"callId": "c-exit"}, "junk"]},
        "resolutions": {"c-old": {"result": {"status": "approved"}}, "c-bad": []},
        "ignored": {"c-dup": {"reason": "duplicate"}},
    }
    state = salvage(raw, selection="agent")
    assert state.record is None and state.selection == "agent"
    assert set(state.resolutions) == {"c-old", "c-exit"}
    assert state.resolutions["c-exit"].result["status"] == "cancelled"
    assert set(state.ignored) == {"c-dup"}
    assert salvage([1], selection=None) == PlanSessionState()


def test_corrupt_state_runs_what_is_read_only_and_unreachable_runs_nothing() -> None:
    policy = GatePolicy()

    def allowed(call: ToolCall, *, corrupt: bool = True) -> bool:
        return decide(call, None, policy, unreadable="bad", corrupt=corrupt).allowed

    assert allowed(ToolCall("Read", {}, Effect.READ))
    assert allowed(ToolCall("Grep", {}))
    assert allowed(ToolCall("Bash", {"command": "ls -la"}, Effect.SHELL))
    assert allowed(ToolCall("spawn_subagent", {"subagent_type": "Explore"}, own=True))
    assert not allowed(ToolCall("Bash", {"command": "rm -rf x"}, Effect.SHELL))
    assert not allowed(ToolCall("spawn_subagent", {"subagent_type": "general"}, own=True))
    assert not allowed(ToolCall("Write", {}, Effect.WRITE))
    assert not allowed(ToolCall("write_file", {}))
    for name in ("enter_plan_mode", "update_plan_content", "exit_plan_mode", "ask_user_question"):
        assert not allowed(ToolCall(name, {}, own=True))
    # An unreachable database is not a corrupt row: it stays closed to everything.
    assert not allowed(ToolCall("Read", {}, Effect.READ), corrupt=False)
