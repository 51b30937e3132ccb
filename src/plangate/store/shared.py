"""One open ``Store`` per database URL and event loop.

Async engines are bound to the loop that created them, so a store opened in one loop
(a test, a CLI run) is never handed to another.
"""

from __future__ import annotations

import asyncio
import os
import weakref

from plangate.sandbox.context import hide_path
from plangate.store.store import Store
from plangate.store.urls import ENV_VAR, resolve_database_url

__all__ = ["StoreOfLoop", "shared_store"]

_stores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Store]] = (
    weakref.WeakKeyDictionary()
)
_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


async def shared_store(url: str | None = None) -> Store:
    loop = asyncio.get_running_loop()
    stores = _stores.setdefault(loop, {})
    # Every gate check asks for the store: answer a URL seen before without resolving it
    # again (resolving touches the filesystem). The working directory and the variable
    # are part of the key because a relative or absent URL depends on them.
    alias = f"{url}\0{os.environ.get(ENV_VAR)}\0{os.getcwd()}"
    if alias in stores:
        return stores[alias]
    url = resolve_database_url(url)
    if url in stores:
        stores[alias] = stores[url]
        return stores[url]
    lock = _locks.setdefault(loop, asyncio.Lock())
    async with lock:
        if url not in stores:
            stores[url] = await Store.open(url)
            _hide_from_commands(url)
        stores[alias] = stores[url]
    return stores[url]


class StoreOfLoop:
    """The shared store of one URL, remembered for the event loop that last asked.

    For hot paths (the gate, every protocol step): a repeat answer costs a loop check
    instead of ``shared_store``'s lookup, which builds a key from the environment and
    the working directory. An absent URL follows the environment, so it is not kept."""

    def __init__(self) -> None:
        self._kept: tuple[weakref.ref[asyncio.AbstractEventLoop], str, Store] | None = None

    def kept(self, url: str | None) -> Store | None:
        """The store of ``url`` if this loop asked for it before (no await: the gate's
        fast path)."""
        kept = self._kept
        if kept is not None and kept[0]() is asyncio.get_running_loop() and kept[1] == url:
            return kept[2]
        return None

    async def get(self, url: str | None) -> Store:
        store = self.kept(url)
        if store is not None:
            return store
        store = await shared_store(url)
        if url is not None:
            self._kept = (weakref.ref(asyncio.get_running_loop()), url, store)
        return store


def _hide_from_commands(url: str) -> None:
    """The embedded database holds every session and plan: no command the agent starts
    may read it (the sandbox masks it)."""
    prefix = "sqlite+aiosqlite:///"
    if url.startswith(prefix) and url[len(prefix) :] not in ("", ":memory:"):
        path = url[len(prefix) :]
        for suffix in ("", "-wal", "-shm", "-journal", ".lock"):
            hide_path(path + suffix)
