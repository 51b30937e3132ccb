"""Plan-state commits (compare-and-set + journal row) against raw ``sqlite3``, in one run.

    python benchmarks/bench_store.py [--commits 500] [--postgres URL]

(a) SQLite, WAL, synchronous=FULL (the default; see ``plangate.store.writes``): the same
    transaction -- BEGIN IMMEDIATE, the versioned UPDATE, one journal INSERT, COMMIT --
    with plain ``sqlite3`` on plangate's tables; the same raw transaction handed from
    asyncio to a thread and back (the floor of a commit in a thread); the store's own
    ``commit`` of that document and row; ``PlanRuntime.commit``
    driven from asyncio -- on the event loop's connection (the default on a fast disk),
    in the commit thread, and from 8 sessions at once there (group commit) --
    interleaved in chunks; and raw with synchronous=NORMAL, to show what durability
    costs.
(b) PostgreSQL (``--postgres`` or ``PLANGATE_TEST_POSTGRES_URL``): 1 and 8 concurrent
    writers, each on its own session, in commits/s, beside raw asyncpg doing the same
    transaction with prepared statements (the floor of this server and disk).
The machine is shared and noisy: compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from pathlib import Path
from queue import SimpleQueue

from plangate.adk.options import PlanOptions
from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.journal.events import JournalEvent
from plangate.plan import transitions as t
from plangate.plan.session_state import PlanSessionState

STATE = PlanSessionState(record=t.force_enter(None, objective="bench", now=0.0).record)
DATA = json.dumps(STATE.model_dump(mode="json", by_alias=True))


class RawCommits:
    """The floor: the same transaction on plangate's own tables, with plain ``sqlite3``."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.key = uuid.uuid4().hex
        self.version = 1
        self.conn.execute(
            "INSERT INTO plangate_documents VALUES ('plan_state', ?, 1, ?, 0)", (self.key, DATA)
        )

    def run(self, count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            self.one()
        return time.perf_counter() - start

    async def run_off_loop(self, count: int) -> float:
        """The same commits from asyncio, each handed to a thread of its own and answered
        through the event loop: the floor of any commit that does not block the loop."""
        loop = asyncio.get_running_loop()
        jobs: SimpleQueue[asyncio.Future[None] | None] = SimpleQueue()

        def serve() -> None:
            while (future := jobs.get()) is not None:
                self.one()
                loop.call_soon_threadsafe(future.set_result, None)

        thread = threading.Thread(target=serve)
        thread.start()
        start = time.perf_counter()
        for _ in range(count):
            future = loop.create_future()
            jobs.put(future)
            await future
        spent = time.perf_counter() - start
        jobs.put(None)
        thread.join()
        return spent

    def one(self) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        updated = conn.execute(
            "UPDATE plangate_documents SET version = ?, data = ?, updated_at = ? "
            "WHERE kind = 'plan_state' AND key = ? AND version = ?",
            (self.version + 1, DATA, time.time(), self.key, self.version),
        )
        assert updated.rowcount == 1
        conn.execute(
            "INSERT INTO plangate_journal (scope, kind, subject, from_state, to_state, "
            "actor, at, revision, sha256, detail) VALUES (?, 'mode.selected', '', NULL, "
            "NULL, 'user', ?, NULL, NULL, '{}')",
            (self.key, time.time()),
        )
        conn.execute("COMMIT")
        self.version += 1


class BareStoreCommits:
    """``store.writes.commit`` alone: the compare-and-set of one document and one journal
    row, given as data (no plan state to load or serialise)."""

    def __init__(self, runtime: PlanRuntime) -> None:
        self.runtime = runtime
        self.key = uuid.uuid4().hex
        self.version = 0

    async def run(self, count: int) -> float:
        from plangate.store.writes import Put, commit

        store = await self.runtime.store()
        if store.writer is not None:
            store.writer.on_loop = True
        data = json.loads(DATA)
        start = time.perf_counter()
        for _ in range(count):
            event = JournalEvent(kind="mode.selected", actor="user", at=time.time())
            [self.version] = await commit(
                store, [Put("plan_state", self.key, data, self.version)], [(self.key, event)]
            )
        return time.perf_counter() - start


class StoreCommits:
    """``PlanRuntime.commit``: load (cached), compare-and-set, one journal row."""

    def __init__(self, url: str) -> None:
        self.runtime = PlanRuntime(PlanOptions(database_url=url), "agent")

    async def run(self, count: int, writers: int = 1, on_loop: bool = True) -> float:
        """Seconds for ``count`` commits per writer; ``on_loop=False`` keeps SQLite's
        commits in the commit thread (as when the disk is slow or the file busy)."""
        runtime = self.runtime
        writer_of_store = (await runtime.store()).writer
        if writer_of_store is not None:
            writer_of_store.on_loop = on_loop

        async def writer(scope: PlanScope) -> None:
            for _ in range(count):
                loaded = await runtime.load(scope)
                event = JournalEvent(kind="mode.selected", actor="user", at=time.time())
                await runtime.commit(scope, loaded, STATE, events=[event])

        scopes = [PlanScope("bench", "u", uuid.uuid4().hex, "agent") for _ in range(writers)]
        await runtime.store()
        start = time.perf_counter()
        await asyncio.gather(*(writer(scope) for scope in scopes))
        return time.perf_counter() - start


async def raw_postgres(url: str, count: int, writers: int) -> float:
    """The floor on PostgreSQL: asyncpg on its own, one connection per writer, the same
    transaction (BEGIN, the versioned UPDATE, one journal INSERT, COMMIT) with prepared
    statements, on plangate's tables. Seconds for ``count`` commits per writer."""
    import asyncpg

    from plangate.store.store import Store

    store = await Store.open(url)  # creates the tables
    await store.close()

    async def writer() -> None:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        key, version = uuid.uuid4().hex, 1
        await conn.execute(
            "INSERT INTO plangate_documents VALUES ('plan_state', $1, 1, $2, 0)", key, DATA
        )
        update = await conn.prepare(
            "UPDATE plangate_documents SET version = $1, data = $2, updated_at = $3 "
            "WHERE kind = 'plan_state' AND key = $4 AND version = $5"
        )
        journal = await conn.prepare(
            "INSERT INTO plangate_journal (scope, kind, subject, actor, at, detail) "
            "VALUES ($1, 'mode.selected', '', 'user', $2, '{}')"
        )
        for _ in range(count):
            async with conn.transaction():
                await update.fetch(version + 1, DATA, time.time(), key, version)
                await journal.fetch(key, time.time())
            version += 1
        await conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    return time.perf_counter() - start


async def sqlite_figures(folder: Path, commits: int, rounds: int = 10) -> dict[str, float]:
    """Commits/s of each, in small interleaved chunks: the disk's flush time here swings
    by 5x from minute to minute, so only figures taken side by side compare."""
    path = folder / "bench.db"
    store = StoreCommits(f"sqlite:///{path}")
    await store.runtime.store()  # creates the tables the raw loops use too
    full, normal = RawCommits(path, "FULL"), RawCommits(path, "NORMAL")
    bare = BareStoreCommits(store.runtime)
    names = ("raw_full", "raw_off_loop", "bare", "store", "store_thread", "store_8", "raw_normal")
    spent = dict.fromkeys(names, 0.0)
    chunk = max(commits // rounds, 1)
    for _ in range(rounds):
        spent["raw_full"] += full.run(chunk)
        spent["raw_off_loop"] += await full.run_off_loop(chunk)
        spent["bare"] += await bare.run(chunk)
        spent["store"] += await store.run(chunk)
        spent["store_thread"] += await store.run(chunk, on_loop=False)
        # Eight sessions at once in the commit thread, as many commits in all: they are
        # written in groups.
        eighth = max(chunk // 8, 1)
        spent["store_8"] += await store.run(eighth, writers=8, on_loop=False) * chunk / (8 * eighth)
        spent["raw_normal"] += normal.run(chunk)
    return {name: chunk * rounds / seconds for name, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--postgres", default=os.environ.get("PLANGATE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        best = asyncio.run(sqlite_figures(Path(tmp), args.commits))
    raw = best["raw_full"]
    print("(a) plan-state compare-and-set + journal row, SQLite WAL, commits/s")
    print(f"    raw sqlite3, synchronous=FULL              {raw:8.0f}")
    print(
        f"    raw sqlite3 off the event loop (one hop)   {best['raw_off_loop']:8.0f}"
        f" ({best['raw_off_loop'] / raw:.2f}x raw: the floor of a loop that never blocks)"
    )
    print(
        f"    store.writes.commit (FULL)                 {best['bare']:8.0f}"
        f" ({best['bare'] / raw:.2f}x raw: the same transaction, on the event loop's"
        " connection)"
    )
    print(f"    PlanRuntime.commit (FULL)                  {best['store']:8.0f}")
    print(
        f"    ratio to raw, same durability              {best['store'] / raw:8.2f}x"
        " (goal >= 0.8; with loading and serialising the plan state)"
    )
    print(
        f"    PlanRuntime.commit in the commit thread    {best['store_thread']:8.0f}"
        f" ({best['store_thread'] / raw:.2f}x raw, "
        f"{best['store_thread'] / best['raw_off_loop']:.2f}x the one-hop floor:"
        " a slow disk or a busy file)"
    )
    print(
        f"    the same, 8 sessions at once               {best['store_8']:8.0f}"
        f" ({best['store_8'] / raw:.2f}x raw: group commit)"
    )
    print(
        f"    raw sqlite3, synchronous=NORMAL            {best['raw_normal']:8.0f}"
        " (not durable on power loss)"
    )
    if not args.postgres:
        print("(b) PostgreSQL: skipped (pass --postgres URL)")
        return
    print("(b) PostgreSQL, each writer on its own session, commits/s")
    for writers in (1, 8):
        # Interleaved halves: the server's flush time swings as the SQLite file's does.
        spent = {"raw": 0.0, "store": 0.0}
        half = max(args.commits // 2, 1)
        for _ in range(2):
            spent["raw"] += asyncio.run(raw_postgres(args.postgres, half, writers))
            spent["store"] += asyncio.run(StoreCommits(args.postgres).run(half, writers))
        raw, store = (writers * half * 2 / spent[name] for name in ("raw", "store"))
        print(f"    {writers} writer(s): raw asyncpg        {raw:8.0f}")
        print(f"    {writers} writer(s): PlanRuntime.commit {store:8.0f} ({store / raw:.2f}x raw)")
    print("    (goal >= 2000 with 8 writers; the raw figure is what this server and disk allow)")


if __name__ == "__main__":
    main()
