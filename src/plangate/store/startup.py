"""One process at a time creates or upgrades the schema.

Several servers started together on a fresh PostgreSQL database would all find the
tables missing and all try to create them; ``CREATE TABLE`` is not safe against itself,
so all but one failed their first request. At start each process takes a session-level
advisory lock, creates what is missing, and lets the next one in, which then finds
everything there.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from plangate.store.errors import database_error
from plangate.store.urls import redacted

__all__ = ["STARTUP_LOCK_KEY", "startup_lock"]

STARTUP_LOCK_KEY = 727275
"""Distinct from the migration lock (727274), which is taken inside the startup lock."""


@asynccontextmanager
async def startup_lock(url: str) -> AsyncGenerator[None]:
    """Hold the startup lock of a PostgreSQL database (SQLite: nothing to hold; its
    writers are serialised by the file lock). Connection failures raise
    ``DatabaseError``."""
    if url.startswith("sqlite"):
        yield
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
