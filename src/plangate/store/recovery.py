"""Runs whose process died: found, reported, and marked ``interrupted``.

A run's document says ``running`` from its start until its outcome is written. It stays
``running`` while it waits for a human reply (a paused run resumes later), and -- wrongly
-- when the process executing it was killed. The two are told apart by the plan state: a
paused run's session has a pending request. A killed run is marked ``interrupted`` with
a journal entry, by compare-and-set, so two sweepers never both write it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import select

from plangate.journal.events import JournalEvent
from plangate.store.leases import Lease, claim_seen, release_in
from plangate.store.protocol_state import RUN_KIND
from plangate.store.schema import documents, run_leases
from plangate.store.store import Conflict, Store, Transaction

__all__ = [
    "PLAN_STATE_KIND",
    "StaleRun",
    "interrupt_runs",
    "release_closing_runs",
    "stale_runs",
    "sweep_lease",
]

PLAN_STATE_KIND = "plan_state"
INTERRUPTED_EVENT = "protocol.run.interrupted"


@dataclass(frozen=True)
class StaleRun:
    key: str
    version: int
    data: dict[str, Any]
    updated_at: float

    @property
    def session_key(self) -> str:
        return str(self.data.get("session_key") or self.key.rsplit("/", 1)[0])

    @property
    def scope_key(self) -> str:
        return str(self.data.get("scope_key") or self.key.split("#", 1)[0])


def _has_pending(data: Any) -> bool:
    record: Any = cast(dict[str, Any], data).get("record") if isinstance(data, dict) else None
    pending: Any = cast(dict[str, Any], record).get("pending") if isinstance(record, dict) else None
    return bool(pending)


async def stale_runs(
    store: Store,
    *,
    session_key: str | None = None,
    idle_seconds: float = 0.0,
    ignore_leases: bool = False,
) -> list[StaleRun]:
    """Runs still ``running`` that no live lease covers (unless ``ignore_leases``: the
    caller just took over the thread's expired lease), whose session waits for no
    reply, and which were not written for ``idle_seconds``."""
    now = time.time()
    query = select(documents).where(documents.c.kind == RUN_KIND)
    if session_key is not None:
        query = query.where(documents.c.key.startswith(session_key + "/", autoescape=True))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
        live = set(
            (
                await conn.execute(
                    select(run_leases.c.thread_key).where(run_leases.c.expires_at > now)
                )
            ).scalars()
        )
        paused = {
            row.key.rsplit("/", 1)[0]
            for row in (
                await conn.execute(
                    select(documents.c.key, documents.c.data).where(
                        documents.c.kind == PLAN_STATE_KIND
                    )
                )
            ).all()
            if _has_pending(row.data)
        }
    found: list[StaleRun] = []
    for row in rows:
        raw: Any = row.data
        data: dict[str, Any] = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        run = StaleRun(row.key, row.version, data, row.updated_at)
        if data.get("status") != "running" or row.updated_at > now - idle_seconds:
            continue
        if (run.session_key in live and not ignore_leases) or run.session_key in paused:
            continue
        found.append(run)
    return found


async def interrupt_runs(
    store: Store, runs: list[StaleRun], *, actor: str, reason: str
) -> list[str]:
    """Mark each run ``interrupted`` with a journal entry; a run written meanwhile by
    someone else is left alone. Returns the keys marked."""
    marked: list[str] = []
    for run in runs:
        try:
            async with store.transaction() as tx:
                await _interrupt(tx, run, actor=actor, reason=reason)
        except Conflict:
            continue
        marked.append(run.key)
    return marked


async def sweep_lease(store: Store, seen: Lease, *, actor: str, reason: str) -> list[str]:
    """Claim the expired lease ``seen`` and mark its thread's running runs
    ``interrupted``, all in one transaction. Nothing is written unless the lease row is
    still exactly as seen: a holder whose heartbeat came late but renewed before this
    keeps its lease and its run. A run written meanwhile (``Conflict``) undoes the claim
    too, and the next sweep looks again. Returns the run keys marked."""
    try:
        async with store.transaction() as tx:
            if not await claim_seen(tx, seen):
                return []
            runs = await _running_runs(tx, seen.thread_key)
            for run in runs:
                await _interrupt(tx, run, actor=actor, reason=reason)
    except Conflict:
        return []
    return [run.key for run in runs]


async def release_closing_runs(store: Store, lease: Lease, *, actor: str, reason: str) -> list[str]:
    """Release ``lease`` and, in the same transaction, mark ``interrupted`` the runs of
    its thread still ``running`` although the session waits for no reply: a run a new
    message superseded while it waited, or one a database error ended before it could
    write its outcome. The run holding the lease is over, so nothing else may still run
    on the thread; once the lease is gone no sweep would ever find them. Returns the run
    keys marked (a run written meanwhile leaves them all for a later sweep)."""
    try:
        async with store.transaction() as tx:
            runs = await _running_runs(tx, lease.thread_key)
            for run in runs:
                await _interrupt(tx, run, actor=actor, reason=reason)
            await release_in(tx, lease)
    except Conflict:
        async with store.transaction() as tx:
            await release_in(tx, lease)
        return []
    return [run.key for run in runs]


async def _running_runs(tx: Transaction, session_key: str) -> list[StaleRun]:
    """The session's runs still ``running``, unless the session waits for a reply."""
    conn = tx.connection
    pending = (
        await conn.execute(
            select(documents.c.data).where(
                documents.c.kind == PLAN_STATE_KIND,
                documents.c.key.startswith(session_key + "/"),
            )
        )
    ).scalars()
    if any(_has_pending(data) for data in pending):
        return []
    rows = (
        await conn.execute(
            select(documents).where(
                documents.c.kind == RUN_KIND, documents.c.key.startswith(session_key + "/")
            )
        )
    ).all()
    found: list[StaleRun] = []
    for row in rows:
        raw: Any = row.data
        data: dict[str, Any] = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
        run = StaleRun(row.key, row.version, data, row.updated_at)
        if data.get("status") == "running" and run.session_key == session_key:
            found.append(run)
    return found


async def _interrupt(tx: Transaction, run: StaleRun, *, actor: str, reason: str) -> None:
    now = time.time()
    data = {
        **run.data,
        "status": "interrupted",
        "outcome_code": "RUN_INTERRUPTED",
        "outcome_message": reason,
        "ended_at": now,
    }
    await tx.replace(RUN_KIND, run.key, data, found_version=run.version)
    await tx.append(
        run.scope_key,
        JournalEvent(
            kind=INTERRUPTED_EVENT,
            subject=str(run.data.get("run_id") or run.key),
            from_state="running",
            to_state="interrupted",
            actor=actor,
            at=now,
            detail={"reason": reason},
        ),
    )
