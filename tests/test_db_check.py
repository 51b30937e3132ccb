"""``plangate db check``, ``--repair`` and ``upgrade`` on both stores, and the runs of a
dead server marked interrupted by the lease sweep."""

from __future__ import annotations

import asyncio
import time

import pytest
from google.adk.agents import LlmAgent
from sqlalchemy import insert, text, update

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.database import prepare_database
from plangate.adk.runner import build_runner
from plangate.adk.thread_runs import ThreadRuns
from plangate.cli.main import main
from plangate.models.scripted import ScriptedLlm
from plangate.store.leases import LeaseHeld, RunLeases
from plangate.store.protocol_state import RUN_KIND
from plangate.store.recovery import stale_runs, sweep_lease
from plangate.store.schema import documents, run_leases
from plangate.store.store import Store

RUN_KEY = "app/user/s1/agent#inv-1"
RUN = {
    "run_id": "inv-1",
    "scope_key": "app/user/s1/agent",
    "session_key": "app/user/s1",
    "status": "running",
}


async def _seed(url: str, *, run_written_at: float = 0.0) -> None:
    """A prepared database with a plan state at version -3 and a run left running."""
    await prepare_database(url)
    store = await Store.open(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(
                insert(documents).values(
                    kind="plan_state", key="app/user/s1/b", version=-3, data={}, updated_at=0.0
                )
            )
            await conn.execute(
                insert(documents).values(
                    kind=RUN_KIND, key=RUN_KEY, version=1, data=RUN, updated_at=run_written_at
                )
            )
    finally:
        await store.close()


def db(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["db", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_fix_12_2_check_reports_and_repair_fixes_with_journal_entries(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seed(database_url))
    code, out = db(capsys, "check", "--database-url", database_url)
    assert code == 1
    assert "ok schema: version 3" in out
    assert "plan_state 'app/user/s1/b': version -3" in out
    assert RUN_KEY in out

    code, out = db(capsys, "check", "--repair", "--database-url", database_url)
    assert code == 0, out
    assert "ok repaired" in out

    async def after() -> tuple[int, dict, list[str]]:
        store = await Store.open(database_url)
        try:
            state = await store.get("plan_state", "app/user/s1/b")
            run = await store.get(RUN_KIND, RUN_KEY)
            kinds = [e.event.kind for e in await store.journal()]
        finally:
            await store.close()
        assert state is not None and run is not None
        return state.version, run.data, kinds

    version, run, kinds = asyncio.run(after())
    assert version == 1
    assert run["status"] == "interrupted"
    assert "store.document.repaired" in kinds
    assert "protocol.run.interrupted" in kinds
    assert db(capsys, "check", "--database-url", database_url)[0] == 0


def test_fix_12_2_repair_recreates_a_dropped_session_table(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def drop() -> None:
        await prepare_database(database_url)
        store = await Store.open(database_url)
        try:
            async with store.engine.begin() as conn:
                await conn.execute(text("DROP TABLE events"))
        finally:
            await store.close()

    asyncio.run(drop())
    with pytest.raises(Exception, match="lacks the session table"):
        asyncio.run(prepare_database(database_url))
    code, out = db(capsys, "check", "--database-url", database_url)
    assert code == 1 and "tables missing: events" in out
    code, out = db(capsys, "check", "--repair", "--database-url", database_url)
    assert code == 0, out
    asyncio.run(prepare_database(database_url))  # starts again


def test_a_run_written_recently_or_waiting_for_a_reply_is_not_orphaned(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seed(database_url, run_written_at=time.time()))
    _, out = db(capsys, "check", "--database-url", database_url)
    assert "ok runs: none orphaned" in out

    async def paused() -> list:
        store = await Store.open(database_url)
        try:
            async with store.engine.begin() as conn:
                await conn.execute(
                    update(documents).where(documents.c.key == RUN_KEY).values(updated_at=0.0)
                )
                await conn.execute(
                    insert(documents).values(
                        kind="plan_state",
                        key="app/user/s1/agent",
                        version=1,
                        data={"record": {"pending": [{"callId": "c1"}]}},
                        updated_at=0.0,
                    )
                )
            return await stale_runs(store)
        finally:
            await store.close()

    assert asyncio.run(paused()) == []


def test_fix_12_2_upgrade_prepares_a_fresh_database(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = db(capsys, "upgrade", "--database-url", database_url)
    assert code == 0, out
    assert db(capsys, "check", "--database-url", database_url)[0] == 0


async def test_fix_12_4_an_expired_lease_is_taken_over_and_its_runs_interrupted(
    database_url: str,
) -> None:
    await _seed(database_url, run_written_at=time.time())
    store = await Store.open(database_url)
    try:
        dead = RunLeases(store, holder="dead", ttl=30)
        alive = RunLeases(store, holder="alive", ttl=30)
        lease, _ = await dead.acquire("app/user/s1", "r1")
        with pytest.raises(Exception, match="run in progress"):
            await alive.acquire("app/user/s1", "r2")
        async with store.engine.begin() as conn:  # the holder stopped renewing long ago
            await conn.execute(update(run_leases).values(expires_at=time.time() - 1))
        [seen] = await alive.expired()
        assert seen.thread_key == "app/user/s1"
        assert await sweep_lease(store, seen, actor="t", reason="dead") == [RUN_KEY]
        assert await sweep_lease(store, seen, actor="t", reason="dead") == []  # one wins
        assert await dead.renew(lease) is None  # the dead holder cannot come back
        assert await stale_runs(store, session_key="app/user/s1") == []
        taken, replaced = await alive.acquire("app/user/s1", "r2")
        assert replaced is None and taken.holder == "alive"
        await alive.release(taken)
        assert await alive.holder_of("app/user/s1") is None
    finally:
        await store.close()


async def test_a_free_thread_goes_to_exactly_one_of_two_processes_and_an_expired_lease_to_the_next(
    database_url: str,
) -> None:
    """Two stores (two processes as far as the database can tell) start a run on one free
    thread at once: one takes the lease, the other is refused with ``LeaseHeld``. A lease
    left to expire is taken over by the next run, which is told whose it was."""
    one, two = await Store.open(database_url), await Store.open(database_url)
    try:
        first, second = RunLeases(one, holder="one", ttl=30), RunLeases(two, holder="two", ttl=30)
        results = await asyncio.gather(
            first.acquire("app/user/t", "r1"),
            second.acquire("app/user/t", "r2"),
            return_exceptions=True,
        )
        won = [r for r in results if isinstance(r, tuple)]
        refused = [r for r in results if isinstance(r, LeaseHeld)]
        assert len(won) == 1 and len(refused) == 1, results
        lease, replaced = won[0]
        assert replaced is None
        assert (await second.holder_of("app/user/t")) == lease
        async with one.engine.begin() as conn:  # its holder stopped renewing long ago
            await conn.execute(update(run_leases).values(expires_at=time.time() - 1))
        taken, old = await second.acquire("app/user/t", "r3")
        assert taken.holder == "two" and taken.run_id == "r3"
        assert old is not None and (old.holder, old.run_id) == (lease.holder, lease.run_id)
        with pytest.raises(LeaseHeld):
            await first.acquire("app/user/t", "r4")
        await second.release(taken)
        assert await first.holder_of("app/user/t") is None
    finally:
        await one.close()
        await two.close()


async def _interrupted(store: Store) -> tuple[str, int]:
    run = await store.get(RUN_KIND, RUN_KEY)
    assert run is not None
    kinds = [e.event.kind for e in await store.journal()]
    return run.data["status"], kinds.count("protocol.run.interrupted")


async def _expire_all(store: Store) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(update(run_leases).values(expires_at=time.time() - 1))


async def test_fix_12_3_a_sweep_that_saw_an_expired_lease_loses_to_a_late_heartbeat(
    database_url: str,
) -> None:
    """Under overload a heartbeat can come after the lease's expiry: the sweep read the
    row as expired, then the holder renewed it. The sweep's claim compares against the
    row it saw, so the live run keeps its lease and is not marked interrupted."""
    await _seed(database_url, run_written_at=time.time())
    store = await Store.open(database_url)
    try:
        slow = RunLeases(store, holder="slow", ttl=30)
        sweeper = RunLeases(store, holder="sweeper", ttl=30)
        lease, _ = await slow.acquire("app/user/s1", "r1")
        await _expire_all(store)
        [seen] = await sweeper.expired()
        renewed = await slow.renew(lease)  # the late heartbeat, between read and claim
        assert renewed is not None
        assert await sweep_lease(store, seen, actor="t", reason="dead") == []
        assert await _interrupted(store) == ("running", 0)
        assert await slow.holder_of("app/user/s1") == renewed
        assert await slow.renew(renewed) is not None  # still its lease

        # The other order: the claim first, then the heartbeat -- refused, the run was
        # marked once, and a second sweeper holding the same read changes nothing.
        await _expire_all(store)
        [seen] = await sweeper.expired()
        assert await sweep_lease(store, seen, actor="t", reason="dead") == [RUN_KEY]
        assert await slow.renew(renewed) is None
        assert await sweep_lease(store, seen, actor="t", reason="dead") == []
        assert await _interrupted(store) == ("interrupted", 1)
    finally:
        await store.close()


async def test_a_sweep_leaves_alone_a_lease_its_own_process_is_still_renewing(
    database_url: str,
) -> None:
    """Under overload the lease keeper's heartbeat can land after the lease's expiry (the
    file locked by other writers, the machine busy). Another process's sweep cannot tell
    a slow holder from a dead one and claims the lease; the holder's own sweep can, and
    must not stop its own live run."""
    await _seed(database_url, run_written_at=time.time())
    agent = setup_plan(LlmAgent(name="agent", model=ScriptedLlm()), PlanOptions())
    runner = build_runner(agent, database_url=database_url, app_name="app")
    here = ThreadRuns(runner, "user", ttl=30)
    elsewhere = ThreadRuns(runner, "user", ttl=30)  # another holder: another process
    lost: list[bool] = []
    try:
        lease = await here.start("s1", "inv-1")
        await here.keep(lease, lambda: lost.append(True))
        store = (await here.leases()).store
        await _expire_all(store)  # the heartbeat is late
        assert await here.sweep() == []
        assert await _interrupted(store) == ("running", 0)
        renewed = await (await here.leases()).renew(lease)  # ... and then lands
        assert renewed is not None

        await _expire_all(store)
        assert await elsewhere.sweep() == [RUN_KEY]
        assert await _interrupted(store) == ("interrupted", 1)
        assert await (await here.leases()).renew(renewed) is None  # the thread is gone

        # A lease no run of this process keeps any more is swept by its own process too.
        await here.finish(renewed)
        second = await here.start("s1", "inv-2")
        await _expire_all(store)
        assert (await (await here.leases()).expired())[0].run_id == "inv-2"
        await here.sweep()
        assert await here.running_elsewhere("s1") is False
        assert second.run_id == "inv-2" and lost == []
    finally:
        here.close()
        elsewhere.close()
