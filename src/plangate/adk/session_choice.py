"""Who keeps a database's ADK sessions when nobody said: plangate's session service,
unless ADK's already keeps sessions there.

plangate's ``StoreSessionService`` costs a served run a third of the CPU ADK's
``DatabaseSessionService`` does on SQLite, and its commits share the connection the plan
state is read on (``benchmarks/bench_served.py``, ``bench_plan.py --long``). A database
whose threads ADK's service already holds keeps that service, so none of them is lost;
the two never mix in one database unless a caller picks one explicitly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from sqlalchemy import inspect, select, text

from plangate.adk.session_service import SESSION_KIND, StoreSessionService
from plangate.store.schema import documents
from plangate.store.shared import shared_store

__all__ = ["FirstUseSessionService", "sessions_in"]

Sessions = Literal["adk", "plangate"]


async def sessions_in(database_url: str | None) -> Sessions:
    """``"adk"`` when ADK's session table holds a session and plangate's store none;
    ``"plangate"`` otherwise (a new database, or one plangate's service already uses)."""
    store = await shared_store(database_url)
    async with store.engine.connect() as conn:
        mine = (
            await conn.execute(select(documents.c.key).where(documents.c.kind == SESSION_KIND))
        ).first()
        if mine is not None:
            return "plangate"
        tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        if "sessions" in tables and (await conn.execute(text("SELECT 1 FROM sessions"))).first():
            return "adk"
    return "plangate"


class FirstUseSessionService(BaseSessionService):
    """plangate's session service or ADK's (``adk()`` builds it), chosen by
    ``sessions_in`` at the first call and kept."""

    def __init__(self, database_url: str | None, adk: Callable[[], BaseSessionService]) -> None:
        self.database_url = database_url
        self._adk = adk
        self._chosen: BaseSessionService | None = None
        self._lock = asyncio.Lock()

    @property
    def chosen(self) -> BaseSessionService | None:
        """The service in use, once the first call chose it."""
        return self._chosen

    async def resolved(self) -> BaseSessionService:
        """The service in use, chosen now if no call chose it yet."""
        if self._chosen is None:
            async with self._lock:
                if self._chosen is None:
                    kept_by = await sessions_in(self.database_url)
                    self._chosen = (
                        self._adk() if kept_by == "adk" else StoreSessionService(self.database_url)
                    )
        return self._chosen

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        service = await self.resolved()
        return await service.create_session(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        service = await self.resolved()
        return await service.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        service = await self.resolved()
        return await service.list_sessions(app_name=app_name, user_id=user_id)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        service = await self.resolved()
        await service.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        service = await self.resolved()
        return await service.get_user_state(app_name=app_name, user_id=user_id)

    async def append_event(self, session: Session, event: Event) -> Event:
        service = await self.resolved()
        return await service.append_event(session, event)

    async def flush(self) -> None:
        if self._chosen is not None:
            await self._chosen.flush()
