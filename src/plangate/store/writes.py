"""One commit of versioned documents and their journal rows, at the speed of the disk.

A plan transition writes one document by compare-and-set and journals what happened,
all in one transaction. Through the general ``Store.transaction`` each statement is a
separate hop to the driver's thread; here the whole transaction is one function:

- SQLite: one hop to a worker thread, where a plain ``sqlite3`` connection runs
  ``BEGIN IMMEDIATE``, the compare-and-set updates, one ``executemany`` for the journal
  rows and ``COMMIT``. Durability is SQLite's default, ``synchronous=FULL``: in WAL mode
  ``NORMAL`` can lose the last commits on power loss, and an approval the user saw
  recorded must survive that.
- PostgreSQL: one transaction on asyncpg directly, statements prepared once per
  connection, the journal rows in a single ``executemany`` (``plangate.store.postgres``).

The guarantee is the store's: a lost compare-and-set raises ``Conflict`` and nothing of
the commit is applied.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import Connection, Engine, create_engine, event, insert
from sqlalchemy.pool import StaticPool

from plangate.journal.events import JournalEvent
from plangate.store.errors import database_error
from plangate.store.schema import journal
from plangate.store.storable import clean_parameters, clean_text, storable_json
from plangate.store.store import Conflict

if TYPE_CHECKING:
    from plangate.store.file_guard import FileIdentity
    from plangate.store.store import Store, Transaction

__all__ = ["Put", "SqliteWriter", "commit", "journal_row", "transact"]

T = TypeVar("T")


@dataclass(frozen=True)
class Put:
    """Write ``data`` to a document if it is at ``expected_version`` (0: absent).

    ``expected_version=None`` writes whatever version is there (an archive copy)."""

    kind: str
    key: str
    data: Any
    expected_version: int | None


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


class SqliteWriter:
    """A ``sqlite3`` connection that commits whole transactions in a worker thread."""

    def __init__(self, path: str, identity: FileIdentity | None = None) -> None:
        self._identity = identity
        """The file opened at start; a commit to a deleted or replaced file is refused."""
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("PRAGMA synchronous=FULL")
        # One thread of its own: transactions on this connection run one at a time, and
        # commits waiting for the file lock never hold up the shared worker threads
        # (queries, file searches) that asyncio.to_thread uses.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plangate-commit")
        self._engine: Engine | None = None

    async def commit(
        self, puts: Sequence[Put], events: Sequence[tuple[str, JournalEvent]]
    ) -> list[int]:
        rows = [journal_row(scope, event) for scope, event in events]
        documents = [
            (clean_text(p.kind), clean_text(p.key), storable_json(p.data), p.expected_version)
            for p in puts
        ]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._commit, documents, rows)

    def _commit(
        self, documents: list[tuple[str, str, str, int | None]], rows: list[tuple[Any, ...]]
    ) -> list[int]:
        conn = self._conn
        if self._identity is not None:
            self._identity.check()  # before BEGIN: nothing is written to a vanished file
        conn.execute("BEGIN IMMEDIATE")
        try:
            versions = [_put(conn, *document) for document in documents]
            if rows:
                conn.executemany(_INSERT_JOURNAL, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return versions

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        """``work`` as one transaction in one hop to the commit thread.

        ``work`` runs on a synchronous SQLAlchemy connection behind the ``Transaction``
        interface, so its coroutine never waits on anything and is driven to its end in
        that thread; one that does wait raises ``RuntimeError`` and nothing is applied.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._run, work)

    def _run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        from plangate.store.store import Transaction

        if self._engine is None:
            self._engine = _sync_engine(self._conn)
        if self._identity is not None:
            self._identity.check()  # before BEGIN: nothing is written to a vanished file
        with self._engine.connect() as connection:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = _drive(work(Transaction(_SyncConnection(connection))))  # pyright: ignore[reportArgumentType]
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return result

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        if self._engine is not None:
            self._engine.dispose(close=False)
        self._conn.close()


def _sync_engine(conn: sqlite3.Connection) -> Engine:
    """SQLAlchemy on the writer's own connection, cleaning text as the async engine does."""
    engine = create_engine(
        "sqlite://", creator=lambda: conn, poolclass=StaticPool, json_serializer=storable_json
    )

    def clean(*args: Any) -> tuple[str, Any]:
        statement, parameters = args[2], args[3]
        return statement, clean_parameters(parameters)

    event.listen(engine, "before_cursor_execute", clean, retval=True)
    return engine


class _SyncConnection:
    """A synchronous SQLAlchemy connection behind the ``AsyncConnection`` calls that
    ``Transaction`` and the repositories make; its awaits never suspend."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.dialect = connection.dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self._connection.execute(statement, parameters)

    @asynccontextmanager
    async def begin_nested(self) -> AsyncGenerator[None]:
        with self._connection.begin_nested():
            yield


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
    texts = (scope, event.kind, event.subject, event.from_state, event.to_state, event.actor)
    return (
        *clean_parameters(texts),
        event.at,
        event.revision,
        clean_parameters(event.sha256),
        storable_json(event.detail),
    )


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
        versions = [await _put_async(tx, put) for put in puts]
        if events:
            await tx.connection.execute(
                insert(journal), [{"scope": scope, **e.model_dump()} for scope, e in events]
            )
    return versions


async def _put_async(tx: Transaction, put: Put) -> int:
    expected = put.expected_version
    if expected is None:
        existing = await tx.get(put.kind, put.key)
        expected = existing.version if existing is not None else 0
    return await tx.put(put.kind, put.key, put.data, expected_version=expected)


async def transact(store: Store, work: Callable[[Transaction], Awaitable[T]]) -> T:
    """``work(tx)`` as one transaction: on a SQLite file in one hop to the commit thread
    (``work`` may await only the transaction's own statements), elsewhere on the async
    engine. A ``Conflict`` it raises rolls all of it back."""
    if store.writer is not None:
        return await store.writer.run(work)
    async with store.transaction() as tx:
        return await work(tx)
