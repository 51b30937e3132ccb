"""Lease renewal on a thread of its own.

A heartbeat on the server's event loop lapses whenever the loop is busy for longer than
the lease (a slow first request, a loaded machine), and another server would then take
a thread whose run is still going. The keeper renews every held lease from its own
thread, event loop and connection pool, so a lease lapses only when the process is
really gone (or cannot reach the database for the whole lease time). The thread runs
only while a lease is held.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from plangate.store.leases import Lease, RunLeases
from plangate.store.store import Store

__all__ = ["LeaseKeeper"]

logger = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, url: str, ttl: float) -> None:
        self.url = url
        self.ttl = ttl
        self._held: dict[str, tuple[Lease, Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, lease: Lease, on_lost: Callable[[], None]) -> None:
        """Keep ``lease`` renewed; ``on_lost`` is called (from the keeper's thread) if
        another process took it over."""
        with self._lock:
            self._held[lease.thread_key] = (lease, on_lost)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="plangate-lease-keeper", daemon=True
                )
                self._thread.start()

    def drop(self, lease: Lease) -> None:
        with self._lock:
            held = self._held.get(lease.thread_key)
            if held is not None and held[0].run_id == lease.run_id:
                del self._held[lease.thread_key]

    def keeps(self, lease: Lease) -> bool:
        """Whether this keeper renews ``lease`` (its thread, run and holder): a run of
        this process still going on."""
        with self._lock:
            held = self._held.get(lease.thread_key)
        return held is not None and (held[0].run_id, held[0].holder) == (
            lease.run_id,
            lease.holder,
        )

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.ttl)

    def _run(self) -> None:
        asyncio.run(self._renew_forever())

    async def _renew_forever(self) -> None:
        store: Store | None = None
        try:
            while not self._stop.wait(self.ttl / 3):
                with self._lock:
                    if not self._held:
                        # Nothing to keep: end the thread; the next ``hold`` starts one.
                        self._thread = None
                        return
                try:
                    if store is None:
                        store = await Store.open(self.url)
                    await self._renew_all(RunLeases(store, ttl=self.ttl))
                except Exception:  # the database is away: try again while leases last
                    logger.warning("could not renew run leases", exc_info=True)
        finally:
            if store is not None:
                await store.close()

    async def _renew_all(self, leases: RunLeases) -> None:
        with self._lock:
            held = list(self._held.values())
        for lease, on_lost in held:
            renewed = await leases.renew(lease)
            with self._lock:
                current = self._held.get(lease.thread_key)
                if current is None or current[0].run_id != lease.run_id:
                    continue  # the run ended meanwhile
                if renewed is None:
                    del self._held[lease.thread_key]
                else:
                    self._held[lease.thread_key] = (renewed, on_lost)
            if renewed is None:
                logger.error("lost the lease of %s; stopping its run", lease.thread_key)
                on_lost()
