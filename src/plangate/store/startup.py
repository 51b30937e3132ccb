"""One process at a time creates or upgrades the schema.

Several servers started together on a fresh PostgreSQL database would all find the
tables missing and all try to create them; ``CREATE TABLE`` is not safe against itself,
so all but one failed their first request. At start each process takes a session-level
advisory lock, creates what is missing, and lets the next one in, which then finds
everything there.
"""

from __future__ import annotations

import asyncio
import fcntl
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from plangate.store.errors import database_error
from plangate.store.urls import ensure_sqlite_folder, redacted, sqlite_path, unusable_path

__all__ = ["STARTUP_LOCK_KEY", "startup_lock"]

STARTUP_LOCK_KEY = 727275
"""Distinct from the migration lock (727274), which is taken inside the startup lock."""


@asynccontextmanager
async def startup_lock(url: str) -> AsyncGenerator[None]:
    """Hold the startup lock of the database: an advisory lock on PostgreSQL, an
    exclusive ``flock`` on ``<file>.lock`` beside a SQLite file. Connection failures
    raise ``DatabaseError``."""
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        if path is None:
            yield
            return
        ensure_sqlite_folder(url)
        try:
            handle = open(f"{path}.lock", "a")  # noqa: SIM115 -- closed by the with below
        except OSError as exc:
            raise unusable_path(path, exc) from None
        with handle:
            # Blocking is fine off the event loop: the other starter holds it briefly.
            await asyncio.to_thread(fcntl.flock, handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return
    engine = create_async_engine(url, connect_args={"timeout": 10})
    try:
        try:
            conn = await engine.connect()
            await conn.execute(text(f"SELECT pg_advisory_lock({STARTUP_LOCK_KEY})"))
            await conn.commit()
        except Exception as exc:
            raise database_error(exc, f"database {redacted(url)}") from None
        try:
            yield
        finally:
            try:
                await conn.execute(text(f"SELECT pg_advisory_unlock({STARTUP_LOCK_KEY})"))
                await conn.close()
            except Exception:  # closing the connection releases the lock anyway
                pass
    finally:
        await engine.dispose()
