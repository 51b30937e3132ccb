"""What ``plangate db check`` looks at, and what ``--repair`` may change.

Read-only unless asked: the schema version against the code's, the tables every applied
migration created, documents whose version no writer of this code produces (0, -3:
written by hand or by a broken tool, and refused by compare-and-set forever), and runs
left ``running`` by a process that died. A repair writes a journal entry for each thing
it changed, under the scope ``plangate/db``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Table, inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from plangate.journal.events import JournalEvent
from plangate.store.recovery import StaleRun, interrupt_runs, stale_runs
from plangate.store.schema import (
    MIGRATION_TABLES,
    SCHEMA_VERSION,
    documents,
    schema_migrations,
    tables_of_version,
)
from plangate.store.store import Conflict, Store

__all__ = ["REPAIR_SCOPE", "DatabaseReport", "check_database", "repair_database"]

REPAIR_SCOPE = "plangate/db"


@dataclass
class DatabaseReport:
    applied: set[int] = field(default_factory=set[int])
    missing_tables: list[str] = field(default_factory=list[str])
    corrupt: list[tuple[str, str, int]] = field(default_factory=list[tuple[str, str, int]])
    """(kind, key, version) of documents with a version below 1."""
    stale: list[StaleRun] = field(default_factory=list[StaleRun])

    @property
    def schema(self) -> int:
        return max(self.applied, default=0)

    @property
    def newer(self) -> bool:
        return self.schema > SCHEMA_VERSION

    @property
    def healthy(self) -> bool:
        return (
            not self.newer
            and self.schema == SCHEMA_VERSION
            and not self.missing_tables
            and not self.corrupt
            and not self.stale
        )


async def _table_names(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))


async def check_database(
    store: Store, *, extra_tables: Iterable[str] = (), idle_seconds: float = 600.0
) -> DatabaseReport:
    """Inspect without writing. ``store`` may be opened without migrating (a database
    this code refuses to start on must still be checkable)."""
    report = DatabaseReport()
    present = await _table_names(store.engine)
    if schema_migrations.name in present:
        async with store.engine.connect() as conn:
            report.applied = set(
                (await conn.execute(select(schema_migrations.c.version))).scalars()
            )
    expected = tables_of_version(report.applied) | {schema_migrations.name, *extra_tables}
    report.missing_tables = sorted(expected - present)
    if documents.name in present:
        async with store.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(documents.c.kind, documents.c.key, documents.c.version).where(
                        documents.c.version < 1
                    )
                )
            ).all()
        report.corrupt = [(row.kind, row.key, row.version) for row in rows]
    needed = {documents.name, "plangate_run_leases"}
    if needed <= present:
        report.stale = await stale_runs(store, idle_seconds=idle_seconds)
    return report


async def repair_database(store: Store, report: DatabaseReport, *, actor: str) -> list[str]:
    """Fix what ``report`` found (never on a newer schema); returns what was done."""
    if report.newer:
        return []
    done: list[str] = []
    ours = [name for name in report.missing_tables if name.startswith("plangate_")]
    if ours:
        tables = [t for _, (_, ts) in sorted(MIGRATION_TABLES.items()) for t in ts]
        async with store.engine.begin() as conn:
            for table in tables:
                if table.name in ours:
                    await conn.run_sync(_creator(table))
    if report.missing_tables:
        # The session tables are ADK's: the caller recreates them (``prepare_database``).
        done += [f"recreated table {name} (empty)" for name in report.missing_tables]
        await _journal(
            store,
            "store.table.recreated",
            ",".join(report.missing_tables),
            actor,
            {"tables": report.missing_tables},
        )
    for kind, key, version in report.corrupt:
        doc = await store.get(kind, key)
        if doc is None:
            continue
        try:
            async with store.transaction() as tx:
                await tx.replace(kind, key, doc.data, found_version=version)
                await tx.append(
                    REPAIR_SCOPE,
                    _event(
                        "store.document.repaired",
                        f"{kind}:{key}",
                        actor,
                        {"kind": kind, "key": key, "found_version": version, "version": 1},
                    ),
                )
        except Conflict:
            continue
        done.append(f"reset the version of {kind} {key!r} from {version} to 1")
    if report.stale:
        marked = await interrupt_runs(
            store,
            report.stale,
            actor=actor,
            reason="left running by a process that stopped; marked by plangate db check",
        )
        done += [f"marked run {key!r} interrupted" for key in marked]
    return done


def _creator(table: Table) -> Callable[[Connection], None]:
    def create(conn: Connection) -> None:
        table.create(conn, checkfirst=True)

    return create


def _event(kind: str, subject: str, actor: str, detail: dict[str, Any]) -> JournalEvent:
    return JournalEvent(kind=kind, subject=subject, actor=actor, at=time.time(), detail=detail)


async def _journal(
    store: Store, kind: str, subject: str, actor: str, detail: dict[str, Any]
) -> None:
    async with store.transaction() as tx:
        await tx.append(REPAIR_SCOPE, _event(kind, subject, actor, detail))
