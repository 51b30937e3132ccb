"""``session/fork`` and ``session/close`` through ``plangate acp``, driven by the real ACP
SDK client over stdio: a fork starts where its source is (history, plan state, pending
approval, task) under its own id, and the two go their own ways afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import UserMessageChunk

from acp_support import (
    CANCEL,
    FIXED,
    editor,
    open_session,
    planning_session,
    prompt,
    sqlite_database_url,
)
from plangate.plan import PlanStatus
from plangate.store.intents import IntentRepository
from plangate.store.shared import shared_store

database_url = sqlite_database_url


async def _resolved(database_url: str, session_key: str) -> str | None:
    store = await shared_store(database_url)
    async with store.engine.connect() as conn:
        return await IntentRepository(conn).resolve_revision_id(session_key)


async def test_a_forked_session_starts_where_its_source_is_and_then_diverges(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        info = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        capabilities = info.agent_capabilities.session_capabilities
        assert capabilities.fork is not None and capabilities.close is not None

        await planning_session(client, conn, workspace)
        # Stopped at the plan approval: the source has a plan waiting for review.
        assert await prompt(client, conn, "Fix the failing test", "0", CANCEL) == "cancelled"
        source_id = client.session_id

        forked = await conn.fork_session(session_id=source_id, cwd=str(workspace), mcp_servers=[])
        assert forked.session_id != source_id
        assert forked.modes.current_mode_id == "plan"
        fork = await open_session(workspace, database_url, forked.session_id)
        source = await open_session(workspace, database_url, source_id)
        assert [p.kind for p in await fork.pending()] == ["exit"]
        assert await fork.pending() == await source.pending()
        fork_task = await _resolved(database_url, fork.scope.session_key)
        assert fork_task is not None
        assert fork_task == await _resolved(database_url, source.scope.session_key)
        forked_events = [e.event for e in await fork.journal() if e.event.kind == "session.forked"]
        assert [e.detail for e in forked_events] == [{"from": source_id, "to": forked.session_id}]

        # The source leaves Plan Mode: its plan is cancelled, the fork's stays open.
        await conn.set_session_mode(session_id=source_id, mode_id="default")
        assert (await source.record()).status is PlanStatus.CANCELLED
        assert [p.kind for p in await fork.pending()] == ["exit"]

        # The fork is asked for the approval again and implements the plan.
        client.session_id = forked.session_id
        assert await prompt(client, conn, "Go ahead", "approve") == "end_turn"
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()
        assert (await fork.record()).status is not PlanStatus.CANCELLED
        assert (await source.record()).status is PlanStatus.CANCELLED
        fork_history = (await fork.session()).events
        assert len(fork_history) > len((await source.session()).events)

        # Closed, the fork is no longer served; session/load opens it again with its history.
        await conn.close_session(session_id=forked.session_id)
        with pytest.raises(RequestError) as closed:
            await conn.set_session_mode(session_id=forked.session_id, mode_id="plan")
        assert closed.value.code == -32602
        before = len(client.updates)
        await conn.load_session(cwd=str(workspace), session_id=forked.session_id, mcp_servers=[])
        users = [u.content.text for u in client.of(UserMessageChunk, before)]
        assert users[:1] == ["Fix the failing test"] and "Go ahead" in users


async def test_forking_an_unknown_or_running_session_is_refused_with_a_code(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        with pytest.raises(RequestError) as unknown:
            await conn.fork_session(session_id="nope", cwd=str(workspace), mcp_servers=[])
        assert unknown.value.code == -32602 and unknown.value.data["code"] == "NO_THREAD"

        await planning_session(client, conn, workspace)
        source_id = client.session_id

        async def fork_while_running() -> None:
            await conn.fork_session(session_id=source_id, cwd=str(workspace), mcp_servers=[])

        client.during = ("Glob", fork_while_running)
        assert await prompt(client, conn, "Fix the failing test", "0", CANCEL) == "cancelled"
        assert client.during_task is not None
        with pytest.raises(RequestError) as running:
            await client.during_task
        assert running.value.data["code"] == "RUN_IN_PROGRESS"
        listed = await conn.list_sessions(cwd=str(workspace))
        assert [s.session_id for s in listed.sessions] == [source_id], "nothing was forked"
