"""Fencing: a run writes only while its thread's lease is still its own.

A lease that lapsed because its holder stalled (a frozen VM, a long GC pause, a stopped
process) is taken over by another server, but the stalled holder does not know it until
it wakes, and then its next write would land in a thread that now belongs to someone
else. So every write a run makes carries its lease (``Fence``: the thread, the holder and
the run, which together name one acquisition -- a holder is unique per process start and
a takeover changes both) and the store checks, *inside the write's own transaction*, that
the lease row still names it. Once another holder took the thread the write is refused
with ``RUN_LEASE_LOST`` and nothing of it is applied.

The fence travels in a context variable set when the run starts keeping its lease
(``ThreadRuns.keep``): every task and worker thread the run starts inherits it, and the
commit paths that hop to a thread of their own (``plangate.store.writes``) take it along
with the commit. On SQLite the check runs after ``BEGIN IMMEDIATE``, under the file's
write lock, so no takeover can commit between the check and the write; on PostgreSQL
``SELECT ... FOR SHARE`` locks the lease row until the write commits, so a takeover's
``UPDATE``/``DELETE`` of that row waits for it -- and a write that comes after the
takeover finds the row changed.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from plangate.errors import ErrorCode
from plangate.store.errors import DatabaseError

__all__ = [
    "Fence",
    "LeaseLost",
    "check_asyncpg",
    "check_connection",
    "check_sqlite",
    "current_fence",
    "fence_writes",
    "refuse",
    "unfenced",
]

logger = logging.getLogger(__name__)

_FENCE_SQLITE = (
    "SELECT 1 FROM plangate_run_leases WHERE thread_key = ? AND holder = ? AND run_id = ?"
)
_FENCE_POSTGRES = (
    "SELECT 1 FROM plangate_run_leases "
    "WHERE thread_key = $1 AND holder = $2 AND run_id = $3 FOR SHARE"
)
_FENCE_SQLALCHEMY = (
    "SELECT 1 FROM plangate_run_leases "
    "WHERE thread_key = :thread_key AND holder = :holder AND run_id = :run_id"
)


@dataclass(eq=False)
class Fence:
    """The lease a run writes under; ``lost`` once a write or the heartbeat found it gone."""

    thread_key: str
    holder: str
    run_id: str
    lost: bool = field(default=False)

    @property
    def parameters(self) -> tuple[str, str, str]:
        return (self.thread_key, self.holder, self.run_id)


class LeaseLost(DatabaseError):
    """The run's lease belongs to another holder now: its write was refused."""

    def __init__(self, fence: Fence) -> None:
        super().__init__(
            ErrorCode.RUN_LEASE_LOST,
            f"this server lost thread {fence.thread_key!r} to another server (its run "
            f"{fence.run_id} stalled past its lease); the run stopped and wrote nothing more",
            "send the message again to continue on the thread",
        )
        self.fence = fence


_current: ContextVar[Fence | None] = ContextVar("plangate_fence", default=None)


def current_fence() -> Fence | None:
    """The lease the calling run writes under, if it is a run holding one."""
    return _current.get()


def fence_writes(fence: Fence | None) -> None:
    """From now on the calling task (and what it starts) writes under ``fence``; ``None``
    ends that (the run released its lease)."""
    _current.set(fence)


@contextmanager
def unfenced() -> Generator[None]:
    """The lease's own bookkeeping (take, renew, release, sweep) is not a write of the run
    it belongs to: it runs unfenced, whoever calls it."""
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


def refuse(fence: Fence) -> LeaseLost:
    """The refusal of a write under ``fence``, said once in this server's log."""
    if not fence.lost:
        logger.error(
            "lost the lease of thread %s (run %s) to another holder: refusing its writes "
            "and stopping the run",
            fence.thread_key,
            fence.run_id,
        )
    fence.lost = True
    return LeaseLost(fence)


def check_sqlite(conn: sqlite3.Connection, fence: Fence | None) -> None:
    """Inside a ``BEGIN IMMEDIATE`` transaction on ``conn``: raise ``LeaseLost`` unless
    ``fence`` (if any) is still the thread's lease."""
    if fence is None:
        return
    if fence.lost or conn.execute(_FENCE_SQLITE, fence.parameters).fetchone() is None:
        raise refuse(fence)


async def check_asyncpg(conn: Any, fence: Fence | None) -> None:
    """Inside a transaction on an asyncpg connection: the same, holding the lease row
    (``FOR SHARE``) until the transaction ends, so a takeover cannot commit in between."""
    if fence is None:
        return
    if fence.lost or await conn.fetchval(_FENCE_POSTGRES, *fence.parameters) is None:
        raise refuse(fence)


async def check_connection(conn: Any, fence: Fence | None) -> None:
    """Inside a transaction on a SQLAlchemy (async) connection: the same check."""
    if fence is None:
        return
    statement = _FENCE_SQLALCHEMY
    if conn.dialect.name == "postgresql":
        statement += " FOR SHARE"
    if fence.lost:
        raise refuse(fence)
    found = (
        await conn.execute(
            text(statement),
            {"thread_key": fence.thread_key, "holder": fence.holder, "run_id": fence.run_id},
        )
    ).first()
    if found is None:
        raise refuse(fence)
