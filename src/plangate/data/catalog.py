"""Named data sources behind read-only DuckDB connections.

A source is a DuckDB database file (all its tables and views), a CSV file or a Parquet
file (one table named after the file stem). Every query runs on a cursor of the
source's locked-down connection:

* DuckDB files are opened with ``read_only=True``: the engine refuses writes.
* CSV and Parquet files are loaded once into an in-memory database. Each cursor works
  inside a transaction that is always rolled back, so nothing a statement changes
  survives it; the SQL guard refuses writes before they get that far.
* On every connection, external access is disabled and the configuration locked
  before any query runs: no statement can read or write files, attach databases,
  install extensions or switch these settings back.
* Every connection runs under a ``memory_limit`` and a ``threads`` limit, and every
  cursor under a time limit: past it the running statement is interrupted and
  :class:`DataError` ``QUERY_TIMEOUT`` raised, leaving the connection usable.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import duckdb

from plangate.errors import CodedError, ErrorCode

from ._duck import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_THREADS,
    LOCKED_CONFIG,
    check_limits,
    connect_read_only,
    is_config_conflict,
    limits_config,
)
from .sample import SAMPLE_DESCRIPTION, SAMPLE_VERSION, build_sample_database

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_QUERY_TIMEOUT_S",
    "DEFAULT_THREADS",
    "DataCatalog",
    "DataError",
    "DataSource",
    "default_cache_dir",
    "quote_table",
]

DEFAULT_QUERY_TIMEOUT_S = 60.0
"""The longest one tool call's queries on a cursor may run before they are interrupted."""

SourceKind = Literal["duckdb", "csv", "parquet"]

SAMPLE_SOURCE = "sample"
_KINDS: dict[str, SourceKind] = {".duckdb": "duckdb", ".csv": "csv", ".parquet": "parquet"}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


_HINTS: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_SOURCE: "call list_data_sources and use one of the names it gives",
    ErrorCode.UNKNOWN_TABLE: "call inspect_schema on the source and use a table it lists",
    ErrorCode.UNKNOWN_COLUMN: "call inspect_schema and use a column it lists",
    ErrorCode.SOURCE_CLOSED: "start a new session; this source was closed",
    ErrorCode.QUERY_TIMEOUT: "narrow the query and run it again",
    ErrorCode.SQL_PARSE_ERROR: "write one valid SELECT statement",
    ErrorCode.SQL_MULTIPLE_STATEMENTS: "send one SELECT statement per call",
    ErrorCode.SQL_NOT_READ_ONLY: "only SELECT (and WITH ... SELECT) runs here",
    ErrorCode.SQL_FORBIDDEN_FUNCTION: "query the registered tables; file and system functions "
    "are refused",
    ErrorCode.SQL_UNKNOWN_TABLE: "use the tables list_data_sources and inspect_schema give",
}


class DataError(CodedError):
    """Bad input to the catalog or a failed data operation; ``code`` names the kind."""

    def __init__(self, code: ErrorCode, message: str, hint: str | None = None) -> None:
        super().__init__(code, message, _HINTS.get(code, "") if hint is None else hint)


@dataclass
class DataSource:
    """One registered source. ``tables`` are the names queries may use."""

    name: str
    kind: SourceKind
    path: Path
    tables: tuple[str, ...]
    description: str = ""
    _conn: duckdb.DuckDBPyConnection | None = field(default=None, repr=False, compare=False)


def default_cache_dir() -> Path:
    """Where the sample database is built: ``$PLANGATE_DATA_DIR`` or the user cache."""
    configured = os.environ.get("PLANGATE_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "plangate" / "data"


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_table(name: str) -> str:
    """Quote a catalog table name; ``schema.table`` names are quoted part by part."""
    return ".".join(quote_ident(part) for part in name.split("."))


def _table_name_for(path: Path) -> str:
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    name = re.sub(r"\W", "_", stem).strip("_").lower() or "data"
    return name if name[0].isalpha() else f"t_{name}"


def _lock_down(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")


_MEMORY_CONFIG = {
    key: value
    for key, value in LOCKED_CONFIG.items()
    if key not in ("enable_external_access", "lock_configuration")
}


class _Watchdog:
    """Interrupts a cursor once ``seconds`` have passed, and keeps interrupting it.

    An interrupt that lands between two statements is lost (DuckDB interrupts only a
    running one), so after the deadline the cursor is interrupted again every
    ``_REPEAT_S`` until :meth:`stop`: no statement started late escapes the limit.
    """

    _REPEAT_S = 0.1

    def __init__(self, cursor: duckdb.DuckDBPyConnection, seconds: float) -> None:
        self._cursor = cursor
        self._seconds = seconds
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._watch, name="duckdb-watchdog", daemon=True)

    def _watch(self) -> None:
        wait = self._seconds
        while not self._stopped.wait(wait):
            # Under the lock, so the cursor is never interrupted after stop() returned
            # (the caller rolls back and closes it next).
            with self._lock:
                if self._stopped.is_set():
                    return
                self.fired = True
                self._cursor.interrupt()
            wait = self._REPEAT_S

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped.set()


class DataCatalog:
    """Named data sources, each queried through a read-only, locked-down connection.

    ``default_path``: the sample database file to use for the ``sample`` source;
    ``cache_dir``: the directory to build it in when ``default_path`` is not given
    (default :func:`default_cache_dir`). The sample is built on first use and reused
    after. ``include_sample=False`` starts with no sources.

    Limits: ``memory_limit`` (DuckDB size syntax, e.g. ``'1GB'``) and ``threads`` apply
    to every connection the catalog opens; ``query_timeout_s`` bounds the queries of
    each :meth:`cursor`. DuckDB opens a file once per process, so two catalogs that
    share a ``.duckdb`` file must use the same ``memory_limit`` and ``threads``.
    """

    def __init__(
        self,
        default_path: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        include_sample: bool = True,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        threads: int = DEFAULT_THREADS,
        query_timeout_s: float = DEFAULT_QUERY_TIMEOUT_S,
    ) -> None:
        check_limits(memory_limit, threads)
        if isinstance(query_timeout_s, bool) or not isinstance(query_timeout_s, int | float):
            raise ValueError("query_timeout_s must be a number of seconds")
        if not 0 < query_timeout_s < float("inf"):
            raise ValueError("query_timeout_s must be positive and finite")
        self.memory_limit = memory_limit
        self.threads = threads
        self.query_timeout_s = float(query_timeout_s)
        self._sources: dict[str, DataSource] = {}
        self._lock = threading.RLock()
        if include_sample:
            if default_path is None:
                directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
                default_path = directory / f"sample-v{SAMPLE_VERSION}.duckdb"
            elif Path(default_path).is_dir():
                default_path = Path(default_path) / f"sample-v{SAMPLE_VERSION}.duckdb"
            path = build_sample_database(default_path, memory_limit=memory_limit, threads=threads)
            self.register(SAMPLE_SOURCE, path, description=SAMPLE_DESCRIPTION)

    # -- registration -------------------------------------------------------------

    def register(
        self, name: str, path: str | os.PathLike[str], *, description: str = ""
    ) -> DataSource:
        """Register a ``.duckdb``, ``.csv`` or ``.parquet`` file as source ``name``."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise DataError(
                ErrorCode.INVALID_NAME,
                f"invalid source name {name!r}: use a letter followed by letters, digits "
                "or underscores (at most 64 characters)",
            )
        file = Path(path).expanduser()
        kind = _KINDS.get(file.suffix.lower())
        if kind is None:
            supported = ", ".join(sorted(_KINDS))
            raise DataError(
                ErrorCode.UNSUPPORTED_FORMAT,
                f"cannot register {file.name!r}: unsupported file type "
                f"{file.suffix or '(none)'!r}; supported: {supported}",
            )
        if not file.is_file():
            raise DataError(ErrorCode.FILE_NOT_FOUND, f"no such file: {file}")
        file = file.resolve()
        with self._lock:
            if name in self._sources:
                raise DataError(
                    ErrorCode.DUPLICATE_SOURCE,
                    f"a source named {name!r} is already registered "
                    f"({self._sources[name].path.name}); pick another name",
                )
            conn, tables = self._open(kind, file)
            source = DataSource(name, kind, file, tables, description, _conn=conn)
            self._sources[name] = source
        return source

    def _open(
        self, kind: SourceKind, file: Path
    ) -> tuple[duckdb.DuckDBPyConnection, tuple[str, ...]]:
        limits = limits_config(self.memory_limit, self.threads)
        try:
            if kind == "duckdb":
                conn = connect_read_only(file, memory_limit=self.memory_limit, threads=self.threads)
            else:
                # Loading the file needs file access; _lock_down() then takes it away.
                conn = duckdb.connect(":memory:", config={**_MEMORY_CONFIG, **limits})
        except duckdb.Error as err:
            if is_config_conflict(err):
                raise DataError(
                    ErrorCode.CONFIG_CONFLICT,
                    f"{file.name!r} is already open in this process with other limits; "
                    f"open it with the same memory_limit and threads (this catalog: "
                    f"{self.memory_limit}, {self.threads})",
                ) from None
            raise DataError(ErrorCode.INVALID_FILE, f"cannot open {file.name!r}: {err}") from None
        try:
            if kind != "duckdb":
                table = _table_name_for(file)
                reader = "read_csv_auto" if kind == "csv" else "read_parquet"
                conn.execute(
                    f"CREATE TABLE {quote_ident(table)} AS SELECT * FROM {reader}(?)",
                    [str(file)],
                )
                conn.execute(
                    f"COMMENT ON TABLE {quote_ident(table)} IS "
                    f"'Loaded from {file.name.replace(chr(39), chr(39) * 2)}'"
                )
                _lock_down(conn)
            tables = self._list_tables(conn)
        except duckdb.Error as err:
            conn.close()
            raise DataError(
                ErrorCode.INVALID_FILE, f"cannot read {file.name!r} as {kind}: {err}"
            ) from None
        if not tables:
            conn.close()
            raise DataError(ErrorCode.INVALID_FILE, f"{file.name!r} contains no tables")
        return conn, tables

    @staticmethod
    def _list_tables(conn: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
        rows = conn.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() "
            "WHERE database_name = current_database() AND NOT internal AND NOT temporary "
            "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
            "WHERE database_name = current_database() AND NOT internal AND NOT temporary"
        ).fetchall()
        names = (table if schema == "main" else f"{schema}.{table}" for schema, table in rows)
        return tuple(sorted(names))

    def unregister(self, name: str) -> None:
        """Remove a source and close its connection."""
        with self._lock:
            source = self.source(name)
            del self._sources[name]
        if source._conn is not None:
            source._conn.close()

    def close(self) -> None:
        """Close every source's connection; the catalog is empty afterwards."""
        with self._lock:
            sources = list(self._sources.values())
            self._sources.clear()
        for source in sources:
            if source._conn is not None:
                source._conn.close()

    def __enter__(self) -> DataCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookup -------------------------------------------------------------------

    def sources(self) -> list[DataSource]:
        with self._lock:
            return list(self._sources.values())

    def source(self, name: str) -> DataSource:
        with self._lock:
            found = self._sources.get(name)
            if found is None:
                listed = ", ".join(sorted(self._sources)) or "none"
                raise DataError(
                    ErrorCode.UNKNOWN_SOURCE, f"unknown data source {name!r}; available: {listed}"
                )
            return found

    def tables(self, source: str) -> tuple[str, ...]:
        return self.source(source).tables

    def resolve_table(self, source: str, table: str) -> str:
        """The catalog's spelling of ``table`` in ``source`` (case-insensitive)."""
        tables = self.tables(source)
        wanted = str(table).strip().lower()
        if wanted.startswith("main."):
            wanted = wanted[len("main.") :]
        for name in tables:
            if name.lower() == wanted:
                return name
        raise DataError(
            ErrorCode.UNKNOWN_TABLE,
            f"source {source!r} has no table {table!r}; tables: {', '.join(tables)}",
        )

    # -- querying -----------------------------------------------------------------

    @contextmanager
    def cursor(
        self, source: str, *, timeout_s: float | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A fresh cursor on ``source``'s connection, inside a rolled-back transaction.

        What runs on the cursor must finish within ``timeout_s`` seconds (default and
        ceiling: ``query_timeout_s``). Past that the running statement is interrupted
        and :class:`DataError` ``QUERY_TIMEOUT`` raised; the source stays usable.
        Call this off the event loop: statements block the calling thread.
        """
        found = self.source(source)
        if found._conn is None:
            raise DataError(ErrorCode.SOURCE_CLOSED, f"source {source!r} is closed")
        limit = self.query_timeout_s
        if timeout_s is not None and not math.isnan(timeout_s):
            limit = min(max(timeout_s, 0.001), limit)
        cur = found._conn.cursor()
        watchdog = _Watchdog(cur, limit)
        try:
            cur.begin()
            watchdog.start()
            yield cur
        except duckdb.Error:
            watchdog.stop()
            if watchdog.fired:
                raise DataError(
                    ErrorCode.QUERY_TIMEOUT,
                    f"the query was cancelled after {limit:g} s, the time limit; narrow it: "
                    "aggregate more, filter earlier, select fewer columns, or check the "
                    "joins for a row explosion",
                ) from None
            raise
        finally:
            watchdog.stop()
            with suppress(duckdb.Error):
                cur.rollback()
            cur.close()

    def row_count(self, source: str, table: str) -> int:
        name = self.resolve_table(source, table)
        with self.cursor(source) as cur:
            row = cur.execute(f"SELECT count(*) FROM {quote_table(name)}").fetchone()
        return int(row[0]) if row else 0

    def describe(self, source: str, table: str) -> dict[str, Any]:
        """Columns (name, type, nullable, comment), comment and row count of a table."""
        name = self.resolve_table(source, table)
        schema, _, short = name.rpartition(".")
        schema = schema or "main"
        with self.cursor(source) as cur:
            comment_row = cur.execute(
                "SELECT comment FROM duckdb_tables() WHERE database_name = current_database() "
                "AND schema_name = ? AND table_name = ? UNION ALL "
                "SELECT comment FROM duckdb_views() WHERE database_name = current_database() "
                "AND schema_name = ? AND view_name = ?",
                [schema, short, schema, short],
            ).fetchone()
            columns = cur.execute(
                "SELECT column_name, data_type, is_nullable, comment FROM duckdb_columns() "
                "WHERE database_name = current_database() AND schema_name = ? "
                "AND table_name = ? ORDER BY column_index",
                [schema, short],
            ).fetchall()
            count = cur.execute(f"SELECT count(*) FROM {quote_table(name)}").fetchone()
        described_columns = []
        for col_name, col_type, nullable, col_comment in columns:
            entry: dict[str, Any] = {"name": col_name, "type": col_type, "nullable": nullable}
            if col_comment:
                entry["comment"] = col_comment
            described_columns.append(entry)
        result: dict[str, Any] = {
            "name": name,
            "row_count": int(count[0]) if count else 0,
            "columns": described_columns,
        }
        if comment_row and comment_row[0]:
            result["comment"] = comment_row[0]
        return result
