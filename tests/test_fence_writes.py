"""Every write path refuses a run whose lease another holder took (``RUN_LEASE_LOST``).

The frozen-server test (``test_fencing.py``) shows it end to end; here each path is
driven on purpose, after the takeover, so none depends on which thread wins the race
when a stalled process wakes. Real SQLite file and real PostgreSQL, the real Runner's
store, two ``ThreadRuns`` standing for two servers (each has a holder of its own).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from sqlalchemy import select, update

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.runner import build_runner
from plangate.adk.thread_runs import ThreadRuns
from plangate.errors import ErrorCode
from plangate.journal.events import JournalEvent
from plangate.models.scripted import ScriptedLlm
from plangate.store.fence import LeaseLost, current_fence
from plangate.store.schema import documents, journal, run_leases
from plangate.store.store import Store, Transaction
from plangate.store.writes import Put, commit, transact


def _event(kind: str) -> JournalEvent:
    return JournalEvent(kind=kind, at=time.time())


async def _rows(store: Store) -> tuple[list[Any], list[Any]]:
    async with store.engine.connect() as conn:
        rows = (await conn.execute(select(journal.c.seq, journal.c.kind))).all()
        docs = (
            await conn.execute(select(documents.c.kind, documents.c.key, documents.c.version))
        ).all()
    return sorted(tuple(r) for r in rows), sorted(tuple(d) for d in docs)


async def test_every_write_of_a_run_that_lost_its_lease_is_refused(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = setup_plan(LlmAgent(name="agent", model=ScriptedLlm()), PlanOptions())
    runner = build_runner(agent, database_url=database_url, app_name="app")
    stalled = ThreadRuns(runner, "user", ttl=300)  # the keeper renews every 100 s
    taker = ThreadRuns(runner, "user", ttl=300)
    run = contextvars.copy_context()  # the stalled server's run task

    def in_run(coroutine: Any) -> Any:
        return asyncio.create_task(coroutine, context=run)

    try:
        lease = await stalled.start("s1", "run-1")
        await in_run(stalled.keep(lease, lambda: None))
        store = (await stalled.leases()).store

        # While the lease is its own, the run writes on every path.
        async def put(tx: Transaction) -> None:
            await tx.put("note", "by-transact", {"n": 1}, expected_version=0)

        await in_run(commit(store, [Put("note", "k", {"n": 1}, 0)], [("s", _event("a.one"))]))
        await in_run(transact(store, put))
        assert run.run(current_fence) is not None and current_fence() is None

        # It stalls past its lease; another server takes the thread over.
        async with store.transaction() as tx:
            await tx.connection.execute(update(run_leases).values(expires_at=time.time() - 1))
        taken = await taker.start("s1", "run-2")
        assert taken.holder != lease.holder
        before = await _rows(store)

        # It wakes: each write, on each path, is refused with nothing applied.
        async def put_again(tx: Transaction) -> None:
            await tx.put("note", "by-transact", {"n": 2}, expected_version=1)
            await tx.append("s", _event("a.late"))

        async def general_transaction() -> None:
            async with store.transaction() as tx:
                await tx.append("s", _event("a.late"))

        attempts = [
            lambda: commit(store, [Put("note", "k", {"n": 2}, 1)], [("s", _event("a.late"))]),
            lambda: commit(store, [], [("s", _event("a.late"))]),
            lambda: transact(store, put_again),
            general_transaction,
            # What a tool call checks before it runs (not a write: a read of the lease).
            stalled.check_lease,
        ]
        if store.writer is not None:
            # The SQLite commit thread as well as the event loop's own connection.
            store.writer.on_loop = False
            attempts.append(
                lambda: commit(store, [Put("note", "k", {"n": 3}, 1)], [("s", _event("a.late"))])
            )
        for attempt in attempts:
            with pytest.raises(LeaseLost) as refused:
                await in_run(attempt())
            assert refused.value.code is ErrorCode.RUN_LEASE_LOST
        if store.writer is not None:
            store.writer.on_loop = True
        assert await _rows(store) == before

        # Its end releases nothing of the new holder's and says what happened.
        await in_run(stalled.finish(lease))
        assert (await taker.leases()).store is not None
        holder = await (await taker.leases()).holder_of(taker.thread_key("s1"))
        assert holder is not None and holder.run_id == "run-2"
        assert "another server took the thread over" in caplog.text
        # The new holder writes as usual.
        await taker.finish(taken)
    finally:
        stalled.close()
        taker.close()
