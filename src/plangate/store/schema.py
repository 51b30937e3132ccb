"""Tables and versioned migrations. A migration is applied once, in order, under a lock."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.engine import Connection

__all__ = [
    "ADK_TABLES",
    "MIGRATIONS",
    "documents",
    "intent_heads",
    "intent_revisions",
    "journal",
    "metadata",
    "run_intent_bindings",
    "schema_migrations",
    "session_forks",
]

ADK_TABLES = ("sessions", "events", "app_states", "user_states", "adk_internal_metadata")
"""The tables ADK's DatabaseSessionService keeps sessions in, beside plangate's."""

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


# -- session intent (migration 2) ------------------------------------------------------
# A session is named by its key ``app/user/session``. Revisions are immutable; the head
# is the one mutable pointer per session and is only moved by compare-and-set.

intent_revisions = Table(
    "plangate_intent_revisions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("intent_id", String(64), nullable=False),
    Column("session_key", String(512), nullable=False, index=True),
    Column("previous_revision_id", String(64)),
    Column("protocol_id", String(128), nullable=False),
    Column("protocol_version", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("change_kind", String(32), nullable=False),
    Column("source_run_id", String(256)),
    Column("created_at", Float, nullable=False),
    Index("ix_plangate_intent_revisions_intent", "intent_id", "created_at"),
)

intent_heads = Table(
    "plangate_intent_heads",
    metadata,
    Column("session_key", String(512), primary_key=True),
    Column("revision_id", String(64), nullable=False),
    Column("updated_at", Float, nullable=False),
)

run_intent_bindings = Table(
    "plangate_run_intent_bindings",
    metadata,
    Column("session_key", String(512), primary_key=True),
    Column("run_id", String(256), primary_key=True),
    Column("base_revision_id", String(64)),
    Column("active_revision_id", String(64)),
    Column("task_relation", String(32), nullable=False),
    Column("updated_at", Float, nullable=False),
)

# A branched session: where it came from and the intent revision pinned at the fork.
session_forks = Table(
    "plangate_session_forks",
    metadata,
    Column("session_key", String(512), primary_key=True),
    Column("parent_session_key", String(512), nullable=False, index=True),
    Column("fork_revision_id", String(64)),
    Column("fork_kind", String(32), nullable=False),
    Column("source_run_id", String(256)),
    Column("created_at", Float, nullable=False),
)


# -- run leases (migration 3) ------------------------------------------------------------
# Which process is executing a run on a thread, until when. A holder renews its lease
# while the run goes on; a lease not renewed in time belongs to a process that died.

run_leases = Table(
    "plangate_run_leases",
    metadata,
    Column("thread_key", String(512), primary_key=True),
    Column("run_id", String(256), nullable=False),
    Column("holder", String(256), nullable=False),
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)


def _create(*tables: Table) -> Callable[[Connection], None]:
    def apply(conn: Connection) -> None:
        for table in tables:
            table.create(conn, checkfirst=True)

    return apply


MIGRATION_TABLES: dict[int, tuple[str, tuple[Table, ...]]] = {
    1: ("documents and journal", (documents, journal)),
    2: ("session intents", (intent_revisions, intent_heads, run_intent_bindings, session_forks)),
    3: ("run leases", (run_leases,)),
}
"""Each migration: its name and the tables it creates."""

MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (version, name, _create(*tables)) for version, (name, tables) in MIGRATION_TABLES.items()
]

SCHEMA_VERSION = max(version for version, _, _ in MIGRATIONS)
"""The newest schema this code writes; a database marked newer is refused at start."""


def tables_of_version(applied: set[int]) -> set[str]:
    """The names of the tables the applied migrations created."""
    return {
        table.name
        for version, (_, tables) in MIGRATION_TABLES.items()
        if version in applied
        for table in tables
    }
