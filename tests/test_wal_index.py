"""The plan-state cache on SQLite is validated by the file's wal-index header
(``store.wal_index``): a document read once is served without a statement while nobody
commits, or while only the store's own connection commits without writing it -- and a
commit by any other connection, of this process or another, is seen by the very next
get, even when it lands between two of the store's own commits."""

from __future__ import annotations

import os
import sqlite3
import struct
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from plangate.store.fresh import FreshDocuments, SqliteReader
from plangate.store.store import Document, Store
from plangate.store.wal_index import OwnCommits, WalIndex, log_frames
from plangate.store.writes import _CATCH_UP_FRAMES, _CHECKPOINT_FRAMES, Put, commit, transact


def _value(_key: str, document: Document | None) -> Any:
    return None if document is None else document.data


@contextmanager
def _statements(reader: SqliteReader) -> Iterator[list[str]]:
    """The statements the reader's connection runs meanwhile (SQLite's own trace hook)."""
    seen: list[str] = []
    reader.connection.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        reader.connection.set_trace_callback(None)


def _write_elsewhere(path: Path, key: str, data: str) -> None:
    """Another connection -- to SQLite, another process -- rewrites a document."""
    with sqlite3.connect(path, isolation_level=None) as other:
        other.execute(
            "UPDATE plangate_documents SET version = version + 1, data = ? "
            "WHERE kind = 'doc' AND key = ?",
            (data, key),
        )
    other.close()


@asynccontextmanager
async def _plan_read_once(
    tmp_path: Path,
) -> AsyncIterator[tuple[Store, SqliteReader, Path, FreshDocuments[Any]]]:
    """The store, its reader, the file, and a cache that has read document "plan" once."""
    store, reader, path = await _opened(tmp_path)
    try:
        cache = FreshDocuments("doc", _value)
        assert await cache.get(store, "plan") == {"n": 1}
        yield store, reader, path, cache
    finally:
        await store.close()


async def _opened(tmp_path: Path) -> tuple[Store, SqliteReader, Path]:
    path = tmp_path / "plans.db"
    store = await Store.open(f"sqlite:///{path}")
    assert store.reader is not None and store.writer is not None
    store.writer.slow_commit = float("inf")  # a busy disk must not move commits to the thread
    await commit(store, [Put("doc", "plan", {"n": 1}, 0)], [])
    return store, store.reader, path


async def test_a_document_read_once_is_served_without_a_statement_until_a_commit(
    tmp_path: Path,
) -> None:
    async with _plan_read_once(tmp_path) as (store, reader, path, cache):
        with _statements(reader) as seen:
            assert await cache.get(store, "plan") == {"n": 1}
        assert seen == []
        _write_elsewhere(path, "plan", '{"n": 2}')
        with _statements(reader) as seen:
            assert await cache.get(store, "plan") == {"n": 2}
        assert len(seen) == 1  # the row, read again


async def test_the_stores_own_commits_of_other_documents_keep_it_and_of_it_do_not(
    tmp_path: Path,
) -> None:
    async with _plan_read_once(tmp_path) as (store, reader, _, cache):
        for n in range(3):  # a session's events, committed on the loop's connection
            await commit(store, [Put("event", f"e{n}", {"n": n}, 0)], [])
        assert store.writer is not None and store.writer.loop_commits >= 3
        with _statements(reader) as seen:
            assert await cache.get(store, "plan") == {"n": 1}
        assert seen == []
        await commit(store, [Put("doc", "plan", {"n": 5}, 1)], [])
        assert await cache.get(store, "plan") == {"n": 5}


async def test_a_commit_elsewhere_between_two_own_commits_is_seen(tmp_path: Path) -> None:
    """The header after the last own commit is not enough: a foreign commit before it
    breaks the chain."""
    async with _plan_read_once(tmp_path) as (store, _, path, cache):
        await commit(store, [Put("event", "a", {}, 0)], [])
        _write_elsewhere(path, "plan", '{"n": 9}')
        await commit(store, [Put("event", "b", {}, 0)], [])
        assert await cache.get(store, "plan") == {"n": 9}
        # And after the last own commit.
        _write_elsewhere(path, "plan", '{"n": 10}')
        assert await cache.get(store, "plan") == {"n": 10}


async def test_a_transaction_of_unknown_writes_makes_every_document_read_again(
    tmp_path: Path,
) -> None:
    async with _plan_read_once(tmp_path) as (store, reader, _, cache):

        async def rewrite(tx: Any) -> None:
            await tx.put("doc", "plan", {"n": 7}, expected_version=1)

        await transact(store, rewrite)
        with _statements(reader) as seen:
            assert await cache.get(store, "plan") == {"n": 7}
        assert len(seen) == 1


_COMMIT_ELSEWHERE = """
import sqlite3, sys
with sqlite3.connect(sys.argv[1], isolation_level=None) as conn:
    conn.execute("UPDATE plangate_documents SET version = version + 1, data = '{\\"n\\": 3}' "
                 "WHERE kind = 'doc' AND key = 'plan'")
"""


async def test_a_commit_by_another_process_is_seen_by_the_very_next_get(tmp_path: Path) -> None:
    async with _plan_read_once(tmp_path) as (store, _, path, cache):
        await commit(store, [Put("event", "a", {}, 0)], [])
        subprocess.run([sys.executable, "-c", _COMMIT_ELSEWHERE, str(path)], check=True)
        assert await cache.get(store, "plan") == {"n": 3}


def test_the_header_moves_with_every_commit_and_only_with_commits(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (x)")
    wal = WalIndex(str(path))
    try:
        first = wal.header()
        assert first is not None
        conn.execute("SELECT * FROM t").fetchall()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("ROLLBACK")
        assert wal.header() == first  # reads and rolled-back writes leave it
        conn.execute("INSERT INTO t VALUES (1)")
        second = wal.header()
        assert second is not None and second != first
        counter = struct.Struct("=I")
        assert counter.unpack_from(second, 8)[0] == counter.unpack_from(first, 8)[0] + 1
    finally:
        wal.close()
        conn.close()


def test_no_header_is_trusted_without_a_wal_index(tmp_path: Path) -> None:
    path = tmp_path / "rollback.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert not os.path.exists(f"{path}-shm")
    assert WalIndex(str(path)).header() is None


def _header(counter: int, tag: int = 0) -> bytes:
    """A wal-index header as ``OwnCommits`` reads it: the counter at 8, the rest opaque."""
    return struct.pack("=II I B B H", 3007000, 0, counter, 1, 0, 4096) + bytes([tag]) * 32


@pytest.mark.parametrize(
    ("before", "after", "trusted"),
    [
        (_header(1), _header(2), True),  # the commit alone moved the counter
        (_header(1), _header(3), False),  # another commit landed before the header was read
        (None, _header(2), False),  # no header inside the transaction
        (_header(1, tag=9), _header(2), False),  # someone committed since the last own one
    ],
    ids=["own", "another-commit-after", "no-header", "another-commit-before"],
)
def test_own_commits_are_proven_own(before: bytes | None, after: bytes, trusted: bool) -> None:
    own = OwnCommits(token=1)
    own.committed(_header(0), _header(1), [("doc", "other")])  # it left header 1
    seen = own.seen(_header(1))
    assert seen.chained
    own.committed(before, after, [("doc", "other")])
    assert own.unchanged("doc", "plan", seen, after) is trusted
    assert not own.unchanged("doc", "other", seen, after)  # it wrote that one


async def test_a_disk_found_slow_sends_the_next_commits_to_the_thread(tmp_path: Path) -> None:
    store, _, _ = await _opened(tmp_path)
    writer = store.writer
    assert writer is not None
    try:
        writer.slow_commit = 0.0  # every commit is "slow"
        on_loop, in_all = writer.loop_commits, writer.transactions
        for n in range(5):
            await commit(store, [Put("event", f"e{n}", {}, 0)], [])
        # Three slow ones (one alone is not a slow disk), then the thread.
        assert writer.loop_commits == on_loop + 3
        assert writer.transactions == in_all + 5
    finally:
        await store.close()


async def test_the_log_is_written_back_and_started_over_under_back_to_back_commits(
    tmp_path: Path,
) -> None:
    """Commits on the loop's connection never checkpoint there; the commit thread does,
    from 1,000 frames in the log, while commits go on on the loop. Back-to-back commits
    would then keep the log from ever starting over (it reached 15 MB after 1,200
    commits of a 0.5 KB document when nothing bounded it): from 2,000 frames they queue
    behind the checkpoint in the thread instead."""
    store, _, path = await _opened(tmp_path)
    try:
        assert store.writer is not None and store.reader is not None
        # However fast or slow the disk is found, commit on the loop when the lock is free.
        store.writer.slow_commit = float("inf")
        document = {"text": "x" * 500}
        version, largest = 0, 0
        written, last = 0, 0  # frames written to the log, over its restarts
        for _ in range(3000):
            [version] = await commit(store, [Put("doc", "busy", document, version)], [])
            largest = max(largest, os.path.getsize(f"{path}-wal"))
            header = store.reader.wal.header()
            assert header is not None
            now = log_frames(header)
            written += now - last if now >= last else now
            last = now
        page = 4096 + 24  # a frame: the page and its header
        assert largest < (_CATCH_UP_FRAMES + 300) * page
        assert log_frames(header) < _CATCH_UP_FRAMES  # started over, not grown
        assert store.writer.loop_commits > 2000  # most commits stayed on the loop
        # One checkpoint per 1,000 frames or so, not one after each commit while the log
        # waits to start over: each checkpoint flushes the disk twice.
        assert store.writer.checkpoints <= written // _CHECKPOINT_FRAMES + 2
    finally:
        await store.close()
