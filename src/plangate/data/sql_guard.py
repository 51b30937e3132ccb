"""Static check that a SQL string is a single read-only query over catalog tables.

Pure: parses with sqlglot and never touches a database. The guard accepts exactly one
``SELECT`` statement (``WITH ... SELECT`` and set operations of selects included),
rejects every statement that writes or changes session state, rejects functions that
reach the file system or other databases, and, given the catalog's table names,
rejects references to anything else.

The query that runs is the one the guard parsed: :attr:`ValidatedQuery.sql` is
sqlglot's rendering of the validated tree, so the text executed cannot differ from the
text checked through a parser disagreement.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from plangate.errors import ErrorCode

from .catalog import DataError

__all__ = [
    "SQL_FORBIDDEN_FUNCTION",
    "SQL_MULTIPLE_STATEMENTS",
    "SQL_NOT_READ_ONLY",
    "SQL_PARSE_ERROR",
    "SQL_UNKNOWN_TABLE",
    "SqlGuardError",
    "ValidatedQuery",
    "query_id_for",
    "validate_readonly_sql",
]

SQL_PARSE_ERROR = ErrorCode.SQL_PARSE_ERROR
SQL_MULTIPLE_STATEMENTS = ErrorCode.SQL_MULTIPLE_STATEMENTS
SQL_NOT_READ_ONLY = ErrorCode.SQL_NOT_READ_ONLY
SQL_FORBIDDEN_FUNCTION = ErrorCode.SQL_FORBIDDEN_FUNCTION
SQL_UNKNOWN_TABLE = ErrorCode.SQL_UNKNOWN_TABLE

# Functions that read or write files, reach other databases or the network, run SQL
# given as a string, or expose the environment.
_FORBIDDEN_FUNCTIONS = frozenset(
    {
        "read_csv", "read_csv_auto", "sniff_csv", "read_parquet", "parquet_scan",
        "read_json", "read_json_auto", "read_json_objects", "read_json_objects_auto",
        "read_ndjson", "read_ndjson_auto", "read_ndjson_objects", "read_text", "read_blob",
        "read_xlsx", "glob", "query", "query_table", "iceberg_scan", "delta_scan",
        "sqlite_scan", "sqlite_attach", "postgres_scan", "postgres_attach", "postgres_query",
        "mysql_scan", "mysql_query", "st_read", "getenv", "current_setting", "which_secret",
        "load_extension", "checkpoint", "force_checkpoint", "copy",
    }
)  # fmt: skip
_FORBIDDEN_PREFIXES = (
    "read_", "parquet_", "iceberg_", "delta_", "sqlite_", "postgres_", "mysql_",
    "pragma_", "duckdb_", "st_read", "http", "s3_", "azure_", "gcs_",
)  # fmt: skip
# Table functions that only generate rows.
_ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})

# Nodes that write, change the session, or are not queries at all.
_WRITE_NODES = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "Copy", "Command",
        "Pragma", "Set", "Attach", "Detach", "Install", "Use", "Transaction", "Commit",
        "Rollback", "LoadData", "Refresh", "Cache", "Uncache", "Analyze", "Into", "Grant",
        "Revoke", "TruncateTable", "Export", "Kill", "Describe", "Summarize", "Show",
    )
    if hasattr(exp, name)
)  # fmt: skip
_QUERY_ROOTS = (exp.Select, exp.SetOperation)
_QUERY_KEYWORDS = frozenset({"SELECT", "WITH", "FROM", "(", "VALUES", "TABLE"})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

# A table name that looks like a file path or URL (DuckDB scans `FROM 'data.csv'`).
_FILE_LIKE = re.compile(r"[/\\:]|\.[A-Za-z0-9]{1,8}$")


class SqlGuardError(DataError):
    """A query the guard refuses; ``code`` is one of the ``SQL_*`` codes."""


@dataclass(frozen=True)
class ValidatedQuery:
    """A query the guard accepted."""

    sql: str
    """The normalized SQL: sqlglot's rendering of the validated statement."""
    tables: tuple[str, ...]
    """Catalog tables the query reads, sorted, lower-cased."""
    query_id: str
    """Short sha256 of the normalized SQL; equal queries share an id."""
    original_sql: str


def query_id_for(normalized_sql: str) -> str:
    return "q_" + hashlib.sha256(normalized_sql.encode()).hexdigest()[:16]


def _display_name(node: exp.Func) -> str:
    return str(node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def _function_names(node: exp.Func) -> set[str]:
    return {type(node).__name__.lower(), _display_name(node)}


def _is_forbidden(name: str) -> bool:
    return name in _FORBIDDEN_FUNCTIONS or name.startswith(_FORBIDDEN_PREFIXES)


def _root_query(statement: exp.Expr) -> exp.Expr:
    while isinstance(statement, exp.Subquery | exp.Paren):
        statement = statement.this
    return statement


def _leading_keyword(sql: str, dialect: str) -> str | None:
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except TokenError:
        return None
    return tokens[0].text.upper() if tokens else None


def _describe(err: Exception) -> str:
    details = getattr(err, "errors", None) or []
    if details and isinstance(details[0], dict) and details[0].get("description"):
        first = details[0]
        return f"{first['description']} (line {first.get('line')}, column {first.get('col')})"
    return _ANSI.sub("", str(err)).strip()


def validate_readonly_sql(
    sql: str,
    dialect: str = "duckdb",
    known_tables: Iterable[str] | None = None,
) -> ValidatedQuery:
    """Check that ``sql`` is one read-only query; raise :class:`SqlGuardError` if not.

    ``known_tables``: the table names the query may read (case-insensitive); a table
    may also be written ``main.<name>``. ``None`` skips the unknown-table check.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise SqlGuardError(SQL_PARSE_ERROR, "the query is empty")
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, TokenError) as err:
        keyword = _leading_keyword(sql, dialect)
        if keyword and keyword not in _QUERY_KEYWORDS:
            raise SqlGuardError(
                SQL_NOT_READ_ONLY, f"only SELECT queries are allowed; got {keyword}"
            ) from None
        raise SqlGuardError(
            SQL_PARSE_ERROR, f"could not parse the query: {_describe(err)}"
        ) from None
    if not statements:
        raise SqlGuardError(SQL_PARSE_ERROR, "the query is empty")
    if len(statements) > 1:
        raise SqlGuardError(
            SQL_MULTIPLE_STATEMENTS,
            f"expected exactly one statement, got {len(statements)}; send one SELECT",
        )
    statement = statements[0]

    root = _root_query(statement)
    if not isinstance(root, _QUERY_ROOTS):
        kind = _leading_keyword(sql, dialect) or type(root).__name__.upper()
        raise SqlGuardError(
            SQL_NOT_READ_ONLY,
            f"only SELECT queries are allowed (WITH ... SELECT and UNION included); got {kind}",
        )
    for node in statement.walk():
        if isinstance(node, _WRITE_NODES):
            raise SqlGuardError(
                SQL_NOT_READ_ONLY,
                f"the query contains a {type(node).__name__.upper()} clause; only reads are allowed",
            )
        if isinstance(node, exp.Select) and node.args.get("into") is not None:
            raise SqlGuardError(SQL_NOT_READ_ONLY, "SELECT ... INTO writes a table")
        if isinstance(node, exp.Func):
            names = _function_names(node)
            bad = sorted(n for n in names if _is_forbidden(n))
            if bad:
                raise SqlGuardError(
                    SQL_FORBIDDEN_FUNCTION,
                    f"function {bad[0]}() is not allowed: queries may read catalog tables "
                    "only, not files, other databases or settings",
                )

    cte_names = {str(cte.alias_or_name).lower() for cte in statement.find_all(exp.CTE)}
    known = None if known_tables is None else {t.lower() for t in known_tables}
    tables: set[str] = set()
    for table in statement.find_all(exp.Table):
        if isinstance(table.this, exp.Func):
            names = _function_names(table.this)
            if not names & _ALLOWED_TABLE_FUNCTIONS:
                raise SqlGuardError(
                    SQL_FORBIDDEN_FUNCTION,
                    f"table function {_display_name(table.this)}() is not allowed; "
                    "query catalog tables",
                )
            continue
        if not table.name:
            continue
        parts = [part.lower() for part in (table.catalog, table.db) if part]
        if parts == ["main"]:
            parts = []
        name = ".".join([*parts, table.name.lower()])
        if not parts and name in cte_names:
            continue
        if _FILE_LIKE.search(table.name):
            raise SqlGuardError(
                SQL_FORBIDDEN_FUNCTION,
                f"{table.name!r} looks like a file or URL; queries may read catalog tables only",
            )
        if known is not None and name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise SqlGuardError(
                SQL_UNKNOWN_TABLE, f"unknown table {name!r}; available tables: {listed}"
            )
        tables.add(name)

    normalized = statement.sql(dialect=dialect)
    return ValidatedQuery(
        sql=normalized,
        tables=tuple(sorted(tables)),
        query_id=query_id_for(normalized),
        original_sql=sql,
    )
