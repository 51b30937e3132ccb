"""The data-analysis agent's tools: plain methods returning JSON-able dicts.

Every method reports failure as an error result (``plangate.errors``) and never raises, so a
model gets an answer it can act on. All SQL goes through
:func:`~plangate.data.sql_guard.validate_readonly_sql` and runs on the catalog's
read-only connections, under its memory, thread and time limits (a query past its time
limit answers ``QUERY_TIMEOUT``). The methods block: :func:`~plangate.data.data_adk_tools`
runs them off the event loop.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import json
import math
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import duckdb

from plangate.errors import ErrorCode, error_result
from plangate.policy.effects import read_only

from .catalog import DataCatalog, DataError, quote_ident, quote_table
from .sql_guard import validate_readonly_sql

__all__ = ["TOOL_NAMES", "DataTools", "canonical_json", "to_jsonable"]

TOOL_NAMES = (
    "list_data_sources",
    "inspect_schema",
    "lookup_values",
    "preview_table",
    "plan_query",
    "run_sql_readonly",
    "validate_result",
    "bind_evidence",
)

MAX_ROWS_CAP = 5000
PREVIEW_CAP = 100
LOOKUP_CAP = 100
EXPLAIN_CHARS = 4000
_KEEP_RUNS = 256

F = TypeVar("F", bound=Callable[..., dict[str, Any]])


def to_jsonable(value: Any) -> Any:
    """Convert a DuckDB value to plain JSON: dates as ISO strings, Decimals as floats.

    Non-finite floats become ``None`` (JSON has no NaN); bytes become base64.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return to_jsonable(float(value))
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    return str(value)


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, JSON-safe values."""
    return json.dumps(to_jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _error(code: ErrorCode, message: str, hint: str = "") -> dict[str, Any]:
    return error_result(code, message, hint)


def _first_lines(text: object, limit: int = 600) -> str:
    text = str(text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tool(method: F) -> F:
    """Turn raised errors into error results and declare the method read-only."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return method(*args, **kwargs)
        except DataError as err:  # SqlGuardError included
            return err.to_result()
        except duckdb.Error as err:
            return _error(ErrorCode.SQL_EXECUTION_ERROR, _first_lines(err))
        except Exception as err:
            return _error(ErrorCode.INTERNAL_ERROR, f"{type(err).__name__}: {_first_lines(err)}")

    return read_only(wrapper)  # type: ignore[return-value]


def _clamp_int(value: Any, low: int, high: int, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return max(low, min(high, number))


def _unique_columns(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        count = seen.get(name, 0) + 1
        seen[name] = count
        unique.append(name if count == 1 else f"{name}_{count}")
    return unique


_NUMERIC_TYPES = (
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "REAL", "NUMBER",
)  # fmt: skip


def _is_numeric_type(type_name: Any) -> bool:
    return str(type_name).upper().split("(")[0].strip() in _NUMERIC_TYPES


def _same_value(a: Any, b: Any) -> bool:
    numeric = (int, float)
    if isinstance(a, numeric) and isinstance(b, numeric):
        if isinstance(a, bool) or isinstance(b, bool):
            return a is b
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return canonical_json(a) == canonical_json(b)


class DataTools:
    """The data-analysis tools over a :class:`DataCatalog`.

    Keeps the results of recent ``run_sql_readonly`` calls (by query id) so that
    ``bind_evidence`` can check that cited rows really came out of a query.
    """

    def __init__(self, catalog: DataCatalog | None = None) -> None:
        self.catalog = catalog if catalog is not None else DataCatalog()
        self._lock = threading.Lock()
        self._plans: dict[str, dict[str, Any]] = {}
        self._runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._evidence: dict[str, dict[str, Any]] = {}

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """Evidence records bound so far, oldest first."""
        with self._lock:
            return list(self._evidence.values())

    # -- discovery ------------------------------------------------------------------

    @_tool
    def list_data_sources(self) -> dict[str, Any]:
        """List the data sources you can query, with their tables and row counts.

        Returns:
          {"sources": [{"name", "kind", "file", "description", "tables": [{"name",
          "row_count"}]}]}. Use a source's name as the `source` argument of the other
          data tools.
        """
        sources = []
        for source in self.catalog.sources():
            tables = [
                {"name": table, "row_count": self.catalog.row_count(source.name, table)}
                for table in source.tables
            ]
            entry: dict[str, Any] = {
                "name": source.name,
                "kind": source.kind,
                "file": source.path.name,
                "tables": tables,
            }
            if source.description:
                entry["description"] = source.description
            sources.append(entry)
        return {"sources": sources}

    @_tool
    def inspect_schema(self, source: str, table: str | None = None) -> dict[str, Any]:
        """Show the columns (name, type), row count and documentation of tables.

        Table and column comments carry definitions (for example how revenue is
        computed); read them before writing a query.

        Args:
          source: The data source name, from list_data_sources.
          table: One table to describe; omit to describe every table in the source.

        Returns:
          {"source", "tables": [{"name", "row_count", "comment", "columns": [{"name",
          "type", "nullable", "comment"}]}]}.
        """
        found = self.catalog.source(source)
        names = [table] if table else list(found.tables)
        result: dict[str, Any] = {
            "source": found.name,
            "tables": [self.catalog.describe(found.name, name) for name in names],
        }
        if found.description:
            result["description"] = found.description
        return result

    @_tool
    def lookup_values(
        self,
        source: str,
        table: str,
        column: str,
        limit: int = 20,
        search: str | None = None,
    ) -> dict[str, Any]:
        """List the distinct values of a column with how often each occurs.

        Use it to learn the exact spelling of codes and categories (for example order
        statuses) before filtering on them.

        Args:
          source: The data source name.
          table: The table name.
          column: The column name.
          limit: How many values to return, most frequent first (at most 100).
          search: Only values whose text contains this, case-insensitively.

        Returns:
          {"source", "table", "column", "values": [{"value", "count"}],
          "distinct_count", "truncated"}.
        """
        name = self.catalog.resolve_table(source, table)
        columns = {
            c["name"].lower(): c["name"] for c in self.catalog.describe(source, name)["columns"]
        }
        col = columns.get(str(column).lower())
        if col is None:
            return _error(
                ErrorCode.UNKNOWN_COLUMN,
                f"table {name!r} has no column {column!r}; columns: {', '.join(columns.values())}",
            )
        limit = _clamp_int(limit, 1, LOOKUP_CAP, 20)
        qcol, qtable = quote_ident(col), quote_table(name)
        where, params = "", []
        if search:
            where = f"WHERE contains(lower(CAST({qcol} AS VARCHAR)), lower(?))"
            params = [str(search)]
        with self.catalog.cursor(source) as cur:
            rows = cur.execute(
                f"SELECT {qcol} AS value, count(*) AS n FROM {qtable} {where} "
                f"GROUP BY 1 ORDER BY n DESC, value NULLS LAST LIMIT {limit}",
                params,
            ).fetchall()
            distinct = cur.execute(
                f"SELECT count(*) FROM (SELECT DISTINCT {qcol} FROM {qtable} {where})", params
            ).fetchone()
        distinct_count = int(distinct[0]) if distinct else 0
        return {
            "source": source,
            "table": name,
            "column": col,
            "values": [{"value": to_jsonable(v), "count": int(n)} for v, n in rows],
            "distinct_count": distinct_count,
            "truncated": distinct_count > len(rows),
        }

    @_tool
    def preview_table(self, source: str, table: str, limit: int = 10) -> dict[str, Any]:
        """Show the first rows of a table, to see what the data looks like.

        Args:
          source: The data source name.
          table: The table name.
          limit: Number of rows (at most 100).

        Returns:
          {"source", "table", "columns", "rows", "row_count", "total_rows"}.
        """
        name = self.catalog.resolve_table(source, table)
        limit = _clamp_int(limit, 1, PREVIEW_CAP, 10)
        with self.catalog.cursor(source) as cur:
            cur.execute(f"SELECT * FROM {quote_table(name)} LIMIT {limit}")
            columns = _unique_columns([d[0] for d in cur.description or []])
            raw = cur.fetchall()
            total = cur.execute(f"SELECT count(*) FROM {quote_table(name)}").fetchone()
        rows = [dict(zip(columns, map(to_jsonable, row), strict=True)) for row in raw]
        return {
            "source": source,
            "table": name,
            "columns": columns,
            "rows": rows,
            "row_count": len(rows),
            "total_rows": int(total[0]) if total else 0,
        }

    # -- queries --------------------------------------------------------------------

    def _validate(self, source: str, sql: str) -> Any:
        return validate_readonly_sql(sql, known_tables=self.catalog.tables(source))

    @_tool
    def plan_query(self, source: str, sql: str, purpose: str) -> dict[str, Any]:
        """Check a read-only SQL query without running it, and get its query plan.

        The query must be a single SELECT (WITH and UNION allowed) over the source's
        tables. Returns a query_id that identifies this exact query; run it with
        run_sql_readonly.

        Args:
          source: The data source name.
          sql: The SELECT statement (DuckDB SQL).
          purpose: What the query is meant to answer, in one sentence.

        Returns:
          {"query_id", "sql" (normalized), "tables", "explain", "purpose", "valid": true}.
        """
        if not str(purpose or "").strip():
            return _error(ErrorCode.PURPOSE_REQUIRED, "say what the query is meant to answer")
        validated = self._validate(source, sql)
        with self.catalog.cursor(source) as cur:
            plan_rows = cur.execute(f"EXPLAIN {validated.sql}").fetchall()
        explain = "\n".join(str(row[-1]) for row in plan_rows)
        if len(explain) > EXPLAIN_CHARS:
            explain = explain[:EXPLAIN_CHARS] + "\n... (plan truncated)"
        with self._lock:
            self._plans[validated.query_id] = {
                "source": source,
                "sql": validated.sql,
                "purpose": purpose,
            }
        return {
            "query_id": validated.query_id,
            "source": source,
            "sql": validated.sql,
            "tables": list(validated.tables),
            "explain": explain,
            "purpose": purpose,
            "valid": True,
        }

    @_tool
    def run_sql_readonly(
        self, source: str, sql: str, max_rows: int = 200, timeout_s: float = 10
    ) -> dict[str, Any]:
        """Run one read-only SELECT query and return its rows.

        Aggregate in SQL rather than fetching raw rows: results longer than max_rows
        are cut off and flagged as truncated.

        Args:
          source: The data source name.
          sql: The SELECT statement (DuckDB SQL), normally one checked by plan_query.
          max_rows: The most rows to return (at most 5000).
          timeout_s: Seconds before the query is cancelled (at most the data
            catalog's limit, 60 unless configured otherwise).

        Returns:
          {"query_id", "sql", "columns", "column_types", "rows" (list of objects),
          "row_count", "truncated", "note" (when truncated), "planned"}.
        """
        validated = self._validate(source, sql)
        max_rows = _clamp_int(max_rows, 1, MAX_ROWS_CAP, 200)
        try:
            timeout = float(timeout_s)
        except (TypeError, ValueError):
            timeout = 10.0
        # The catalog caps the limit, interrupts the cursor past it and raises
        # QUERY_TIMEOUT.
        with self.catalog.cursor(source, timeout_s=timeout) as cur:
            cur.execute(validated.sql)
            description = cur.description or []
            raw = cur.fetchmany(max_rows + 1)
        columns = _unique_columns([d[0] for d in description])
        truncated = len(raw) > max_rows
        rows = [dict(zip(columns, map(to_jsonable, row), strict=True)) for row in raw[:max_rows]]
        result: dict[str, Any] = {
            "query_id": validated.query_id,
            "source": source,
            "sql": validated.sql,
            "tables": list(validated.tables),
            "columns": columns,
            "column_types": [str(d[1]) for d in description],
            "rows": rows,
            "row_count": len(rows),
            "truncated": truncated,
            "planned": validated.query_id in self._plans,
        }
        if truncated:
            result["note"] = (
                f"Only the first {max_rows} rows are shown; the result has more. Aggregate "
                "or filter in SQL instead of reading raw rows; do not compute totals from "
                "a truncated result."
            )
        with self._lock:
            self._runs[validated.query_id] = {"columns": columns, "rows": rows}
            self._runs.move_to_end(validated.query_id)
            while len(self._runs) > _KEEP_RUNS:
                self._runs.popitem(last=False)
        return result

    # -- checking -------------------------------------------------------------------

    @_tool
    def validate_result(
        self, result: dict[str, Any], expectations: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Sanity-check a run_sql_readonly result before drawing conclusions from it.

        Checks that it has rows, is not truncated, has no null key values and that its
        numbers are finite.

        Args:
          result: The dict returned by run_sql_readonly (at least "rows").
          expectations: Optional checks: "min_rows", "max_rows" (ints),
            "required_columns", "key_columns", "non_negative" (lists of column names),
            "allow_empty" (bool). Key columns default to the non-numeric columns.

        Returns:
          {"valid": bool, "issues": [str], "warnings": [str], "row_count"}. Issues
          make the result invalid; warnings are worth a look.
        """
        if not isinstance(result, dict):
            return {"valid": False, "issues": ["the result is not an object"], "row_count": 0}
        expect = expectations if isinstance(expectations, dict) else {}
        issues: list[str] = []
        warnings: list[str] = []
        if result.get("error"):
            issues.append(f"the result is an error: {result['error']}")
        rows = result.get("rows")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            issues.append("the result has no list of row objects under 'rows'")
            return {"valid": False, "issues": issues, "row_count": 0}
        columns = list(result.get("columns") or (rows[0].keys() if rows else []))

        if not rows and not expect.get("allow_empty"):
            issues.append("the result is empty: check filters, join keys and value spellings")
        if result.get("truncated"):
            issues.append("the result is truncated: totals or rankings from it are incomplete")
        if isinstance(expect.get("min_rows"), int) and len(rows) < expect["min_rows"]:
            issues.append(f"expected at least {expect['min_rows']} rows, got {len(rows)}")
        if isinstance(expect.get("max_rows"), int) and len(rows) > expect["max_rows"]:
            issues.append(f"expected at most {expect['max_rows']} rows, got {len(rows)}")
        for col in expect.get("required_columns") or []:
            if col not in columns:
                issues.append(f"missing expected column {col!r}")

        def is_number(v: Any) -> bool:
            return isinstance(v, int | float | Decimal) and not isinstance(v, bool)

        types = result.get("column_types")
        if isinstance(types, list) and len(types) == len(columns):
            numeric = {c for c, t in zip(columns, types, strict=True) if _is_numeric_type(t)}
        else:
            numeric = {c for c in columns if any(is_number(r.get(c)) for r in rows)}
        keys = expect.get("key_columns")
        if keys is None:
            keys = [c for c in columns if c not in numeric]
        for col in keys:
            nulls = sum(1 for r in rows if r.get(col) is None)
            if nulls:
                issues.append(f"key column {col!r} is null in {nulls} row(s)")
        if expect.get("key_columns") and rows:
            seen = {canonical_json([r.get(c) for c in keys]) for r in rows}
            if len(seen) < len(rows):
                issues.append(
                    f"key columns {list(keys)} repeat across rows: check for a fan-out join"
                )
        for col in sorted(numeric):
            bad = sum(
                1
                for r in rows
                if isinstance(r.get(col), float | Decimal) and not math.isfinite(r[col])
            )
            if bad:
                issues.append(f"numeric column {col!r} has {bad} non-finite value(s)")
            mixed = sum(1 for r in rows if r.get(col) is not None and not is_number(r.get(col)))
            if mixed:
                issues.append(f"numeric column {col!r} has {mixed} non-numeric value(s)")
            nulls = sum(1 for r in rows if r.get(col) is None)
            if nulls:
                warnings.append(
                    f"numeric column {col!r} is null in {nulls} row(s): an empty group, "
                    "an unmatched outer join or a non-finite value"
                )
        for col in expect.get("non_negative") or []:
            negative = sum(1 for r in rows if is_number(r.get(col)) and r[col] < 0)
            if negative:
                issues.append(f"column {col!r} is negative in {negative} row(s)")
        return {
            "valid": not issues,
            "issues": issues,
            "warnings": warnings,
            "row_count": len(rows),
        }

    @_tool
    def bind_evidence(
        self, claim: str, query_id: str, rows: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Record the query rows that support a claim, for citing in the final answer.

        The query must have been run with run_sql_readonly, and every row given must
        match a row of its result (a row may quote a subset of the columns).

        Args:
          claim: The statement the rows support, in one sentence.
          query_id: The query_id returned by run_sql_readonly.
          rows: The supporting rows, copied from that result.

        Returns:
          {"evidence_id", "claim", "query_id", "digest" (sha256 of the rows'
          canonical JSON), "row_count"}.
        """
        if not str(claim or "").strip():
            return _error(ErrorCode.CLAIM_REQUIRED, "state the claim the rows support")
        if (
            not isinstance(rows, list)
            or not rows
            or not all(isinstance(r, dict) and r for r in rows)
        ):
            return _error(
                ErrorCode.EVIDENCE_EMPTY, "give at least one non-empty row object from the result"
            )
        with self._lock:
            run = self._runs.get(query_id)
        if run is None:
            return _error(
                ErrorCode.UNKNOWN_QUERY,
                f"no result for query_id {query_id!r} in this session; "
                "run the query with run_sql_readonly first",
            )
        for index, row in enumerate(rows):
            unknown = [k for k in row if k not in run["columns"]]
            if unknown:
                return _error(
                    ErrorCode.EVIDENCE_MISMATCH,
                    f"row {index} has columns the result does not: {unknown}",
                )
            if not any(
                all(_same_value(to_jsonable(v), got.get(k)) for k, v in row.items())
                for got in run["rows"]
            ):
                return _error(
                    ErrorCode.EVIDENCE_MISMATCH,
                    f"row {index} does not match any row returned by query {query_id}",
                )
        digest = hashlib.sha256(canonical_json(rows).encode()).hexdigest()
        evidence_id = (
            "ev_" + hashlib.sha256(f"{query_id}\n{claim}\n{digest}".encode()).hexdigest()[:16]
        )
        record = {
            "evidence_id": evidence_id,
            "claim": claim,
            "query_id": query_id,
            "digest": digest,
            "row_count": len(rows),
        }
        with self._lock:
            self._evidence[evidence_id] = record
        return dict(record)
