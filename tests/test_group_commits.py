"""Group commit on SQLite (``store.writes.SqliteWriter``): commits that queue up while one
is written go to disk together, in one transaction, and each one still stands alone -- a
lost compare-and-set or a refused row fails that commit only, and a crash leaves every
commit whole or absent."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from plangate.journal.events import JournalEvent
from plangate.store.errors import DatabaseError
from plangate.store.store import Conflict, Store
from plangate.store.writes import Put, SqliteWriter, commit, transact


def _event(kind: str) -> JournalEvent:
    return JournalEvent(kind=kind, subject="doc", actor="user", at=1.0)


async def _wait_until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.005)


async def _taken(writer: SqliteWriter, first: asyncio.Future[Any]) -> None:
    """Wait until the commit thread holds ``first`` (queued, then taken: the write lock
    is held elsewhere, so it stays there)."""
    await asyncio.sleep(0)  # ``first`` runs up to its wait for the commit thread
    await _wait_until(lambda: writer.queued == 0)
    assert not first.done()


async def _as_one_group(
    store: Store, path: Path, commits: list[Callable[[], Awaitable[Any]]]
) -> tuple[list[Any], int]:
    """Run ``commits`` so that all of them are written as one group: the file's write
    lock is held by another connection until every one of them waits in the queue (the
    first commit, taken by the commit thread before them, waits for the lock alone).
    Their outcomes, and the number of transactions committed meanwhile."""
    writer = store.writer
    assert isinstance(writer, SqliteWriter)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        first = asyncio.ensure_future(
            commit(store, [Put("doc", "first", {"v": 1}, 0)], [("s", _event("first"))])
        )
        await _taken(writer, first)
        tasks = [asyncio.ensure_future(run()) for run in commits]
        await _wait_until(lambda: writer.queued == len(commits))
        before = writer.transactions
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert await first == [1]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return results, writer.transactions - before


async def test_a_lost_compare_and_set_in_a_group_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    try:
        await commit(store, [Put("doc", "a", {"v": 1}, 0)], [])
        results, transactions = await _as_one_group(
            store,
            path,
            [
                lambda: commit(store, [Put("doc", "b", {"v": 1}, 0)], [("s", _event("b"))]),
                lambda: commit(store, [Put("doc", "a", {"v": 9}, 5)], [("s", _event("stale"))]),
                lambda: commit(store, [Put("doc", "c", {"v": 1}, 0)], [("s", _event("c"))]),
                # Loses to the "b" written earlier in the very same group.
                lambda: commit(store, [Put("doc", "b", {"v": 2}, 0)], [("s", _event("b2"))]),
                lambda: commit(store, [Put("doc", "a", {"v": 2}, 1)], [("s", _event("a2"))]),
            ],
        )
        assert transactions == 2  # "first" alone, then the other five as one group
        assert results[0] == [1] and results[2] == [1] and results[4] == [2]
        stale, late = results[1], results[3]
        assert isinstance(stale, Conflict) and (stale.expected, stale.actual) == (5, 1)
        assert isinstance(late, Conflict) and (late.expected, late.actual) == (0, 1)
        kinds = [entry.event.kind for entry in await store.journal("s")]
        assert kinds == ["first", "b", "c", "a2"]
        for key, data, version in (("a", {"v": 2}, 2), ("b", {"v": 1}, 1), ("c", {"v": 1}, 1)):
            document = await store.get("doc", key)
            assert document is not None and (document.data, document.version) == (data, version)
    finally:
        await store.close()


async def test_a_refused_row_in_a_group_fails_alone_as_a_database_error(tmp_path: Path) -> None:
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    try:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON plangate_documents "
                "WHEN NEW.key = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        results, transactions = await _as_one_group(
            store,
            path,
            [
                lambda: commit(store, [Put("doc", "b", {"v": 1}, 0)], [("s", _event("b"))]),
                lambda: commit(store, [Put("doc", "refused", {}, 0)], [("s", _event("no"))]),
                lambda: commit(store, [Put("doc", "c", {"v": 1}, 0)], [("s", _event("c"))]),
            ],
        )
        assert transactions == 2
        assert results[0] == [1] and results[2] == [1]
        refused = results[1]
        assert isinstance(refused, DatabaseError) and not isinstance(refused, Conflict)
        assert [entry.event.kind for entry in await store.journal("s")] == ["first", "b", "c"]
        assert await store.get("doc", "refused") is None
    finally:
        await store.close()


async def test_a_commit_that_ends_the_whole_transaction_fails_alone(tmp_path: Path) -> None:
    """RAISE(ROLLBACK) undoes the group's whole transaction, not just one savepoint: the
    group is written again one commit at a time, and only the guilty one fails."""
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    try:
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER undo_all BEFORE INSERT ON plangate_documents "
                "WHEN NEW.key = 'undo' BEGIN SELECT RAISE(ROLLBACK, 'undo everything'); END"
            )
        results, transactions = await _as_one_group(
            store,
            path,
            [
                lambda: commit(store, [Put("doc", "b", {"v": 1}, 0)], [("s", _event("b"))]),
                lambda: commit(store, [Put("doc", "undo", {}, 0)], [("s", _event("undo"))]),
                lambda: commit(store, [Put("doc", "c", {"v": 1}, 0)], [("s", _event("c"))]),
            ],
        )
        # "first"; the group, undone; then "b" and "c" alone ("undo" fails again alone).
        assert transactions == 3
        assert results[0] == [1] and results[2] == [1]
        assert isinstance(results[1], DatabaseError)
        assert [entry.event.kind for entry in await store.journal("s")] == ["first", "b", "c"]
        assert await store.get("doc", "undo") is None
    finally:
        await store.close()


async def test_a_commit_cancelled_before_it_is_written_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    writer = store.writer
    assert writer is not None
    try:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            first = asyncio.ensure_future(commit(store, [Put("doc", "first", {}, 0)], []))
            await _taken(writer, first)
            dropped = asyncio.ensure_future(
                commit(store, [Put("doc", "dropped", {}, 0)], [("s", _event("dropped"))])
            )
            await _wait_until(lambda: writer.queued == 1)
            dropped.cancel()
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert await first == [1]
        with pytest.raises(asyncio.CancelledError):
            await dropped
        # Written after the cancelled one: once it is answered, the queue is past it.
        assert await commit(store, [Put("doc", "after", {}, 0)], []) == [1]
        assert await store.get("doc", "dropped") is None
        assert await store.journal("s") == []
    finally:
        await store.close()


_WRITERS = """
import asyncio, sys
from plangate.journal.events import JournalEvent
from plangate.store.store import Store
from plangate.store.writes import Put, commit

async def main(url: str, where: str) -> None:
    store = await Store.open(url)
    store.writer.on_loop = where == "loop"
    keys = [f"k{n}" for n in range(8)]
    versions = dict.fromkeys(keys, 0)

    async def writer(key: str) -> None:
        while True:
            event = JournalEvent(kind="step", subject=key, actor="user", at=1.0)
            [versions[key]] = await commit(
                store, [Put("doc", key, {"n": versions[key] + 1}, versions[key])], [(key, event)]
            )
            writer = store.writer
            print(sum(versions.values()), writer.transactions, writer.loop_commits, flush=True)

    await asyncio.gather(*(writer(key) for key in keys))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("where", ["thread", "loop"])
def test_a_killed_process_leaves_every_commit_whole_or_absent(tmp_path: Path, where: str) -> None:
    """Eight writers commit as fast as they can -- in the commit thread, where commits
    are grouped, or on the event loop's connection -- until the process is killed:
    afterwards each document's version equals its number of journal rows, and its data
    the version: no commit was half-written or lost its rows."""
    path = tmp_path / "plans.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITERS, f"sqlite:///{path}", where],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None
        commits = transactions = on_loop = 0
        for _ in range(8 * 30):  # let it run a while: the kill lands mid-write
            commits, transactions, on_loop = map(int, child.stdout.readline().split())
        if where == "thread":
            assert transactions < commits and on_loop == 0  # written in groups
        else:
            assert on_loop > 0
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with sqlite3.connect(path) as conn:
        documents = conn.execute(
            "SELECT key, version, json_extract(data, '$.n') FROM plangate_documents "
            "WHERE kind = 'doc'"
        ).fetchall()
        rows = dict(conn.execute("SELECT scope, count(*) FROM plangate_journal GROUP BY scope"))
    assert len(documents) == 8
    for key, version, n in documents:
        assert version == n == rows[key], key


async def test_a_commit_to_a_closed_store_is_refused(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite:///{tmp_path / 'plans.db'}")
    writer = store.writer
    assert writer is not None
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await writer.commit([Put("doc", "late", {}, 0)], [])


async def test_a_driver_failure_reaches_the_caller_as_a_coded_database_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    try:
        by_hand = sqlite3.connect(path, isolation_level=None)
        by_hand.execute("DROP TABLE plangate_journal")  # someone broke the file by hand
        by_hand.close()
        with pytest.raises(DatabaseError) as caught:
            await commit(store, [Put("doc", "a", {"v": 1}, 0)], [("s", _event("a"))])
        assert caught.value.code.value == "DATABASE_TABLE_MISSING"
    finally:
        await store.close()


async def test_a_commit_on_the_loop_never_waits_for_a_lock_held_elsewhere(tmp_path: Path) -> None:
    """With another connection holding the file's write lock, a commit and a transaction
    that would run on the event loop's connection go to the commit thread instead: the
    loop goes on meanwhile, nothing is half written, and both land once the lock is free."""
    path = tmp_path / "plangate.db"
    store = await Store.open(f"sqlite:///{path}")
    writer = store.writer
    assert isinstance(writer, SqliteWriter) and writer.on_loop
    try:
        await commit(store, [Put("doc", "warm", {"v": 0}, 0)], [])
        on_loop = writer.loop_commits
        assert on_loop >= 1

        async def two_puts(tx: Any) -> int:
            await tx.put("doc", "a", {"v": 1}, expected_version=0)
            return await tx.put("doc", "b", {"v": 1}, expected_version=0)

        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            put = asyncio.ensure_future(
                commit(store, [Put("doc", "c", {"v": 1}, 0)], [("s", _event("c"))])
            )
            run = asyncio.ensure_future(transact(store, two_puts))
            ticks = 0
            for _ in range(20):  # the loop keeps running while the lock is held
                await asyncio.sleep(0.005)
                ticks += 1
            assert ticks == 20 and not put.done() and not run.done()
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert await put == [1]
        assert await run == 1
        assert writer.loop_commits == on_loop  # both were written in the thread
        for key in ("a", "b", "c"):
            document = await store.get("doc", key)
            assert document is not None and document.data == {"v": 1}
        # The loop's connection was left outside any transaction: it commits again.
        await commit(store, [Put("doc", "d", {"v": 1}, 0)], [])
        assert writer.loop_commits == on_loop + 1
    finally:
        await store.close()
