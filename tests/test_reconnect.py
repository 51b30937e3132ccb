"""Runs go on after PostgreSQL dropped every connection (``pg_terminate_backend``: a
failover, an administrator, a connection killer): the pools reconnect, no run fails with
a stale connection. Real PostgreSQL, the real Runner with a scripted model, a real lease."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from harness import Harness, Read, make_agent
from plangate.adk.thread_runs import ThreadRuns
from plangate.models.scripted import ScriptedLlm, call, text


async def _terminate_all(database_url: str) -> int:
    """End every other connection to the test's database; how many were ended."""
    name = database_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(database_url)
    try:
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
    finally:
        await admin.close()
    return int(ended)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_runs_after_every_connection_was_terminated_succeed(database_url: str) -> None:
    model = ScriptedLlm(side_answer="general-task")
    for i in range(3):
        model.add([call("Read", path=f"f{i}.txt")], [text(f"done {i}")])
    harness = Harness(make_agent(model, tools=[Read]), database_url)
    threads = ThreadRuns(harness.runner, harness.user_id, ttl=30)
    try:
        await harness.start(session_id="s1")
        for i in range(3):
            async with threads.hold("s1", f"run-{uuid.uuid4().hex}"):
                events = await harness.send(f"read f{i}.txt")
            assert any(
                part.text == f"done {i}"
                for event in events
                if event.content
                for part in event.content.parts or []
            ), events
            # Between two runs: every pooled connection (the engine's, the fast path's,
            # the lease keeper's) is cut by the server.
            assert await _terminate_all(database_url) >= 1
        session = await harness.session()
        assert sum(1 for event in session.events if event.author == "user") == 3
    finally:
        threads.close()
