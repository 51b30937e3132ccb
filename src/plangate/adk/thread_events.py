"""A thread's live events, for whoever follows it from any process.

The process running a thread's run publishes each event (the run's AG-UI events, and a
``CUSTOM`` change note for what happens between runs: a mode selection, leaving Plan
Mode). Subscribers in this process get it at once; on PostgreSQL it also goes to every
other ``plangate serve`` on the database (``LiveRelay``: LISTEN/NOTIFY) and reaches
their subscribers there. On SQLite there is one process, so the first part is all.

A subscriber that cannot keep up (or that missed events while the database connection
was away) gets a ``plangate.live.gap`` note and should reload the thread: the store is
the truth, the live events are how a page learns of it early.
"""

from __future__ import annotations

import asyncio
import json
import time

from plangate.store.live_notify import LiveRelay
from plangate.store.urls import resolve_database_url

__all__ = ["GAP", "READY", "Subscription", "ThreadEvents", "change_note"]

GAP = "plangate.live.gap"
READY = "plangate.live.ready"
CHANGED = "plangate.thread.changed"
QUEUE_LIMIT = 5000
"""Events a subscriber may be behind before it is told to reload instead."""


def _custom(name: str, value: dict[str, object]) -> str:
    return json.dumps(
        {"type": "CUSTOM", "name": name, "value": value, "timestamp": int(time.time() * 1000)}
    )


def change_note(thread_id: str, what: str) -> str:
    """The event for a change made outside a run (``what``: mode, plan-left, stopped)."""
    return _custom(CHANGED, {"threadId": thread_id, "what": what})


class Subscription:
    """Events of one thread (or of every thread: ``key`` None) as ``(key, json)``."""

    def __init__(self, hub: ThreadEvents, key: str | None) -> None:
        self.hub = hub
        self.key = key
        self.queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(QUEUE_LIMIT)
        self.lagged = False

    def put(self, key: str, event_json: str) -> None:
        if self.lagged:
            return
        try:
            self.queue.put_nowait((key, event_json))
        except asyncio.QueueFull:
            # Too far behind: stop queueing and tell the reader to reload.
            self.lagged = True
            self.queue = asyncio.Queue()
            self.queue.put_nowait((key, _custom(GAP, {"reason": "too far behind"})))
            self.queue.put_nowait(None)

    def end(self) -> None:
        if self.lagged:
            return  # already ends after its gap note
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self.lagged = True
            self.queue = asyncio.Queue()
            self.queue.put_nowait(None)

    async def next(self, timeout: float) -> tuple[str, str] | None:
        """The next event; ``None`` when the subscription ended. ``TimeoutError`` when
        nothing came within ``timeout`` seconds (time for a keep-alive)."""
        return await asyncio.wait_for(self.queue.get(), timeout)

    def close(self) -> None:
        self.hub.unsubscribe(self)


class ThreadEvents:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        self._subscribers: dict[str | None, set[Subscription]] = {}
        self._relay: LiveRelay | None = None

    async def start(self, database_url: str | None) -> None:
        """Relay to and from the other processes when the database is PostgreSQL."""
        url = resolve_database_url(database_url)
        if url.startswith("postgresql") and self._relay is None:
            self._relay = LiveRelay(url, self.origin, self._deliver, self._gap)
            self._relay.start()

    async def ready(self) -> None:
        """Wait until events from other processes arrive (no-op on SQLite)."""
        if self._relay is not None:
            await self._relay.wait_connected()

    async def flush(self, timeout: float = 5.0) -> None:
        """What was published so far has gone to the other processes (or ``timeout``)."""
        if self._relay is not None:
            await self._relay.flush(timeout)

    async def close(self) -> None:
        self.end_all()
        if self._relay is not None:
            await self._relay.close()
            self._relay = None

    def subscribe(self, key: str | None) -> Subscription:
        subscription = Subscription(self, key)
        self._subscribers.setdefault(key, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        found = self._subscribers.get(subscription.key)
        if found is not None:
            found.discard(subscription)
            if not found:
                del self._subscribers[subscription.key]

    def publish(self, key: str, event_json: str) -> None:
        """One event of thread ``key``, to this process's subscribers and the others'."""
        self._deliver(key, event_json)
        if self._relay is not None:
            self._relay.send(key, event_json)

    def end_all(self) -> None:
        """End every subscription (the server is stopping: streams must close)."""
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                subscription.end()

    def _deliver(self, key: str, event_json: str) -> None:
        for subscription in [*self._subscribers.get(key, ()), *self._subscribers.get(None, ())]:
            subscription.put(key, event_json)

    def _gap(self) -> None:
        note = _custom(GAP, {"reason": "the live connection to the database was restored"})
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                subscription.put(subscription.key or "", note)
