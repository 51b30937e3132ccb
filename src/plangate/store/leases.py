"""One run per thread across every process on one database: a lease with an expiry.

The process that starts a run on a thread inserts the thread's lease row and renews it
(a heartbeat) while the run goes on; it deletes it when the run ends. Another process
finding a live lease refuses the run (``LeaseHeld``). A lease that was not renewed in
time belongs to a process that died: the next process to start a run on the thread, or
the periodic sweep, takes it over by compare-and-set on the row it read, and the runs
the dead holder left ``running`` are marked ``interrupted`` -- by the sweep in the same
transaction as its claim, so a holder whose heartbeat was only late and renewed the row
meanwhile keeps its lease and its run untouched.

Times are the servers' clocks (``time.time()``): processes sharing a database are
expected to keep their clocks in step (NTP), within a small part of the lease time.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass

from sqlalchemy import delete, select, update

from plangate.errors import ErrorCode
from plangate.store.schema import run_leases
from plangate.store.store import Store, Transaction, dialect_insert
from plangate.store.writes import transact

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "Lease",
    "LeaseHeld",
    "RunLeases",
    "claim_seen",
    "lease_seconds",
]

DEFAULT_LEASE_SECONDS = 15.0
LEASE_ENV = "PLANGATE_RUN_LEASE_SECONDS"


# PostgreSQL's one-statement paths (asyncpg, see ``plangate.store.postgres``).
_TAKE_FREE = (
    "INSERT INTO plangate_run_leases (thread_key, run_id, holder, acquired_at, expires_at) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (thread_key) DO NOTHING"
)
_RELEASE = "DELETE FROM plangate_run_leases WHERE thread_key = $1 AND holder = $2 AND run_id = $3"


def lease_seconds() -> float:
    """The lease time: ``PLANGATE_RUN_LEASE_SECONDS`` (at least 1 s), else 15 s."""
    raw = os.environ.get(LEASE_ENV)
    try:
        return max(1.0, float(raw)) if raw else DEFAULT_LEASE_SECONDS
    except ValueError:
        return DEFAULT_LEASE_SECONDS


@dataclass(frozen=True)
class Lease:
    thread_key: str
    run_id: str
    holder: str
    expires_at: float


class LeaseHeld(Exception):
    """Another run holds the thread (in this process or another)."""

    code = ErrorCode.RUN_IN_PROGRESS

    def __init__(self, lease: Lease) -> None:
        super().__init__(f"thread {lease.thread_key!r} has a run in progress ({lease.run_id})")
        self.lease = lease


def new_holder() -> str:
    """This process, uniquely: host, pid and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RunLeases:
    def __init__(self, store: Store, holder: str | None = None, ttl: float | None = None):
        self.store = store
        self.holder = holder or new_holder()
        self.ttl = ttl if ttl is not None else lease_seconds()

    async def acquire(self, thread_key: str, run_id: str) -> tuple[Lease, Lease | None]:
        """Take the thread's lease; returns it and the expired lease it replaced (whose
        runs the caller marks interrupted). Raises ``LeaseHeld`` if a live one exists.

        One transaction, on a SQLite file in one hop to the commit thread; a free thread
        (the usual case) costs one statement in it: insert-or-nothing."""
        now = time.time()
        lease = Lease(thread_key, run_id, self.holder, now + self.ttl)
        postgres = self.store.postgres
        if postgres is not None:
            # One round trip for a free thread; a held or expired lease takes the path
            # below, which decides between the two in one transaction.
            status = await postgres.execute(
                _TAKE_FREE, thread_key, run_id, self.holder, now, lease.expires_at
            )
            if status == "INSERT 0 1":
                return lease, None

        async def take(tx: Transaction) -> tuple[Lease, Lease | None]:
            conn = tx.connection
            inserted = await conn.execute(
                dialect_insert(run_leases, conn.dialect.name)
                .values(
                    thread_key=thread_key,
                    run_id=run_id,
                    holder=self.holder,
                    acquired_at=now,
                    expires_at=lease.expires_at,
                )
                .on_conflict_do_nothing(index_elements=[run_leases.c.thread_key])
            )
            if inserted.rowcount == 1:
                return lease, None
            row = (
                await conn.execute(select(run_leases).where(run_leases.c.thread_key == thread_key))
            ).first()
            if row is None:
                # Released between the two statements (PostgreSQL reads each statement's
                # own snapshot): it was held a moment ago, so the run is refused as before.
                raise LeaseHeld(Lease(thread_key, "?", "?", now + self.ttl))
            old = Lease(row.thread_key, row.run_id, row.holder, row.expires_at)
            if row.expires_at > now:
                raise LeaseHeld(old)
            taken = await conn.execute(
                update(run_leases)
                .where(
                    run_leases.c.thread_key == thread_key,
                    run_leases.c.holder == row.holder,
                    run_leases.c.expires_at == row.expires_at,
                )
                .values(
                    run_id=run_id,
                    holder=self.holder,
                    acquired_at=now,
                    expires_at=lease.expires_at,
                )
            )
            if taken.rowcount != 1:
                raise LeaseHeld(old)
            return lease, old

        return await transact(self.store, take)

    async def renew(self, lease: Lease) -> Lease | None:
        """Extend a lease this holder still has; ``None`` if it was lost (taken over
        after it expired) -- the run must stop, another process owns the thread now."""
        expires_at = time.time() + self.ttl
        async with self.store.transaction() as tx:
            result = await tx.connection.execute(
                update(run_leases)
                .where(
                    run_leases.c.thread_key == lease.thread_key,
                    run_leases.c.holder == lease.holder,
                    run_leases.c.run_id == lease.run_id,
                )
                .values(expires_at=expires_at)
            )
        if result.rowcount != 1:
            return None
        return Lease(lease.thread_key, lease.run_id, lease.holder, expires_at)

    async def release(self, lease: Lease) -> None:
        if self.store.postgres is not None:
            await self.store.postgres.execute(
                _RELEASE, lease.thread_key, lease.holder, lease.run_id
            )
            return

        async def drop(tx: Transaction) -> None:
            await tx.connection.execute(
                delete(run_leases).where(
                    run_leases.c.thread_key == lease.thread_key,
                    run_leases.c.holder == lease.holder,
                    run_leases.c.run_id == lease.run_id,
                )
            )

        await transact(self.store, drop)

    async def holder_of(self, thread_key: str) -> Lease | None:
        """The live lease of a thread, if any."""
        async with self.store.engine.connect() as conn:
            row = (
                await conn.execute(select(run_leases).where(run_leases.c.thread_key == thread_key))
            ).first()
        if row is None or row.expires_at <= time.time():
            return None
        return Lease(row.thread_key, row.run_id, row.holder, row.expires_at)

    async def expired(self) -> list[Lease]:
        """The leases whose time is up, as read now (their holders may still renew them
        before a sweeper claims them: ``claim`` compares against what was read here)."""
        now = time.time()
        async with self.store.engine.connect() as conn:
            rows = (
                await conn.execute(select(run_leases).where(run_leases.c.expires_at <= now))
            ).all()
        return [Lease(row.thread_key, row.run_id, row.holder, row.expires_at) for row in rows]


async def claim_seen(tx: Transaction, seen: Lease) -> bool:
    """Delete the lease row exactly as it was seen, inside ``tx``: ``False`` when its
    holder renewed it since (a late heartbeat), released it, or another sweeper or a new
    run took it. Whatever the caller writes in ``tx`` then happens only with the claim."""
    result = await tx.connection.execute(
        delete(run_leases).where(
            run_leases.c.thread_key == seen.thread_key,
            run_leases.c.run_id == seen.run_id,
            run_leases.c.holder == seen.holder,
            run_leases.c.expires_at == seen.expires_at,
        )
    )
    return result.rowcount == 1
