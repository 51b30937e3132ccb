"""Tables and versioned migrations. A migration is applied once, in order, under a lock."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
)
from sqlalchemy.engine import Connection

__all__ = ["MIGRATIONS", "documents", "journal", "metadata", "schema_migrations"]

metadata = MetaData()

schema_migrations = Table(
    "plangate_schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("applied_at", Float, nullable=False),
)

# Versioned JSON documents with compare-and-set: plans, selections, protocol segments,
# HITL resolutions. ``version`` increases by one on every write.
documents = Table(
    "plangate_documents",
    metadata,
    Column("kind", String(64), primary_key=True),
    Column("key", String(512), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("data", JSON, nullable=False),
    Column("updated_at", Float, nullable=False),
)

journal = Table(
    "plangate_journal",
    metadata,
    Column(
        "seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("scope", String(512), nullable=False, index=True),
    Column("kind", String(128), nullable=False),
    Column("subject", String(256), nullable=False),
    Column("from_state", String(64)),
    Column("to_state", String(64)),
    Column("actor", String(128), nullable=False),
    Column("at", Float, nullable=False),
    Column("revision", Integer),
    Column("sha256", String(64)),
    Column("detail", JSON, nullable=False),
)


def _create(*tables: Table) -> Callable[[Connection], None]:
    def apply(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return apply


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "documents and journal", _create(documents, journal)),
]
