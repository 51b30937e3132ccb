"""Reads of versioned documents that are always current and almost always free.

The gate reads the plan state before every tool call, so that read is the hot path. It
takes no write lock and, on SQLite, no thread hop:

- ``SqliteReader`` is a plain read-only ``sqlite3`` connection used in the calling
  thread. In WAL mode a reader never waits for a writer, and a point read costs a few
  microseconds -- less than handing it to a worker thread. If the file is busy anyway
  (recovery, a checkpoint that truncates) it raises ``ReaderBusy`` at once and the
  caller reads through the async engine instead, so the event loop never waits on a lock.
- ``FreshDocuments`` caches each decoded document beside the row it came from. On
  SQLite a get first reads the file's wal-index header (``plangate.store.wal_index``):
  if nobody committed since the document was read -- or only this connection, without
  writing it -- the cached value is current; else it reads the row (on PostgreSQL every
  get does: one round trip) and decodes it only if its version or bytes changed. A
  write by any process is seen by the very next get.
- ``FreshReads`` keeps the results of wider reads while that header stays the same.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import StaticPool

from plangate.store.store import Document
from plangate.store.wal_index import OwnCommits, Seen, WalIndex

if TYPE_CHECKING:
    from plangate.store.store import Store

__all__ = ["DOCUMENT_ROW", "FreshDocuments", "FreshReads", "ReaderBusy", "SqliteReader", "is_busy"]

T = TypeVar("T")

_tokens = itertools.count(1)


class ReaderBusy(Exception):
    """The SQLite file could not be read without waiting; read another way."""


def is_busy(exc: BaseException) -> bool:
    """A statement refused because the file was locked (the reader never waits): told by
    SQLite's result code, on ``sqlite3``'s error or on the driver error SQLAlchemy wraps."""
    error = getattr(exc, "orig", None) or exc
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


DOCUMENT_ROW = "SELECT version, data FROM plangate_documents WHERE kind = ? AND key = ?"
"""A document's stored ``(version, data)`` (data as JSON text), by kind and key."""


class SqliteReader:
    """An autocommit ``sqlite3`` connection for point reads of documents, used in the
    event loop's thread (the store's commits on that thread use it too)."""

    def __init__(self, path: str) -> None:
        # check_same_thread=False only so a store closed from another thread can close
        # it; reads happen in the thread of the store's event loop. Not ``query_only``:
        # the store commits on this connection too (``plangate.store.writes``), and
        # switching that pragma back and forth would expire every prepared statement.
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # Never wait for a lock: the caller falls back to the async path instead.
        self._conn.execute("PRAGMA busy_timeout=0")
        self._version_cursor = self._conn.cursor()
        self._row_cursor = self._conn.cursor()
        self.token = next(_tokens)
        """Tells this connection's ``data_version`` values and commits apart from another's."""
        self._engine: Engine | None = None
        self.wal = WalIndex(path)
        self.own = OwnCommits(self.token)
        """The commits made on this connection (``SqliteWriter`` commits on it)."""

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection itself, for the store's commits on the event loop's thread."""
        return self._conn

    def stamp(self) -> object:
        """Changes with every commit to the file, by any connection: its wal-index
        header or, without one, ``data_version`` (another connection's commits) with
        this connection's own count of changed rows."""
        header = self.wal.header()
        if header is not None:
            return header
        try:
            version = self._version_cursor.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.OperationalError as exc:
            raise ReaderBusy(str(exc)) from exc
        return self.token, version, self._conn.total_changes

    def row(self, kind: str, key: str) -> tuple[Any, Any] | None:
        """The stored ``(version, data)`` of a document (data as JSON text), or None."""
        try:
            return self._row_cursor.execute(DOCUMENT_ROW, (kind, key)).fetchone()
        except sqlite3.OperationalError as exc:
            raise ReaderBusy(str(exc)) from exc

    def rows(self, wanted: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[Any, Any]]:
        """The stored ``(version, data)`` of several documents in one statement, by
        ``(kind, key)``; absent ones are left out."""
        where = " OR ".join("(kind = ? AND key = ?)" for _ in wanted)
        parameters = [part for pair in wanted for part in pair]
        try:
            found = self._conn.execute(
                f"SELECT kind, key, version, data FROM plangate_documents WHERE {where}",
                parameters,
            ).fetchall()
        except sqlite3.OperationalError as exc:
            raise ReaderBusy(str(exc)) from exc
        return {(kind, key): (version, data) for kind, key, version, data in found}

    def engine(self) -> Engine:
        """A synchronous SQLAlchemy engine on this very connection, for the repositories'
        reads (``Store.read``): queries run in the calling thread, in autocommit, with no
        transaction and so no lock."""
        if self._engine is None:
            conn = self._conn
            self._engine = create_engine("sqlite://", creator=lambda: conn, poolclass=StaticPool)
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose(close=False)
        self._conn.close()
        self.wal.close()


_MAX_ENTRIES = 4096


class FreshDocuments(Generic[T]):
    """Decoded documents of one kind, revalidated against the database on every get.

    ``decode`` turns a key and its stored document (None: absent) into the value callers
    use; the value is shared between callers, who must copy it before changing it.
    """

    def __init__(self, kind: str, decode: Callable[[str, Document | None], T]) -> None:
        self.kind = kind
        self._decode = decode
        # key -> (raw row, decoded value, when read on SQLite); least recently used first.
        self._entries: OrderedDict[str, tuple[object, T, Seen | None]] = OrderedDict()

    def get_now(self, store: Store, key: str) -> T | None:
        """The value as ``get`` gives it when that needs no await (a SQLite file whose
        reader is free), else None -- so for values that are never None."""
        reader = store.reader
        if reader is None:
            return None
        try:
            return self._get_sqlite(reader, key)
        except ReaderBusy:
            return None

    async def get(self, store: Store, key: str) -> T:
        reader = store.reader
        if reader is not None:
            try:
                return self._get_sqlite(reader, key)
            except ReaderBusy:
                pass
        document = await store.get(self.kind, key)
        raw = (document.version, document.data) if document is not None else None
        return self._remember(key, raw, document, None)

    def _get_sqlite(self, reader: SqliteReader, key: str) -> T:
        # The header is read before the row: a commit landing in between changes it
        # again, so the next get reads rather than trusting what this one read.
        header = reader.wal.header()
        entry = self._entries.get(key)
        if entry is not None:
            seen = entry[2]
            if seen is not None and reader.own.unchanged(self.kind, key, seen, header):
                self._entries.move_to_end(key)
                return entry[1]
        seen = reader.own.seen(header)
        # The row itself then validates the cached value: its version and bytes equal
        # to what was decoded prove it current (a row rewritten in place under the same
        # version has other bytes).
        row = reader.row(self.kind, key)
        if entry is not None and entry[0] == row:
            self._entries[key] = (row, entry[1], seen)
            self._entries.move_to_end(key)
            return entry[1]
        document = Document.from_row(*row) if row is not None else None
        return self._remember(key, row, document, seen)

    def _remember(self, key: str, raw: object, document: Document | None, seen: Seen | None) -> T:
        entry = self._entries.get(key)
        value = entry[1] if entry is not None and entry[0] == raw else self._decode(key, document)
        self._keep(key, raw, value, seen)
        return value

    def _keep(self, key: str, raw: object, value: T, seen: Seen | None) -> None:
        self._entries[key] = (raw, value, seen)
        self._entries.move_to_end(key)
        if len(self._entries) > _MAX_ENTRIES:
            self._entries.popitem(last=False)

    def learn(self, store: Store, key: str, version: int, text: str, value: T) -> None:
        """``value`` is what ``key`` holds at ``version``, as this process just committed
        it (``text``: the JSON it stored). The next get still reads the row, and finds it
        equal to what was written here, so it does not decode it again. Only on a SQLite
        file, where a row is compared as the text stored."""
        if store.reader is not None:
            self._keep(key, (version, text), value, None)

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)


class FreshReads(Generic[T]):
    """Results of reads of committed rows (a query of several tables, say), kept while no
    connection commits to the SQLite file; elsewhere every get reads.

    The stamp is taken before the read: a commit landing during the read changes the stamp
    again, so the value is read anew next time rather than trusted stale.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[Any, tuple[object, T]] = OrderedDict()

    async def get(self, store: Store, key: Any, read: Callable[[], Awaitable[T]]) -> T:
        reader = store.reader
        if reader is None:
            return await read()
        try:
            stamp = reader.stamp()
        except ReaderBusy:
            return await read()
        entry = self._entries.get(key)
        if entry is not None and entry[0] == stamp:
            self._entries.move_to_end(key)
            return entry[1]
        value = await read()
        self._entries[key] = (stamp, value)
        self._entries.move_to_end(key)
        if len(self._entries) > _MAX_ENTRIES:
            self._entries.popitem(last=False)
        return value
