"""Getting a database ready before anything is served: plangate's tables and ADK's.

``prepare_database`` is what every entry point (serve, chat, acp, ``db upgrade``) runs
first. It connects, refuses a database it cannot use (``DatabaseError`` with a code and
a one-line message), and creates or upgrades both schemas under the startup lock, so
processes started together never race on ``CREATE TABLE``.
"""

from __future__ import annotations

import asyncio

from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from sqlalchemy import inspect, text

from plangate.adk.setup import plan_runtime
from plangate.errors import ErrorCode
from plangate.store.errors import (
    DatabaseError,
    database_error,
    is_database_failure,
)
from plangate.store.schema import ADK_TABLES
from plangate.store.startup import startup_lock
from plangate.store.store import Store
from plangate.store.urls import redacted, resolve_database_url

__all__ = [
    "ADK_TABLES",
    "DatabaseError",
    "database_health",
    "failure_text",
    "is_database_failure",
    "prepare_database",
]


async def prepare_database(url: str | None = None, *, recreate_missing: bool = False) -> str:
    """Create or upgrade plangate's and ADK's tables; return the resolved URL.

    Raises ``DatabaseError`` when the database cannot be reached, refuses the login,
    does not exist, has a newer schema than this code, or lost a table (unless
    ``recreate_missing``: ``plangate db check --repair`` recreates it empty)."""
    resolved = resolve_database_url(url)
    async with startup_lock(resolved):
        store = await Store.open(resolved)
        try:
            if not recreate_missing:
                await _require_adk_tables(store)
            service = DatabaseSessionService(db_url=resolved)
            try:
                await service.prepare_tables()
            except Exception as exc:
                raise database_error(exc, store.name) from None
            finally:
                await service.db_engine.dispose()
        finally:
            await store.close()
    return resolved


async def _require_adk_tables(store: Store) -> None:
    """ADK recreates a missing session table silently (empty): once its tables exist, a
    missing one is reported instead, like plangate's own."""
    async with store.engine.connect() as conn:
        present = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    if not present & set(ADK_TABLES):
        return  # a fresh database: ADK creates them all
    missing = sorted(set(ADK_TABLES) - present)
    if missing:
        raise DatabaseError(
            ErrorCode.DATABASE_TABLE_MISSING,
            f"{store.name} lacks the session table(s) {', '.join(missing)}",
            "run plangate db check --repair to recreate them (their rows are lost)",
        )


async def database_health(runner: Runner) -> None:
    """Raise ``DatabaseError`` unless both the session database (ADK's engine) and the
    plan store answer; for SQLite, unless the file is still the one opened at start."""
    # Both asked at once: each is a few hops to a driver thread, and a load balancer
    # asks often.
    answers = await asyncio.gather(
        _sessions_answer(runner), _plans_answer(runner), return_exceptions=True
    )
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer


async def _sessions_answer(runner: Runner) -> None:
    engine = getattr(runner.session_service, "db_engine", None)
    if engine is None:
        return
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise database_error(exc, f"database {redacted(str(engine.url))}") from None


async def _plans_answer(runner: Runner) -> None:
    runtime = plan_runtime(runner.agent) if isinstance(runner.agent, LlmAgent) else None
    if runtime is None:
        return
    try:
        store = await runtime.store()
    except Exception as exc:
        raise database_error(exc) from None
    await store.ping()


def failure_text(exc: BaseException) -> tuple[str | None, str]:
    """What a surface shows for a failed run: a database failure as its code and one
    plain line (never the statement), anything else as its type and message."""
    if is_database_failure(exc):
        error = database_error(exc)
        return error.code.value, error.line()
    return None, f"{type(exc).__name__}: {exc}"
