"""The durable store: versioned documents with compare-and-set, and the journal.

Every write happens in a transaction; a document write names the version it read, and a
concurrent writer that got there first makes it fail with ``Conflict`` -- nothing is
half-applied because the whole transaction rolls back.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import event, insert, inspect, select, text, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Dialect, Engine, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from plangate.errors import ErrorCode
from plangate.journal.events import JournalEvent
from plangate.store.errors import DatabaseError, database_error
from plangate.store.fence import check_connection, current_fence
from plangate.store.file_guard import guard_sqlite_file
from plangate.store.schema import (
    ADK_TABLES,
    MIGRATIONS,
    SCHEMA_VERSION,
    documents,
    journal,
    schema_migrations,
    tables_of_version,
)
from plangate.store.storable import keep_text_storable, storable_json
from plangate.store.urls import ensure_sqlite_folder, redacted, resolve_database_url

if TYPE_CHECKING:
    from plangate.store.file_guard import FileIdentity
    from plangate.store.fresh import SqliteReader
    from plangate.store.postgres import PostgresDocuments
    from plangate.store.writes import SqliteWriter

T = TypeVar("T")

__all__ = [
    "Conflict",
    "Document",
    "JournalEntry",
    "Store",
    "SyncConnection",
    "Transaction",
    "is_valid_version",
]


class Conflict(Exception):
    """A compare-and-set lost: the document changed since it was read."""

    def __init__(self, kind: str, key: str, expected: int, actual: int | None) -> None:
        super().__init__(
            f"{kind} {key!r} changed concurrently (expected version {expected}, found {actual})"
        )
        self.kind, self.key, self.expected, self.actual = kind, key, expected, actual


def is_valid_version(version: object) -> bool:
    """Whether ``version`` is one this store writes: an integer from 1 up."""
    return isinstance(version, int) and not isinstance(version, bool) and version >= 1


@dataclass(frozen=True)
class Document:
    data: Any
    version: int

    @classmethod
    def from_row(cls, version: int, data: Any) -> Document:
        """A document as a driver returns its row: ``data`` is JSON text from ``sqlite3``
        and asyncpg, already decoded through SQLAlchemy's JSON type."""
        return cls(json.loads(data) if isinstance(data, str) else data, version)


@dataclass(frozen=True)
class JournalEntry:
    seq: int
    scope: str
    event: JournalEvent


def dialect_insert(table: Any, dialect: str) -> Any:
    """An INSERT into ``table`` in the dialect's own form, which can say ``ON CONFLICT``."""
    return postgresql_insert(table) if dialect == "postgresql" else sqlite_insert(table)


class Transaction:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def get(self, kind: str, key: str) -> Document | None:
        row = (
            await self._conn.execute(
                select(documents.c.data, documents.c.version).where(
                    documents.c.kind == kind, documents.c.key == key
                )
            )
        ).first()
        return Document(row.data, row.version) if row else None

    async def put(self, kind: str, key: str, data: Any, *, expected_version: int) -> int:
        """Write ``data`` if the stored version is ``expected_version`` (0: absent)."""
        now = time.time()
        if expected_version == 0:
            # ON CONFLICT DO NOTHING, not a savepoint around a failing INSERT: one
            # statement instead of three, and the same answer (no row: someone was first).
            try:
                result = await self._conn.execute(
                    dialect_insert(documents, self._conn.dialect.name)
                    .on_conflict_do_nothing()
                    .values(kind=kind, key=key, version=1, data=data, updated_at=now)
                )
            except IntegrityError as exc:
                # Not a lost race: the row is refused for another reason (a column this
                # code does not know, a constraint added by hand).
                raise database_error(exc, "the plan store") from None
            if result.rowcount != 1:
                current = await self.get(kind, key)
                raise Conflict(kind, key, 0, current.version if current else None)
            return 1
        result = await self._conn.execute(
            update(documents)
            .where(
                documents.c.kind == kind,
                documents.c.key == key,
                documents.c.version == expected_version,
            )
            .values(version=expected_version + 1, data=data, updated_at=now)
        )
        if result.rowcount != 1:
            current = await self.get(kind, key)
            raise Conflict(kind, key, expected_version, current.version if current else None)
        return expected_version + 1

    async def replace(self, kind: str, key: str, data: Any, *, found_version: Any) -> int:
        """Write ``data`` over the row if it still holds ``found_version``, as read.

        A valid version makes this an ordinary ``put``. A row with a version ``put`` never
        writes (0, negative, not an integer: written by someone else) is compared against
        that value and gets version 1."""
        if is_valid_version(found_version):
            return await self.put(kind, key, data, expected_version=found_version)
        result = await self._conn.execute(
            update(documents)
            .where(
                documents.c.kind == kind,
                documents.c.key == key,
                documents.c.version == found_version,
            )
            .values(version=1, data=data, updated_at=time.time())
        )
        if result.rowcount != 1:
            current = await self.get(kind, key)
            raise Conflict(kind, key, found_version, current.version if current else None)
        return 1

    async def append(self, scope: str, entry: JournalEvent) -> int:
        result = await self._conn.execute(insert(journal).values(scope=scope, **entry.model_dump()))
        key = result.inserted_primary_key
        if key is None:
            raise RuntimeError("the journal insert returned no row id")
        return int(cast(int, key[0]))

    async def append_all(self, scope: str, entries: Iterable[JournalEvent]) -> None:
        """Journal ``entries`` in order, in one statement (an executemany)."""
        rows = [{"scope": scope, **entry.model_dump()} for entry in entries]
        if rows:
            await self._conn.execute(insert(journal), rows)

    @property
    def connection(self) -> AsyncConnection:
        """For repositories with tables of their own (they join the same transaction)."""
        return self._conn


class SyncConnection:
    """One of plangate's own ``sqlite3`` connections behind the ``AsyncConnection`` calls
    that reads, ``Transaction`` and the repositories make; its awaits never suspend.

    Plain SQL (``plangate.store.sql``) runs on ``raw``. A SQLAlchemy statement opens a
    synchronous SQLAlchemy connection over the same ``sqlite3`` connection (``engine``),
    at its first use; ``opened`` closes it when the caller is done (for a transaction,
    after ``COMMIT``: closing it rolls back)."""

    def __init__(self, raw: sqlite3.Connection, engine: Engine, opened: ExitStack) -> None:
        self.raw = raw
        self._engine = engine
        self._opened = opened
        self._connection: Connection | None = None

    def _sqlalchemy(self) -> Connection:
        if self._connection is None:
            self._connection = self._opened.enter_context(self._engine.connect())
        return self._connection

    @property
    def dialect(self) -> Dialect:
        return self._sqlalchemy().dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        return self._sqlalchemy().execute(statement, parameters)

    @asynccontextmanager
    async def begin_nested(self) -> AsyncGenerator[None]:
        with self._sqlalchemy().begin_nested():
            yield


class Store:
    """Opened once per event loop; cheap to share between agents and surfaces."""

    def __init__(self, engine: AsyncEngine, url: str) -> None:
        self.engine = engine
        self.url = url
        self.reader: SqliteReader | None = None
        """The lock-free read path of a SQLite file (see ``plangate.store.fresh``)."""
        self.writer: SqliteWriter | None = None
        """The one-hop commit path of a SQLite file (see ``plangate.store.writes``)."""
        self.postgres: PostgresDocuments | None = None
        """Document reads and commits on asyncpg directly (see ``plangate.store.postgres``)."""
        self.identity: FileIdentity | None = None
        """The SQLite file opened, checked before every transaction and lock-free read."""

    @classmethod
    async def open(cls, url: str | None = None, *, migrate: bool = True) -> Store:
        """Open (and on first use create) the database; a database that cannot be used
        raises ``DatabaseError`` naming the problem. ``migrate=False`` only connects (for
        ``plangate db check``, which must look at a database it would refuse)."""
        url = resolve_database_url(url)
        is_sqlite = url.startswith("sqlite")
        ensure_sqlite_folder(url)
        # PostgreSQL: a server that does not answer is reported in seconds, not a minute.
        engine = create_async_engine(
            url,
            connect_args={"timeout": 30 if is_sqlite else 10},
            json_serializer=storable_json,
            # PostgreSQL: a pooled connection the server ended (a restart, a failover,
            # pg_terminate_backend) is found dead at checkout and replaced, rather than
            # failing the next statement; on SQLite there is no server to lose.
            pool_pre_ping=not is_sqlite,
        )
        keep_text_storable(engine)
        identity = None
        if is_sqlite:
            _use_immediate_transactions(engine)
            identity = guard_sqlite_file(engine, url)
        store = cls(engine, url)
        store.identity = identity
        try:
            if migrate:
                await store._migrate()
            else:
                await store.ping()
        except Exception as exc:
            await engine.dispose()
            if identity is not None:
                identity.close()
            raise database_error(exc, store.name) from None
        path = make_url(url).database if is_sqlite else None
        if migrate and path and path != ":memory:" and not path.startswith("file:"):
            from plangate.store.fresh import SqliteReader
            from plangate.store.writes import SqliteWriter

            store.reader = SqliteReader(path)
            store.writer = SqliteWriter(path, identity, store.reader)
        if migrate and engine.dialect.driver == "asyncpg":
            from plangate.store.postgres import PostgresDocuments

            store.postgres = PostgresDocuments(engine, store.name)
        return store

    @property
    def name(self) -> str:
        """The database as it may be shown to a person (no password)."""
        return f"database {redacted(self.url)}"

    async def ping(self) -> None:
        """Raise ``DatabaseError`` unless the database answers (and, for SQLite, is still
        the file that was opened)."""
        if self.reader is not None and self.writer is not None:
            # The event loop's own connection, in this thread: a load balancer asks
            # often, and the async engine's answer is a few hops to a driver thread.
            try:
                self.writer.check_file()
                self.reader.connection.execute("SELECT 1").fetchone()
            except sqlite3.Error as exc:
                raise database_error(exc, self.name) from None
            return
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            raise database_error(exc, self.name) from None

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.postgres is not None:
            await self.postgres.close()
            self.postgres = None
        await self.engine.dispose()
        if self.identity is not None:
            self.identity.close()

    def _check_file(self) -> None:
        """``DatabaseError`` if the SQLite file (or its log) is gone, replaced or damaged."""
        if self.identity is not None:
            self.identity.check()

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @asynccontextmanager
    async def transaction(self) -> AsyncGenerator[Transaction]:
        async with self.engine.begin() as conn:
            # A run's writes go through only while its lease is its own (``fence``).
            await check_connection(conn, current_fence())
            yield Transaction(conn)

    async def get(self, kind: str, key: str) -> Document | None:
        """The document as last committed (no transaction: on SQLite a lock-free point
        read in the calling thread)."""
        if self.reader is not None:
            from plangate.store.fresh import ReaderBusy

            self._check_file()
            try:
                row = self.reader.row(kind, key)
            except ReaderBusy:
                pass
            else:
                if row is None:
                    return None
                return Document.from_row(*row)
        if self.postgres is not None:
            return await self.postgres.get(kind, key)
        async with self.engine.connect() as conn:
            return await Transaction(conn).get(kind, key)

    async def get_many(self, wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Document]:
        """Several documents as last committed, by ``(kind, key)``, in one round trip;
        absent ones are left out."""
        wanted = list(wanted)
        if not wanted:
            return {}
        if self.reader is not None:
            from plangate.store.fresh import ReaderBusy

            self._check_file()
            try:
                rows = self.reader.rows(wanted)
            except ReaderBusy:
                pass
            else:
                return {pair: Document.from_row(*row) for pair, row in rows.items()}
        if self.postgres is not None:
            return await self.postgres.get_many(wanted)
        found: dict[tuple[str, str], Document] = {}
        async with self.engine.connect() as conn:
            for kind, key in wanted:
                document = await Transaction(conn).get(kind, key)
                if document is not None:
                    found[(kind, key)] = document
        return found

    async def read(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run the read-only ``work(connection)`` against the last committed state.

        On a SQLite file it runs on the lock-free reader in the calling thread -- no
        worker-thread hop per statement, no ``BEGIN IMMEDIATE`` -- and, should the file be
        busy, again on the async engine; ``work`` must therefore only read. The
        connection offers ``execute`` and ``dialect`` like an ``AsyncConnection``.
        """
        if self.reader is not None:
            from sqlalchemy.exc import OperationalError

            from plangate.store.fresh import is_busy

            self._check_file()  # never served from a file that is gone or damaged
            try:
                with ExitStack() as opened:
                    reader = self.reader
                    return await work(SyncConnection(reader.connection, reader.engine(), opened))
            except (OperationalError, sqlite3.OperationalError) as exc:
                if not is_busy(exc):
                    raise
        async with self.engine.connect() as conn:
            return await work(conn)

    async def journal(self, scope: str | None = None, *, after: int = 0) -> list[JournalEntry]:
        query = select(journal).where(journal.c.seq > after).order_by(journal.c.seq)
        if scope is not None:
            query = query.where(journal.c.scope == scope)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            JournalEntry(
                seq=row.seq,
                scope=row.scope,
                event=JournalEvent.model_validate(
                    row._mapping  # pyright: ignore[reportPrivateUsage] -- public Row API
                ),
            )
            for row in rows
        ]

    async def _migrate(self) -> None:
        for attempt in range(5):
            try:
                async with self.engine.begin() as conn:
                    if not self.is_sqlite:
                        # Serialise concurrent first starts of several server processes.
                        await conn.execute(text("SELECT pg_advisory_xact_lock(727274)"))
                    # Read once: the tables before this start created any.
                    present = await table_names(conn)
                    refuse_foreign(present, self.name)
                    await conn.run_sync(lambda c: schema_migrations.create(c, checkfirst=True))
                    done = set((await conn.execute(select(schema_migrations.c.version))).scalars())
                    _refuse_newer(done, self.name)
                    _require_tables(present, done, self.name)
                    for version, name, apply in MIGRATIONS:
                        if version in done:
                            continue
                        await conn.run_sync(apply)
                        await conn.execute(
                            insert(schema_migrations).values(
                                version=version, name=name, applied_at=time.time()
                            )
                        )
                return
            except DatabaseError:
                raise
            except Exception:  # a concurrent creator won the race; look again
                if attempt == 4:
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))


def _refuse_newer(done: set[int], name: str) -> None:
    newest = max(done, default=0)
    if newest > SCHEMA_VERSION:
        raise DatabaseError(
            ErrorCode.DATABASE_SCHEMA_NEWER,
            f"{name} has schema version {newest}, newer than this plangate knows "
            f"({SCHEMA_VERSION})",
            "upgrade plangate (pip install -U plangate) or point --database-url elsewhere",
        )


async def table_names(conn: AsyncConnection) -> set[str]:
    return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


def refuse_foreign(present: set[str], name: str) -> None:
    """Refuse a database that holds another application's tables and none of plangate's
    or ADK's, before anything is written into it: plangate would otherwise add its tables
    beside the other application's, and a later repair would touch both. ``present`` is
    the database's tables (``table_names``)."""
    if not present or schema_migrations.name in present or present & set(ADK_TABLES):
        return
    shown = sorted(present)
    listed = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
    raise DatabaseError(
        ErrorCode.DATABASE_FOREIGN,
        f"{name} holds another application's tables ({listed}) and none of plangate's",
        "give plangate a database of its own (createdb plangate, or a new SQLite file)",
    )


def _require_tables(present: set[str], done: set[int], name: str) -> None:
    """Every table of an applied migration must still be there: a dropped table is
    reported at start, not on the first request that needs it."""
    expected = tables_of_version(done)
    if not expected:
        return
    missing = sorted(expected - present)
    if missing:
        raise DatabaseError(
            ErrorCode.DATABASE_TABLE_MISSING,
            f"{name} lacks the table(s) {', '.join(missing)}",
            "run plangate db check --repair to recreate them (their rows are lost)",
        )


def _use_immediate_transactions(engine: AsyncEngine) -> None:
    """SQLite: take the write lock at BEGIN, so read-then-write cannot deadlock or upgrade
    late; wait for other writers instead of failing; WAL lets readers run meanwhile."""

    @event.listens_for(engine.sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
