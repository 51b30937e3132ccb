"""``/health``: an answer within a bound, whatever the database does.

A load balancer asks often and gives up after a second or two. Awaiting the database
inside the request made the answer as slow as the database: while PostgreSQL was frozen
the probes hung for the whole freeze and then said 200. Here one check runs at a time,
shared by every probe that arrives meanwhile, and a probe waits for it only
``answer_within`` seconds; past that it reports what is known:

- ``ok`` (200): the last check answered;
- ``degraded`` (200): the last check answered, the one in flight is slow;
  (503) the disk under a SQLite file is full, so the next write will fail;
- ``unreachable`` (503): the last check failed.

Until the first check answers (the server starts one at start-up) a probe waits for it.

A check that takes longer than ``check_timeout`` fails as ``DATABASE_UNREACHABLE``.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from plangate.errors import ErrorCode
from plangate.store.errors import DatabaseError

__all__ = ["Health", "HealthProbe"]

DatabaseState = Literal["ok", "degraded", "unreachable"]


@dataclass(frozen=True, slots=True)
class Health:
    database: DatabaseState
    code: ErrorCode | None = None
    error: str | None = None

    @property
    def status_code(self) -> int:
        """200 while the server can take runs; 503 tells a balancer to send them elsewhere."""
        if self.database == "ok":
            return 200
        if self.database == "degraded" and self.code is None:
            return 200
        return 503

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": self.status_code == 200, "database": self.database}
        if self.code is not None:
            body["code"] = self.code.value
        if self.error is not None:
            body["error"] = self.error
        return body


_OK = Health("ok")
_SLOW = Health("degraded", error="the database is slow to answer")


class HealthProbe:
    """One database check at a time; every probe answers within ``answer_within``."""

    def __init__(
        self,
        check: Callable[[], Awaitable[None]],
        *,
        sqlite_file: Path | None = None,
        answer_within: float = 0.08,
        check_timeout: float = 5.0,
        min_free_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self._check = check
        self._sqlite_file = sqlite_file
        self._answer_within = answer_within
        self._check_timeout = check_timeout
        self._min_free_bytes = min_free_bytes
        self._in_flight: asyncio.Task[Health] | None = None
        self._last: Health | None = None

    async def read(self) -> Health:
        if self._in_flight is None or self._in_flight.done():
            self._in_flight = asyncio.create_task(self._run_check())
        # Before any check has answered there is nothing to report but the check itself:
        # the first probe waits for it (at most check_timeout; the server starts one at
        # start-up, so a balancer's first probe rarely does).
        bound = self._answer_within if self._last is not None else None
        # asyncio.wait does not cancel on timeout: the check goes on for the next probe.
        done, _ = await asyncio.wait({self._in_flight}, timeout=bound)
        if done:
            health = self._in_flight.result()
        elif self._last is not None and self._last.database == "unreachable":
            health = self._last
        else:
            health = _SLOW
        if health.database == "unreachable":
            return health
        return self._disk_full() or health

    async def _run_check(self) -> Health:
        check = asyncio.ensure_future(self._check())
        done, _ = await asyncio.wait({check}, timeout=self._check_timeout)
        if not done:
            # Cancelled, not awaited: a frozen connection's clean-up can hang as long as
            # the freeze (asyncio.wait_for would wait for it).
            check.cancel()
            check.add_done_callback(_retrieve)
            health = Health(
                "unreachable",
                ErrorCode.DATABASE_UNREACHABLE,
                f"the database did not answer within {self._check_timeout:g} s",
            )
        elif isinstance(error := check.exception(), DatabaseError):
            health = Health("unreachable", error.code, error.line())
        elif error is not None:
            raise error
        else:
            health = _OK
        self._last = health
        return health

    def _disk_full(self) -> Health | None:
        """A SQLite file's disk with less than ``min_free_bytes`` free: reads still work,
        the next run's writes would fail."""
        if self._sqlite_file is None:
            return None
        try:
            free = shutil.disk_usage(self._sqlite_file.parent).free
        except OSError:
            return None  # the folder is gone: the check reports that
        if free >= self._min_free_bytes:
            return None
        return Health(
            "degraded",
            ErrorCode.DATABASE_DISK_FULL,
            f"the disk holding {self._sqlite_file} has {free // 1024} KiB free; "
            "runs cannot be saved",
        )


def _retrieve(task: asyncio.Future[None]) -> None:
    """Collect an abandoned check's outcome, so asyncio does not log it as lost."""
    if not task.cancelled():
        task.exception()
