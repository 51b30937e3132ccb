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
from typing import Any

from sqlalchemy import delete, select, update

from plangate.errors import ErrorCode
from plangate.store.fence import Fence, refuse, unfenced
from plangate.store.schema import run_leases
from plangate.store.sql import Sql, changed, fetch_one
from plangate.store.store import Store, Transaction
from plangate.store.writes import transact

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "Lease",
    "LeaseHeld",
    "RunLeases",
    "claim_seen",
    "lease_seconds",
    "release_in",
]

DEFAULT_LEASE_SECONDS = 15.0
LEASE_ENV = "PLANGATE_RUN_LEASE_SECONDS"


# The statements of a run's lease, as plain SQL (``plangate.store.sql``).
_TAKE_FREE = Sql(
    "INSERT INTO plangate_run_leases (thread_key, run_id, holder, acquired_at, expires_at) "
    "VALUES (:thread_key, :run_id, :holder, :acquired_at, :expires_at) "
    "ON CONFLICT (thread_key) DO NOTHING"
)
_HELD = Sql(
    "SELECT thread_key, run_id, holder, expires_at FROM plangate_run_leases "
    "WHERE thread_key = :thread_key"
)
_TAKE_OVER = Sql(
    "UPDATE plangate_run_leases SET run_id = :run_id, holder = :holder, "
    "acquired_at = :acquired_at, expires_at = :expires_at "
    "WHERE thread_key = :thread_key AND holder = :seen_holder AND expires_at = :seen_expires_at"
)
_FENCED = Sql(
    "SELECT 1 FROM plangate_run_leases "
    "WHERE thread_key = :thread_key AND holder = :holder AND run_id = :run_id"
)
_RELEASE = Sql(
    "DELETE FROM plangate_run_leases "
    "WHERE thread_key = :thread_key AND holder = :holder AND run_id = :run_id"
)
# PostgreSQL's one-statement paths (asyncpg, see ``plangate.store.postgres``).
_TAKE_FREE_ASYNCPG = _TAKE_FREE.numbered(
    ("thread_key", "run_id", "holder", "acquired_at", "expires_at")
)
_RELEASE_ASYNCPG = _RELEASE.numbered(("thread_key", "holder", "run_id"))


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
                _TAKE_FREE_ASYNCPG, thread_key, run_id, self.holder, now, lease.expires_at
            )
            if status == "INSERT 0 1":
                return lease, None
        values: dict[str, Any] = {
            "thread_key": thread_key,
            "run_id": run_id,
            "holder": self.holder,
            "acquired_at": now,
            "expires_at": lease.expires_at,
        }

        async def take(tx: Transaction) -> tuple[Lease, Lease | None]:
            conn = tx.connection
            if await changed(conn, _TAKE_FREE, values) == 1:
                return lease, None
            row = await fetch_one(conn, _HELD, {"thread_key": thread_key})
            if row is None:
                # Released between the two statements (PostgreSQL reads each statement's
                # own snapshot): it was held a moment ago, so the run is refused as before.
                raise LeaseHeld(Lease(thread_key, "?", "?", now + self.ttl))
            old = Lease(*row)
            if old.expires_at > now:
                raise LeaseHeld(old)
            seen = {"seen_holder": old.holder, "seen_expires_at": old.expires_at}
            if await changed(conn, _TAKE_OVER, {**values, **seen}) != 1:
                raise LeaseHeld(old)
            return lease, old

        with unfenced():
            return await transact(self.store, take)

    async def renew(self, lease: Lease) -> Lease | None:
        """Extend a lease this holder still has; ``None`` if it was lost (taken over
        after it expired) -- the run must stop, another process owns the thread now."""
        expires_at = time.time() + self.ttl
        with unfenced():
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
                _RELEASE_ASYNCPG, lease.thread_key, lease.holder, lease.run_id
            )
            return
        held = {"thread_key": lease.thread_key, "holder": lease.holder, "run_id": lease.run_id}

        async def drop(tx: Transaction) -> None:
            await changed(tx.connection, _RELEASE, held)

        with unfenced():
            await transact(self.store, drop)

    async def check_fence(self, fence: Fence) -> None:
        """Raise ``LeaseLost`` unless ``fence`` is still its thread's lease (a read: for
        what is not a write, such as a tool call about to run)."""
        if not fence.lost:
            row = await self.store.read(
                lambda conn: fetch_one(
                    conn,
                    _FENCED,
                    {
                        "thread_key": fence.thread_key,
                        "holder": fence.holder,
                        "run_id": fence.run_id,
                    },
                )
            )
            if row is not None:
                return
        raise refuse(fence)

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


async def release_in(tx: Transaction, lease: Lease) -> None:
    """Delete ``lease`` inside ``tx`` if this holder's run still has it."""
    held = {"thread_key": lease.thread_key, "holder": lease.holder, "run_id": lease.run_id}
    await changed(tx.connection, _RELEASE, held)


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
