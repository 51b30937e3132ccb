"""Runner wiring: a resumable App on one database shared by sessions and plans."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, DatabaseSessionService
from google.genai import types

from plangate.adk.optional_imports import remember_missing_a2a
from plangate.adk.plugin import PlanPlugin
from plangate.adk.setup import plan_runtime
from plangate.store.file_guard import guard_sqlite_file
from plangate.store.storable import keep_text_storable, storable_json
from plangate.store.urls import ensure_sqlite_folder, resolve_database_url

__all__ = [
    "SESSIONS_ENV_VAR",
    "adk_session_service",
    "build_app",
    "build_runner",
    "function_reply",
]

SESSIONS_ENV_VAR = "PLANGATE_SESSIONS"


def build_app(
    agent: BaseAgent,
    name: str = "plangate",
    *,
    plugins: Sequence[BasePlugin] = (),
    database_url: str | None = None,
) -> App:
    """A resumable App: long-running plan tools pause the run instead of ending it.

    It carries :class:`~plangate.adk.plugin.PlanPlugin`, which records each human reply
    when it is given, matches replies without a call id and keeps the plan mirror equal
    to the store. An App you build yourself needs both, or the first model step of a
    Plan-Mode agent raises ``PLAN_APP_MISCONFIGURED`` (``plangate.adk.app_check``).

    Plans of agents whose options name no database live in ``database_url``, resolved
    now (``PLANGATE_DATABASE_URL``, else ``.plangate/plangate.db`` in the working
    directory). This is the App ADK's ``adk web``/``adk run``/``adk api_server`` serve
    when ``agent.py`` defines ``app = build_app(root_agent)``; sessions are then kept by
    the session service ADK is given (``--session_service_uri``).
    """
    remember_missing_a2a()
    _pin_plan_database(agent, resolve_database_url(database_url))
    return App(
        name=name,
        root_agent=agent,
        resumability_config=ResumabilityConfig(is_resumable=True),
        plugins=[PlanPlugin(), *plugins],
    )


def adk_session_service(url: str) -> DatabaseSessionService:
    """ADK's ``DatabaseSessionService`` on ``url``, held to plangate's rules for that file."""
    # Text PostgreSQL refuses (NUL) is cleaned the same way as in plangate's store. On
    # SQLite a write waits for the file's lock as long as plangate's own do (30 s, not
    # the driver's 5): under load ADK's appends queue behind each other's commits, and a
    # run would otherwise end with DATABASE_ERROR while the file was only busy.
    extra: dict[str, Any] = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    service = DatabaseSessionService(db_url=url, json_serializer=storable_json, **extra)
    keep_text_storable(service.db_engine)
    # ADK's own engine writes the sessions: it too must fail if the file is replaced.
    guard_sqlite_file(service.db_engine, url)
    return service


def build_runner(
    agent: BaseAgent,
    *,
    database_url: str | None = None,
    app_name: str = "plangate",
    session_service: BaseSessionService | None = None,
    sessions: Literal["adk", "plangate"] | None = None,
) -> Runner:
    """A Runner whose ADK sessions live in the same database as the plans and journal.

    ``sessions`` picks who keeps them there: ``"plangate"``,
    :class:`~plangate.adk.session_service.StoreSessionService` on plangate's own store (an
    event appended in one commit), or ``"adk"``, ADK's ``DatabaseSessionService``.
    Without it, ``PLANGATE_SESSIONS``; without that, plangate's unless ADK's already
    keeps sessions in that database (``plangate.adk.session_choice``), so existing
    threads stay readable. ``session_service`` replaces all of them (an in-memory one
    for tests and benchmarks, say); plans and the journal stay durable.
    """
    sessions = sessions or os.environ.get(SESSIONS_ENV_VAR) or None  # type: ignore[assignment]
    if sessions not in (None, "adk", "plangate"):
        raise ValueError(
            f"{SESSIONS_ENV_VAR} must be 'adk' (ADK's DatabaseSessionService) or 'plangate' "
            f"(sessions on plangate's store), got {sessions!r}"
        )
    url = resolve_database_url(database_url)
    _pin_plan_database(agent, url)
    ensure_sqlite_folder(url)
    if session_service is None and sessions == "plangate":
        from plangate.adk.session_service import StoreSessionService

        session_service = StoreSessionService(url)
    elif session_service is None and sessions == "adk":
        session_service = adk_session_service(url)
    elif session_service is None:
        from plangate.adk.session_choice import FirstUseSessionService

        session_service = FirstUseSessionService(url, lambda: adk_session_service(url))
    return Runner(app=build_app(agent, app_name, database_url=url), session_service=session_service)


def function_reply(call_id: str, name: str, response: dict[str, Any]) -> types.Content:
    """The user turn that answers a paused human-in-the-loop call."""
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(id=call_id, name=name, response=response)
            )
        ],
    )


def _pin_plan_database(agent: BaseAgent, url: str) -> None:
    """Plans of agents whose options name no database live in ``url``. Pinned once, so
    the gate's store lookup does not resolve the environment on every call."""
    for governed in _walk(agent):
        runtime = plan_runtime(governed) if isinstance(governed, LlmAgent) else None
        if runtime is not None and runtime.options.database_url is None:
            runtime.database_url = url


def _walk(agent: BaseAgent) -> Iterator[BaseAgent]:
    yield agent
    for child in agent.sub_agents:
        yield from _walk(child)
