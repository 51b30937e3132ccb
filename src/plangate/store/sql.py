"""Statements written once as SQL text, run on ``sqlite3`` directly where plangate holds
the connection.

Building a SQLAlchemy statement, computing its cache key, binding its parameters and
wrapping its result costs 30-60 us of Python per execution: several times what SQLite
takes for a point read or a one-row write. The statements every run makes (its lease,
its intent binding) are therefore plain SQL with named parameters (``:name``) that
SQLite and PostgreSQL both accept, and run:

- on a SQLite file, on the ``sqlite3`` connection plangate opened (the event loop's
  reader, the commit connection): the connection wrappers of ``Store.read`` and of a
  transaction in ``plangate.store.writes`` carry it as ``raw``;
- anywhere else (the async engine: PostgreSQL, or a SQLite file whose reader is busy)
  through SQLAlchemy's ``text()``, on the connection and in the transaction given.

Text parameters are cleaned on both paths, as every engine cleans them
(``plangate.store.storable``). Rows come back as tuples, columns in the statement's order.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import TextClause, text

from plangate.store.storable import clean_parameters

__all__ = ["Sql", "changed", "fetch_all", "fetch_one"]

_NAME = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


class Sql:
    """One statement: its text with ``:name`` parameters, and SQLAlchemy's form of it."""

    __slots__ = ("clause", "text")

    def __init__(self, sql: str) -> None:
        self.text = sql
        self.clause: TextClause = text(sql)

    def numbered(self, order: Sequence[str]) -> str:
        """The text with ``$1``, ``$2``... for asyncpg, numbered by their place in
        ``order`` (every parameter of the statement must be there)."""
        return _NAME.sub(lambda m: f"${order.index(m.group(1)) + 1}", self.text)

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"


def _raw(conn: Any) -> sqlite3.Connection | None:
    return getattr(conn, "raw", None)


async def fetch_all(conn: Any, sql: Sql, parameters: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row ``sql`` returns on ``conn``."""
    raw = _raw(conn)
    if raw is not None:
        return raw.execute(sql.text, clean_parameters(parameters)).fetchall()
    result = await conn.execute(sql.clause, dict(parameters))
    return [tuple(row) for row in result.all()]


async def fetch_one(conn: Any, sql: Sql, parameters: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The first row ``sql`` returns on ``conn``, or None. Reads only: a write with
    ``RETURNING`` takes ``fetch_all``, since ``sqlite3`` finishes a statement only once
    its every row is fetched."""
    raw = _raw(conn)
    if raw is not None:
        return raw.execute(sql.text, clean_parameters(parameters)).fetchone()
    row = (await conn.execute(sql.clause, dict(parameters))).first()
    return tuple(row) if row is not None else None


async def changed(conn: Any, sql: Sql, parameters: Mapping[str, Any]) -> int:
    """Run ``sql`` (a write without ``RETURNING``) on ``conn``: how many rows it changed."""
    raw = _raw(conn)
    if raw is not None:
        return raw.execute(sql.text, clean_parameters(parameters)).rowcount
    return (await conn.execute(sql.clause, dict(parameters))).rowcount
