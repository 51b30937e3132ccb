"""A thread's live events between processes on one PostgreSQL database: LISTEN/NOTIFY.

Each process keeps one plain asyncpg connection that LISTENs on one channel and sends
its own processes' events with ``pg_notify``. PostgreSQL delivers a session's
notifications in the order they were sent, and notifications from different
transactions in commit order; one sender per process, sending batch after batch, keeps
every run's events in order (a thread's run is held by one process at a time).

A NOTIFY payload holds less than 8000 bytes, and an AG-UI event (a state snapshot, a
tool result) can be larger: an event is cut into parts that the receiver puts back
together. That keeps the whole path inside NOTIFY -- no table to write per event and to
prune afterwards; the store itself stays the truth a page reloads from.

Live delivery is best effort: while the connection is away events are not sent, and
when it comes back every receiver is told (``on_gap``) so a page reloads the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy.engine import make_url

__all__ = ["CHANNEL", "MAX_PART_BYTES", "LiveRelay", "split_event"]

logger = logging.getLogger(__name__)

CHANNEL = "plangate_live"
MAX_PART_BYTES = 7000
"""Room for the part's header under PostgreSQL's 8000-byte payload limit."""
BATCH = 256
"""Notifications sent in one statement at most."""


def split_event(body: str, limit: int = MAX_PART_BYTES) -> list[str]:
    """``body`` cut into parts of at most ``limit`` UTF-8 bytes, never inside a character."""
    raw = body.encode()
    parts: list[str] = []
    start = 0
    while start < len(raw) or not parts:
        end = min(start + limit, len(raw))
        # Back off to a character boundary: UTF-8 continuation bytes are 0b10xxxxxx.
        while end < len(raw) and (raw[end] & 0xC0) == 0x80:
            end -= 1
        parts.append(raw[start:end].decode())
        start = end
    return parts


def _dsn(url: str) -> str:
    """asyncpg's own DSN for the store's SQLAlchemy URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    return lambda _conn: event.set()


Deliver = Callable[[str, str], None]
"""``(thread_key, event_json)`` from another process, called on the event loop."""


class LiveRelay:
    def __init__(self, url: str, origin: str, deliver: Deliver, on_gap: Callable[[], None]):
        self.url = url
        self.origin = origin
        self.deliver = deliver
        self.on_gap = on_gap
        self._outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._parts: dict[tuple[str, int], list[str]] = {}
        self._seq = 0
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._queued = 0
        self._sent = 0
        self._progress = asyncio.Condition()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="plangate-live-relay")

    async def wait_connected(self) -> None:
        await self._connected.wait()

    def send(self, thread_key: str, event_json: str) -> None:
        """Queue one event for the other processes (never waits: runs go on)."""
        self._queued += 1
        self._outbox.put_nowait((thread_key, event_json))

    async def flush(self, timeout: float) -> bool:
        """Wait until what was queued so far is sent (at most ``timeout`` seconds): a run
        flushes its last event before it frees its thread, so no server sees the next
        run of the thread start before this one ended."""
        target = self._queued
        if not self._connected.is_set():
            return False
        async with self._progress:
            try:
                await asyncio.wait_for(
                    self._progress.wait_for(lambda: self._sent >= target), timeout
                )
            except TimeoutError:
                return False
        return True

    async def _advance(self, count: int) -> None:
        async with self._progress:
            self._sent += count
            self._progress.notify_all()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the connection ---------------------------------------------------------------

    async def _run(self) -> None:
        import asyncpg  # type: ignore[import-untyped]

        driver = cast(Any, asyncpg)  # its own stubs are partial
        first = True
        while True:
            conn: Any = None
            try:
                conn = await driver.connect(_dsn(self.url))
                lost = asyncio.Event()
                conn.add_termination_listener(_setter(lost))
                await conn.add_listener(CHANNEL, self._received)
                self._connected.set()
                if not first:
                    self.on_gap()  # events may have passed while we were away
                first = False
                await self._send_until(conn, lost)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("live events: the database connection failed", exc_info=True)
            finally:
                self._connected.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close(timeout=2)
            # Events queued while away are dropped: their pages reload on the gap.
            while not self._outbox.empty():
                self._outbox.get_nowait()
            await self._advance(self._queued - self._sent)
            self._parts.clear()
            await asyncio.sleep(1.0)

    async def _send_until(self, conn: Any, lost: asyncio.Event) -> None:
        while not lost.is_set():
            getting = asyncio.ensure_future(self._outbox.get())
            losing = asyncio.ensure_future(lost.wait())
            done, _ = await asyncio.wait({getting, losing}, return_when=asyncio.FIRST_COMPLETED)
            if getting not in done:
                getting.cancel()
                return
            losing.cancel()
            batch = [getting.result()]
            while len(batch) < BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            payloads = [p for key, body in batch for p in self._payloads(key, body)]
            # One statement, one commit: the notifications go out in array order.
            await conn.execute(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", CHANNEL, payloads
            )
            await self._advance(len(batch))

    def _payloads(self, thread_key: str, body: str) -> list[str]:
        self._seq += 1
        parts = split_event(body)
        return [
            json.dumps({"o": self.origin, "n": self._seq, "k": thread_key, "i": i, "c": len(parts)})
            + "\n"
            + part
            for i, part in enumerate(parts)
        ]

    def _received(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        head, _, part = payload.partition("\n")
        try:
            header = json.loads(head)
            origin, seq, key = str(header["o"]), int(header["n"]), str(header["k"])
            index, count = int(header["i"]), int(header["c"])
        except (ValueError, KeyError, TypeError):
            logger.warning("live events: a notification that is not ours was ignored")
            return
        if origin == self.origin:
            return  # this process delivered it already
        if count == 1:
            self.deliver(key, part)
            return
        parts = self._parts.setdefault((origin, seq), [])
        if len(parts) != index:  # a part went missing (reconnect): drop the event
            self._parts.pop((origin, seq), None)
            return
        parts.append(part)
        if len(parts) == count:
            del self._parts[(origin, seq)]
            self.deliver(key, "".join(parts))
