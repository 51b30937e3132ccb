"""Document point reads and one-transaction commits on PostgreSQL, on asyncpg directly.

A plan read or a plan commit through SQLAlchemy's async layer spends most of its time
in that layer (connection checkout, statement compilation, result processing through
the greenlet bridge), not in the database: eight writers topped out near a hundred
commits per second on two cores. Here the same statements go straight to asyncpg, which
prepares each one once per connection (its statement cache), on a small pool of its own.

What the general path guarantees holds here too:

- text is cleaned as on every engine (``plangate.store.storable``): NUL and unpaired
  surrogates become U+FFFD, so a turn is never refused for its text;
- a lost compare-and-set raises ``Conflict`` with nothing applied; any other failure is
  a ``DatabaseError`` with a code (``plangate.store.errors``), never a conflict.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from plangate.journal.events import JournalEvent
from plangate.store.errors import database_error
from plangate.store.fence import check_asyncpg, current_fence
from plangate.store.storable import clean_text
from plangate.store.store import Conflict, Document
from plangate.store.writes import journal_row

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from plangate.store.writes import Put

__all__ = ["PostgresDocuments"]

T = TypeVar("T")

_POOL_SIZE = 4
"""Connections of the fast path, beside the engine's own pool: a few, since every server
process holds them and the server's connection limit is shared (its flush, not the
number of connections, bounds commits)."""
_IDLE_SECONDS = 30.0
"""An idle connection is closed after this long, so a quiet process holds none."""

_SELECT = "SELECT version, data FROM plangate_documents WHERE kind = $1 AND key = $2"
_SELECT_MANY = (
    "SELECT kind, key, version, data FROM plangate_documents "
    "WHERE (kind, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
)
_SELECT_VERSION = "SELECT version FROM plangate_documents WHERE kind = $1 AND key = $2"
_INSERT = (
    "INSERT INTO plangate_documents (kind, key, version, data, updated_at) "
    "VALUES ($1, $2, 1, $3, $4) ON CONFLICT (kind, key) DO NOTHING"
)
_UPDATE = (
    "UPDATE plangate_documents SET version = $1, data = $2, updated_at = $3 "
    "WHERE kind = $4 AND key = $5 AND version = $6"
)
# One put and its journal rows as a single statement (atomic on its own, one round trip):
# the journal rows are inserted only if the compare-and-set wrote, in the given order.
_ROWS = (
    "INSERT INTO plangate_journal (scope, kind, subject, from_state, to_state, actor, at, "
    "revision, sha256, detail) SELECT scope, kind, subject, from_state, to_state, actor, at, "
    "revision, sha256, detail FROM unnest($7::text[], $8::text[], $9::text[], $10::text[], "
    "$11::text[], $12::text[], $13::float8[], $14::int[], $15::text[], $16::json[]) "
    "WITH ORDINALITY AS r(scope, kind, subject, from_state, to_state, actor, at, revision, "
    "sha256, detail, n) WHERE EXISTS (SELECT 1 FROM written) ORDER BY n"
)
_JOURNAL_WIDTH = 10
_UPDATE_AND_JOURNAL = (
    "WITH written AS (UPDATE plangate_documents SET version = $1, data = $2, updated_at = $3 "
    "WHERE kind = $4 AND key = $5 AND version = $6 RETURNING version), "
    f"journaled AS ({_ROWS}) SELECT version FROM written"
)
_INSERT_AND_JOURNAL = (
    "WITH written AS (INSERT INTO plangate_documents (kind, key, version, data, updated_at) "
    "SELECT $4, $5, $1, $2, $3 WHERE $6::int = 0 "
    "ON CONFLICT (kind, key) DO NOTHING RETURNING version), "
    f"journaled AS ({_ROWS}) SELECT version FROM written"
)
_JOURNAL = (
    "INSERT INTO plangate_journal (scope, kind, subject, from_state, to_state, actor, at, "
    "revision, sha256, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
)


class PostgresDocuments:
    """Point reads and commits of ``plangate_documents`` (and journal rows) on asyncpg.

    Bound to the event loop of the store that owns it, like the store's engine."""

    def __init__(self, engine: AsyncEngine, where: str) -> None:
        # The engine's own translation of its URL (host, port, user, ssl, ...), so both
        # paths reach the same server the same way.
        _, params = engine.dialect.create_connect_args(engine.url)
        self._connect: dict[str, Any] = {**params, "timeout": 10}
        self._where = where
        self._pool: Any = None
        self._lock = asyncio.Lock()

    async def _acquire(self) -> Any:
        if self._pool is None:
            async with self._lock:
                if self._pool is None:
                    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

                    self._pool = await asyncpg.create_pool(  # pyright: ignore[reportUnknownMemberType]
                        connection_class=_connection_class(),
                        min_size=0,
                        max_size=_POOL_SIZE,
                        max_inactive_connection_lifetime=_IDLE_SECONDS,
                        **self._connect,
                    )
        return self._pool.acquire()

    async def _on_connection(self, work: Callable[[Any], Awaitable[T]], *, read: bool = False) -> T:
        """``work(connection)`` on a pooled connection; any failure but a ``Conflict`` as a
        ``DatabaseError``.

        A connection the server ended while it sat in the pool (a restart, a failover,
        ``pg_terminate_backend``) is dropped and ``work`` tried again on another: always
        when asyncpg refused to send anything on it (nothing reached the server), and
        for a read also when it broke mid-way. A write that broke mid-way is not tried
        again: it may have committed."""
        for attempt in range(_POOL_SIZE + 2):
            try:
                async with await self._acquire() as conn:
                    try:
                        return await work(conn)
                    except Exception as exc:
                        if _lost(exc):
                            conn.terminate()  # the pool opens a new one in its place
                        raise
            except Conflict:
                raise
            except Exception as exc:
                retry = _unsent(exc) or (read and _lost(exc))
                if retry and attempt < _POOL_SIZE + 1:
                    continue
                raise database_error(exc, self._where) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def get(self, kind: str, key: str) -> Document | None:
        async def work(conn: Any) -> Any:
            return await conn.fetchrow(_SELECT, kind, key)

        row = await self._on_connection(work, read=True)
        if row is None:
            return None
        return Document.from_row(row[0], row[1])

    async def execute(self, statement: str, *arguments: Any) -> str:
        """One statement in a transaction of its own (one round trip); its status, such
        as ``"INSERT 0 1"``. Text arguments are cleaned as every engine cleans them."""
        cleaned = [clean_text(a) if isinstance(a, str) else a for a in arguments]

        async def work(conn: Any) -> str:
            return await conn.execute(statement, *cleaned)

        return await self._on_connection(work)

    async def get_many(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Document]:
        async def work(conn: Any) -> Any:
            return await conn.fetch(
                _SELECT_MANY, [kind for kind, _ in wanted], [key for _, key in wanted]
            )

        rows = await self._on_connection(work, read=True)
        return {(row[0], row[1]): Document.from_row(row[2], row[3]) for row in rows}

    async def commit(
        self, puts: Sequence[Put], events: Sequence[tuple[str, JournalEvent]]
    ) -> list[int]:
        documents = [
            (clean_text(p.kind), clean_text(p.key), p.text, p.expected_version) for p in puts
        ]
        rows = [journal_row(scope, event) for scope, event in events]
        fence = current_fence()
        if len(documents) == 1 and documents[0][3] is not None and fence is None:
            return [await self._commit_one(*documents[0], rows)]  # pyright: ignore[reportArgumentType]

        async def work(conn: Any) -> list[int]:
            async with conn.transaction():
                # A run's commit: its lease row, locked until the commit (``fence``).
                await check_asyncpg(conn, fence)
                versions = [await _put(conn, *document) for document in documents]
                if rows:
                    await conn.executemany(_JOURNAL, rows)
            return versions

        return await self._on_connection(work)

    async def _commit_one(
        self, kind: str, key: str, data: str, expected: int, rows: list[tuple[Any, ...]]
    ) -> int:
        """The common commit (one document, its journal rows) in one statement."""
        # One array per journal column (unnest turns them back into rows).
        columns: list[list[Any]] = [[row[i] for row in rows] for i in range(_JOURNAL_WIDTH)]
        statement = _INSERT_AND_JOURNAL if expected == 0 else _UPDATE_AND_JOURNAL

        async def work(conn: Any) -> int:
            version = await conn.fetchval(
                statement, expected + 1, data, time.time(), kind, key, expected, *columns
            )
            if version is None:
                raise Conflict(kind, key, expected, await _version(conn, kind, key))
            return version

        return await self._on_connection(work)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()


def _unsent(exc: BaseException) -> bool:
    """asyncpg refused to use a connection the server had ended: nothing was sent."""
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    if isinstance(exc, asyncpg.InternalClientError):
        # "cannot switch to state ...": the server's goodbye came in, the close not yet.
        return True
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


def _lost(exc: BaseException) -> bool:
    """The connection is gone (before or during the statement)."""
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    return _unsent(exc) or isinstance(
        exc, asyncpg.ConnectionDoesNotExistError | ConnectionError | asyncpg.AdminShutdownError
    )


def _connection_class() -> type[Any]:
    """asyncpg's connection, minus the reset query it sends when a connection goes back to
    the pool (``SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``): one
    more round trip after every read and every commit, undoing state these connections
    never create -- they take no advisory lock, open no cursor, listen to nothing and set
    nothing. An open transaction is still rolled back (``Connection.reset`` does that
    whatever the query)."""
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    class FastPathConnection(asyncpg.Connection):  # pyright: ignore[reportUntypedBaseClass]
        def get_reset_query(self) -> str:
            return ""

    return FastPathConnection


async def _put(conn: Any, kind: str, key: str, data: str, wanted: int | None) -> int:
    now = time.time()
    expected: int = (await _version(conn, kind, key) or 0) if wanted is None else wanted
    if expected == 0:
        # ON CONFLICT DO NOTHING: no row inserted means someone was first (a conflict);
        # any other refusal raises and is reported as a database error.
        status: str = await conn.execute(_INSERT, kind, key, data, now)
        if status != "INSERT 0 1":
            raise Conflict(kind, key, 0, await _version(conn, kind, key))
        return 1
    status = await conn.execute(_UPDATE, expected + 1, data, now, kind, key, expected)
    if status != "UPDATE 1":
        raise Conflict(kind, key, expected, await _version(conn, kind, key))
    return expected + 1


async def _version(conn: Any, kind: str, key: str) -> int | None:
    return await conn.fetchval(_SELECT_VERSION, kind, key)
