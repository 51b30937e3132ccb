"""One commit of versioned documents and their journal rows, at the speed of the disk.

A plan transition writes one document by compare-and-set and journals what happened,
all in one transaction. Through the general ``Store.transaction`` each statement is a
separate hop to the driver's thread; here the whole transaction is one function:

- SQLite: a plain ``sqlite3`` connection runs ``BEGIN IMMEDIATE``, the compare-and-set
  updates, one ``executemany`` for the journal rows and ``COMMIT``. Durability is
  SQLite's default, ``synchronous=FULL``: in WAL mode ``NORMAL`` can lose the last
  commits on power loss, and an approval the user saw recorded must survive that.

  Where it runs depends on what waiting would cost:

  * On the event loop's own thread, on the connection the store reads with, when the
    file's write lock is free (``busy_timeout=0``: a lock held elsewhere is never
    waited for there) and the disk flushes fast. On a disk that flushes in ~100 us
    this is raw ``sqlite3``'s rate -- a hop to a thread and back costs more than the
    flush (``benchmarks/bench_store.py`` prints both) -- and the reads that follow
    stay cheap: SQLite keeps a connection's page cache across its own commits but
    drops it after any other connection's, and every gate check and step boundary
    reads right after a session commit. When the ``COMMIT`` -- the flush -- of
    ``_SLOW_OF_RECENT`` of the last ``_RECENT`` commits there took longer than
    ``_LOOP_COMMIT_LIMIT`` (2 ms), the next ones go to the thread for
    ``_LOOP_PAUSE``: a slow disk holds the loop a few times, briefly, and not again,
    while one slow flush (the file's first, say) changes nothing. WAL checkpoints,
    which write the whole log back, always run on the thread, from 1,000 frames in the
    log (SQLite's own default), and the next 1,000 frames later; commits go on on the
    loop meanwhile, until the log holds twice that: then they queue behind the
    checkpoint, so that the log starts over (back-to-back commits would keep it
    growing). A task committing back to back lets the others run at least every
    ``_YIELD_AFTER`` (1 ms), not after every commit: a pass through the loop costs an
    ``epoll_wait``, as much as the commit.
  * Otherwise on the store's commit thread, where commits of several sessions that
    arrive together share one transaction (group commit: one flush of the disk for
    all), each in a savepoint of its own.
- A transaction of other statements (``transact``) runs on the same connections: its
  documents, journal rows and the plain statements of ``plangate.store.sql`` on
  ``sqlite3`` directly, any SQLAlchemy statement through a SQLAlchemy connection over
  it, opened at its first use and closed after ``COMMIT``.
- PostgreSQL: one transaction on asyncpg directly, statements prepared once per
  connection, the journal rows in a single ``executemany`` (``plangate.store.postgres``).

The guarantee is the store's: a lost compare-and-set raises ``Conflict`` and nothing of
the commit is applied.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import Engine, create_engine, event, insert
from sqlalchemy.pool import StaticPool

from plangate.journal.events import JournalEvent
from plangate.store.errors import database_error
from plangate.store.fence import Fence, check_sqlite, current_fence
from plangate.store.fresh import DOCUMENT_ROW, is_busy
from plangate.store.schema import journal
from plangate.store.storable import clean_parameters, clean_text, storable_json
from plangate.store.store import Conflict, Document, SyncConnection, Transaction
from plangate.store.wal_index import log_frames

if TYPE_CHECKING:
    from plangate.store.file_guard import FileIdentity
    from plangate.store.fresh import SqliteReader
    from plangate.store.store import Store

__all__ = [
    "Put",
    "SqliteTransaction",
    "SqliteWriter",
    "commit",
    "journal_row",
    "put_in",
    "transact",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Put:
    """Write ``data`` to a document if it is at ``expected_version`` (0: absent).

    ``expected_version=None`` writes whatever version is there (an archive copy)."""

    kind: str
    key: str
    data: Any
    expected_version: int | None

    @cached_property
    def text(self) -> str:
        """``data`` as stored: JSON text, cleaned (serialised once, however often asked)."""
        return storable_json(self.data)


_JOURNAL_COLUMNS = (
    "scope",
    "kind",
    "subject",
    "from_state",
    "to_state",
    "actor",
    "at",
    "revision",
    "sha256",
    "detail",
)
_INSERT_JOURNAL = (
    f"INSERT INTO plangate_journal ({', '.join(_JOURNAL_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _JOURNAL_COLUMNS)})"
)


_MAX_GROUP = 64
"""Commits written in one transaction at most: a bound on how long the first one waits."""

_LOOP_COMMIT_LIMIT = 0.002
"""Seconds a ``COMMIT`` (the disk's flush) on the event loop may take before it counts
as slow. The loop waits out the flush and every other run with it; the thread overlaps
the flush with other work but costs ~0.2 ms of CPU per commit (the hop both ways, and
the loop connection's page cache, dropped after another connection's commit). A served
run commits ~10 times: in the thread it costs ~15% more CPU than on the loop, measured
on a disk whose flushes took 0.2-0.7 ms, while its latency under load did not differ
beyond noise (``benchmarks/bench_load.py``). So only a disk slower than that -- a
network volume, a busy spinning disk -- sends commits to the thread."""
_LOOP_PAUSE = 1.0
"""Seconds commits stay on the thread once the disk is found slow."""
_RECENT, _SLOW_OF_RECENT = 8, 3
"""The disk is slow when this many of the last commits on the loop took too long."""
_YIELD_AFTER = 0.001
"""Seconds after which a commit on the loop lets other tasks run before it returns (one
written in the thread always does: its caller waits for the answer)."""
_CHECKPOINT_FRAMES = 1000
"""Frames in the log from which a checkpoint on the commit thread writes them back
(SQLite's own default; the loop's connection never checkpoints). Commits go on on the
loop meanwhile: a ``PASSIVE`` checkpoint never holds a writer up."""
_CATCH_UP_FRAMES = 2 * _CHECKPOINT_FRAMES
"""Frames from which, while a checkpoint runs, commits queue behind it in the thread
instead: back-to-back commits would otherwise keep the log from ever starting over."""
_CHECKPOINT_EVERY = 100
"""Commits on the loop between two checkpoints when the log's size cannot be read."""


@dataclass(frozen=True, slots=True)
class _Commit:
    documents: list[tuple[str, str, str, int | None]]
    """(kind, key, JSON text, expected version) of each put, cleaned."""
    rows: list[tuple[Any, ...]]
    """Journal rows in ``_JOURNAL_COLUMNS`` order, cleaned."""
    fence: Fence | None = None
    """The lease of the run committing, checked inside the transaction."""


@dataclass(frozen=True, slots=True)
class _Run:
    work: Callable[[Transaction], Awaitable[Any]]
    fence: Fence | None = None


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    """Write the WAL back into the database, as far as readers allow (nobody waits)."""


@dataclass(frozen=True, slots=True)
class _Job:
    task: _Commit | _Run | _Checkpoint
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any] | None
    """None: nobody waits for the outcome (a checkpoint)."""


class SqliteWriter:
    """Whole transactions committed on the event loop's connection when that costs less
    than waiting (see the module's docstring), else in a thread of its own.

    In the thread, commits that arrive while one is being written wait in a queue and are
    then written together, as one group: one ``BEGIN IMMEDIATE`` and one ``COMMIT`` --
    one flush of the disk -- for all of them. Inside the group each commit is its own
    savepoint, so a lost compare-and-set (or a refused row) rolls back that commit alone
    and the others land. A caller is answered only after the ``COMMIT`` that holds its
    commit returned.
    """

    def __init__(
        self,
        path: str,
        identity: FileIdentity | None = None,
        loop_reader: SqliteReader | None = None,
    ) -> None:
        self._identity = identity
        """The file opened at start; a commit to a deleted or replaced file is refused."""
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._engine: Engine | None = None
        self._here = loop_reader
        """The store's reader: its connection is the event loop thread's, if any."""
        self._here_engine: Engine | None = None
        if loop_reader is not None:
            loop_reader.connection.execute("PRAGMA synchronous=FULL")
            loop_reader.connection.execute("PRAGMA wal_autocheckpoint=0")
        self.on_loop = loop_reader is not None
        """Whether commits may run on the event loop's thread at all."""
        self.slow_commit = _LOOP_COMMIT_LIMIT
        """Seconds after which a flush on the loop counts as slow (``_SLOW_OF_RECENT``)."""
        self._on_loop_from = 0.0
        """``time.monotonic()`` from which the loop may commit again, the disk found slow."""
        self._slow: deque[bool] = deque(maxlen=_RECENT)
        """Whether each of the last commits on the loop took too long."""
        self._yielded_at = 0.0
        """``time.monotonic()`` when a commit on the loop last let other tasks run."""
        self._checkpointing = False
        """A checkpoint is queued or running."""
        self._log_frames = 0
        """Frames in the log after the last commit on the loop."""
        self._checkpoint_from = _CHECKPOINT_FRAMES
        """Frames in the log from which the next checkpoint is queued. A checkpoint that
        ran while commits went on leaves their frames in the log, which starts over only
        once one copied all of it: queuing the next one as soon as the last ended kept
        the thread flushing the disk as often as the loop committed, and each flush of the
        loop's commits waited on the thread's (half the commit rate)."""
        self.checkpoints = 0
        """Checkpoints queued so far."""
        self.transactions = 0
        """Transactions committed so far (a group of commits counts once)."""
        self.loop_commits = 0
        """Of those, the ones committed on the event loop's thread."""
        # One thread of its own, fed by a queue and answering through the caller's event
        # loop: an empty round trip costs ~17 us here, against ~70 us through an
        # executor's chain of futures (asyncio.to_thread). Transactions on this
        # connection run one at a time, and commits waiting for the file lock never hold
        # up the shared worker threads (queries, file searches) that asyncio.to_thread uses.
        self._queue: SimpleQueue[_Job | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="plangate-commit", daemon=True)
        self._thread.start()
        self._closed = False

    async def commit(
        self, puts: Sequence[Put], events: Sequence[tuple[str, JournalEvent]]
    ) -> list[int]:
        rows = [journal_row(scope, event) for scope, event in events]
        documents = [
            (clean_text(p.kind), clean_text(p.key), p.text, p.expected_version) for p in puts
        ]
        return await self._submit(_Commit(documents, rows, current_fence()))

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """``work`` as one transaction in one hop to the commit thread.

        ``work`` runs on a synchronous SQLAlchemy connection behind the ``Transaction``
        interface, so its coroutine never waits on anything and is driven to its end in
        that thread; one that does wait raises ``RuntimeError`` and nothing is applied.
        """
        return await self._submit(_Run(work, current_fence()))

    async def _submit(self, task: _Commit | _Run) -> Any:
        if self._closed:
            raise RuntimeError("the store is closed")
        try:
            catching_up = self._checkpointing and self._log_frames >= _CATCH_UP_FRAMES
            if self.on_loop and not catching_up and time.monotonic() >= self._on_loop_from:
                done, value = self._commit_here(task)
                if done:
                    now = time.monotonic()
                    if now - self._yielded_at >= _YIELD_AFTER:
                        # Commits back to back in one task let the others run now and
                        # then. Not after each one: a pass through the loop costs an
                        # ``epoll_wait``, as much as the commit's own Python here.
                        self._yielded_at = now
                        await asyncio.sleep(0)
                    return value
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Any] = loop.create_future()
            self._queue.put(_Job(task, loop, future))
            return await future
        except sqlite3.Error as exc:  # one error model: callers get a code, not a driver error
            raise database_error(exc, "the plan store") from None

    def _commit_here(self, task: _Commit | _Run) -> tuple[bool, Any]:
        """``task`` committed on the event loop's connection: ``(True, its result)``, or
        ``(False, None)`` with nothing written if the file's lock is held elsewhere."""
        reader = self._here
        assert reader is not None
        conn = reader.connection
        self.check_file()
        # Made before BEGIN: SQLAlchemy's first connection to it rolls back.
        engine = self._engine_here(conn) if isinstance(task, _Run) else None
        if not _begin(conn):  # another connection writes: wait for it in the thread
            return False, None
        # ``after_commit`` closes SQLAlchemy's connection, if the work opened one, after
        # COMMIT (or ROLLBACK): closing it first would roll back.
        with ExitStack() as after_commit:
            try:
                # Nobody else can commit now: this is the header the last commit left.
                before = reader.wal.header()
                if isinstance(task, _Commit):
                    result = _apply(conn, task)
                    written = [(kind, key) for kind, key, _, _ in task.documents]
                else:
                    assert engine is not None
                    check_sqlite(conn, task.fence)
                    connection = SyncConnection(conn, engine, after_commit)
                    result = _drive(task.work(SqliteTransaction(connection)))
                    written = None  # not known: every document
                flushed = _commit(conn)
            except BaseException:
                _roll_back(conn)
                raise
        after = reader.wal.header()
        reader.own.committed(before, after, written)
        slow = self._slow
        # The disk's flush, not the work before it (CPU, the same on any thread).
        slow.append(flushed > self.slow_commit)
        if slow.count(True) >= _SLOW_OF_RECENT:
            slow.clear()
            self._on_loop_from = time.monotonic() + _LOOP_PAUSE
        self.transactions += 1
        self.loop_commits += 1
        if after is not None:
            previous, frames = self._log_frames, log_frames(after)
            self._log_frames = frames
            if frames < previous or frames < _CHECKPOINT_FRAMES:  # the log started over
                self._checkpoint_from = _CHECKPOINT_FRAMES
            due = frames >= self._checkpoint_from
        else:
            due = self.loop_commits % _CHECKPOINT_EVERY == 0
        if due and not self._checkpointing:
            self._checkpointing = True
            self._checkpoint_from = self._log_frames + _CHECKPOINT_FRAMES
            self.checkpoints += 1
            self._queue.put(_Job(_Checkpoint(), asyncio.get_running_loop(), None))
        return True, result

    def _engine_here(self, conn: sqlite3.Connection) -> Engine:
        if self._here_engine is None:
            self._here_engine = _sync_engine(conn)
        return self._here_engine

    def check_file(self) -> None:
        """Raise ``DatabaseError`` (``DATABASE_GONE``) if the file was deleted or replaced
        since it was opened."""
        if self._identity is not None:
            self._identity.check()

    @property
    def queued(self) -> int:
        """Transactions waiting for the commit thread (not the one it is writing)."""
        return self._queue.qsize()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put(None)  # after every job queued before it
            self._thread.join()
            # A job that slipped in after the stop (a close from another thread) is
            # refused rather than left waiting forever.
            with suppress(Empty):
                while True:
                    late = self._queue.get_nowait()
                    if late is not None:
                        _settle(late, False, RuntimeError("the store is closed"))
        for engine in (self._engine, self._here_engine):
            if engine is not None:
                engine.dispose(close=False)
        self._conn.close()  # the loop's connection is the reader's: it closes it

    # -- the commit thread ---------------------------------------------------------------

    def _serve(self) -> None:
        queue = self._queue
        held: list[_Job | None] = []  # taken while gathering a group, but not part of it
        while True:
            job = held.pop() if held else queue.get()
            if job is None:
                return
            if isinstance(job.task, _Checkpoint):
                with suppress(sqlite3.Error):  # a later one will do what this one could not
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                self._checkpointing = False
                continue
            if isinstance(job.task, _Run):
                if job.future is not None and not job.future.cancelled():
                    _settle(job, *_outcome(self._run, job.task))
                continue
            group = [job]
            while len(group) < _MAX_GROUP:
                try:
                    following = queue.get_nowait()
                except Empty:
                    break
                if following is None or not isinstance(following.task, _Commit):
                    held.append(following)
                    break
                group.append(following)
            self._commit_group(group)

    def _commit_group(self, group: list[_Job]) -> None:
        # A caller that stopped waiting before its commit began gets nothing written, as
        # with an executor's queue.
        group = [job for job in group if job.future is not None and not job.future.cancelled()]
        if len(group) == 1:  # the common case: no savepoint needed
            _settle(group[0], *_outcome(self._commit_alone, group[0].task))
            return
        if not group:
            return
        tasks = [cast(_Commit, job.task) for job in group]
        try:
            outcomes = self._transaction(lambda: [self._apply_in_savepoint(t) for t in tasks])
        except Exception:
            # The group failed as a whole and nothing of it was written: write each
            # commit alone, so that each fails only for a reason of its own.
            for job in group:
                _settle(job, *_outcome(self._commit_alone, job.task))
            return
        for job, (ok, value) in zip(group, outcomes, strict=True):
            _settle(job, ok, value)

    def _commit_alone(self, task: _Commit) -> list[int]:
        return self._transaction(lambda: self._apply(task))

    def _transaction(self, work: Callable[[], T]) -> T:
        """``work()`` between ``BEGIN IMMEDIATE`` and ``COMMIT``; rolled back if it raises."""
        self.check_file()  # before BEGIN: nothing is written to a vanished file
        result = _committed(self._conn, work)
        self.transactions += 1
        return result

    def _apply_in_savepoint(self, task: _Commit) -> tuple[bool, Any]:
        """``task`` in a savepoint of the group's transaction: its failure undoes it alone.
        An error that ended the whole transaction (the disk is full, say) is raised."""
        conn = self._conn
        conn.execute("SAVEPOINT plangate_commit")
        try:
            versions = self._apply(task)
        except Exception as exc:
            if not conn.in_transaction:
                raise
            conn.execute("ROLLBACK TO plangate_commit")
            conn.execute("RELEASE plangate_commit")
            return False, exc
        conn.execute("RELEASE plangate_commit")
        return True, versions

    def _apply(self, task: _Commit) -> list[int]:
        return _apply(self._conn, task)

    def _run(self, task: _Run) -> Any:
        self.check_file()
        if self._engine is None:
            self._engine = _sync_engine(self._conn)
        result = _run_committed(self._engine, self._conn, task.work, task.fence)
        self.transactions += 1
        return result


@contextmanager
def _begun(conn: sqlite3.Connection) -> Generator[None]:
    """A ``BEGIN IMMEDIATE`` transaction on ``conn``, committed when the block ends and
    rolled back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        _roll_back(conn)
        raise


def _begin(conn: sqlite3.Connection) -> bool:
    """``BEGIN IMMEDIATE`` on ``conn``; False, with nothing begun, when another
    connection holds the file's write lock (the loop's connection never waits for it)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return False
        raise
    return True


def _commit(conn: sqlite3.Connection) -> float:
    """``COMMIT``; the seconds it took: the disk's flush."""
    start = time.perf_counter()
    conn.execute("COMMIT")
    return time.perf_counter() - start


def _roll_back(conn: sqlite3.Connection) -> None:
    # Some errors (a full disk, say) end the transaction in SQLite already.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _committed(conn: sqlite3.Connection, work: Callable[[], T]) -> T:
    """``work()`` between ``BEGIN IMMEDIATE`` and ``COMMIT``; rolled back if it raises."""
    with _begun(conn):
        return work()


def _run_committed(
    engine: Engine,
    conn: sqlite3.Connection,
    work: Callable[[Transaction], Awaitable[T]],
    fence: Fence | None = None,
) -> T:
    """``work`` as one transaction on ``conn`` (``engine``: SQLAlchemy on ``conn``, for
    statements that are not plain SQL). SQLAlchemy's connection, if the work opened one,
    is closed only after ``COMMIT``: closing it rolls back."""
    with ExitStack() as after_commit, _begun(conn):
        check_sqlite(conn, fence)
        return _drive(work(SqliteTransaction(SyncConnection(conn, engine, after_commit))))


def _apply(conn: sqlite3.Connection, task: _Commit) -> list[int]:
    check_sqlite(conn, task.fence)  # inside the transaction: no takeover in between
    versions = [_put(conn, *document) for document in task.documents]
    rows = task.rows
    if len(rows) == 1:  # the common case: ``execute`` costs less than ``executemany``
        conn.execute(_INSERT_JOURNAL, rows[0])
    elif rows:
        conn.executemany(_INSERT_JOURNAL, rows)
    return versions


def _outcome(function: Callable[[Any], Any], argument: Any) -> tuple[bool, Any]:
    try:
        return True, function(argument)
    except BaseException as exc:
        return False, exc


def _settle(job: _Job, ok: bool, value: Any) -> None:
    """Answer ``job``'s caller in its own event loop."""
    if job.future is None:
        return
    with suppress(RuntimeError):  # that loop is closed: nobody waits for the answer
        job.loop.call_soon_threadsafe(_resolve, job.future, ok, value)


def _resolve(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _sync_engine(conn: sqlite3.Connection) -> Engine:
    """SQLAlchemy on the writer's own connection, cleaning text as the async engine does."""
    engine = create_engine(
        "sqlite://", creator=lambda: conn, poolclass=StaticPool, json_serializer=storable_json
    )

    def clean(*args: Any) -> tuple[str, Any]:
        statement, parameters = args[2], args[3]
        return statement, clean_parameters(parameters)

    event.listen(engine, "before_cursor_execute", clean, retval=True)
    # Connect once now, outside any transaction: SQLAlchemy's first connection rolls back
    # (after reading the server version), and a transaction's statements open a
    # connection only at their first SQLAlchemy statement, after BEGIN.
    with engine.connect():
        pass
    return engine


class SqliteTransaction(Transaction):
    """A transaction on plangate's own ``sqlite3`` connection: documents and journal rows
    are written with plain statements (as commits are), everything else through
    ``connection``."""

    def __init__(self, connection: SyncConnection) -> None:
        super().__init__(connection)  # pyright: ignore[reportArgumentType]
        self._raw = connection.raw

    async def get(self, kind: str, key: str) -> Document | None:
        row = self._raw.execute(DOCUMENT_ROW, (clean_text(kind), clean_text(key))).fetchone()
        return Document.from_row(*row) if row is not None else None

    async def put(self, kind: str, key: str, data: Any, *, expected_version: int) -> int:
        return self.put_text(kind, key, storable_json(data), expected_version=expected_version)

    def put_text(self, kind: str, key: str, text: str, *, expected_version: int) -> int:
        """``put`` of a document already serialised (``Put.text``): a caller that keeps
        the text for its cache does not serialise it twice."""
        return _put(self._raw, clean_text(kind), clean_text(key), text, expected_version)

    async def append(self, scope: str, entry: JournalEvent) -> int:
        cursor = self._raw.execute(_INSERT_JOURNAL, journal_row(scope, entry))
        if cursor.lastrowid is None:
            raise RuntimeError("the journal insert returned no row id")
        return cursor.lastrowid

    async def append_all(self, scope: str, entries: Iterable[JournalEvent]) -> None:
        rows = [journal_row(scope, entry) for entry in entries]
        if rows:
            self._raw.executemany(_INSERT_JOURNAL, rows)


def _drive(awaitable: Awaitable[T]) -> T:
    """Run an awaitable that never suspends to its end, in this thread."""
    steps = awaitable.__await__()
    try:
        next(steps)
    except StopIteration as stop:
        return cast(T, stop.value)
    steps.close()
    raise RuntimeError("a commit's work waited on something other than its own statements")


def _put(conn: sqlite3.Connection, kind: str, key: str, data: str, wanted: int | None) -> int:
    now = time.time()
    # None: whatever version is there (0 when absent).
    expected: int = (_version(conn, kind, key) or 0) if wanted is None else wanted
    if expected == 0:
        # ON CONFLICT DO NOTHING: no row inserted means someone was first (a conflict);
        # a row refused for another reason (a trigger, a constraint added by hand) is a
        # database error, never a conflict.
        try:
            cursor = conn.execute(
                "INSERT INTO plangate_documents (kind, key, version, data, updated_at) "
                "VALUES (?, ?, 1, ?, ?) ON CONFLICT (kind, key) DO NOTHING",
                (kind, key, data, now),
            )
        except sqlite3.IntegrityError as exc:
            raise database_error(exc, "the plan store") from None
        if cursor.rowcount != 1:
            raise Conflict(kind, key, 0, _version(conn, kind, key))
        return 1
    cursor = conn.execute(
        "UPDATE plangate_documents SET version = ?, data = ?, updated_at = ? "
        "WHERE kind = ? AND key = ? AND version = ?",
        (expected + 1, data, now, kind, key, expected),
    )
    if cursor.rowcount != 1:
        raise Conflict(kind, key, expected, _version(conn, kind, key))
    return expected + 1


def _version(conn: sqlite3.Connection, kind: str, key: str) -> int | None:
    row: tuple[int] | None = conn.execute(
        "SELECT version FROM plangate_documents WHERE kind = ? AND key = ?", (kind, key)
    ).fetchone()
    return row[0] if row is not None else None


def journal_row(scope: str, event: JournalEvent) -> tuple[Any, ...]:
    """The journal columns of ``event``, in ``_JOURNAL_COLUMNS`` order, text cleaned as
    every engine cleans it (``plangate.store.storable``)."""
    return (
        clean_text(scope),
        clean_text(event.kind),
        clean_text(event.subject),
        _clean_optional(event.from_state),
        _clean_optional(event.to_state),
        clean_text(event.actor),
        event.at,
        event.revision,
        _clean_optional(event.sha256),
        storable_json(event.detail) if event.detail else "{}",
    )


def _clean_optional(text: str | None) -> str | None:
    return None if text is None else clean_text(text)


async def commit(
    store: Store, puts: Sequence[Put], events: Sequence[tuple[str, JournalEvent]]
) -> list[int]:
    """Apply ``puts`` and journal ``events`` (scope, event) in one transaction; the new
    version of each put, in order. Raises ``Conflict`` with nothing applied."""
    if store.writer is not None:
        return await store.writer.commit(puts, events)
    if store.postgres is not None:
        return await store.postgres.commit(puts, events)
    async with store.transaction() as tx:
        versions = [await put_in(tx, put) for put in puts]
        if events:
            await tx.connection.execute(
                insert(journal), [{"scope": scope, **e.model_dump()} for scope, e in events]
            )
    return versions


async def put_in(tx: Transaction, put: Put) -> int:
    """``put`` in an open transaction; the document's new version."""
    expected = put.expected_version
    if expected is None:
        existing = await tx.get(put.kind, put.key)
        expected = existing.version if existing is not None else 0
    if isinstance(tx, SqliteTransaction):
        return tx.put_text(put.kind, put.key, put.text, expected_version=expected)
    return await tx.put(put.kind, put.key, put.data, expected_version=expected)


async def transact(store: Store, work: Callable[[Transaction], Awaitable[T]]) -> T:
    """``work(tx)`` as one transaction: on a SQLite file in one hop to the commit thread
    (``work`` may await only the transaction's own statements), elsewhere on the async
    engine. A ``Conflict`` it raises rolls all of it back."""
    if store.writer is not None:
        return await store.writer.run(work)
    async with store.transaction() as tx:
        return await work(tx)
