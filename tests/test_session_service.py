"""ADK's session contract, run against ADK's DatabaseSessionService and plangate's
StoreSessionService on the same database (SQLite and PostgreSQL): what a surface and the
Runner rely on behaves the same on both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, DatabaseSessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from plangate.adk import setup_plan
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.adk.session_service import StoreSessionService
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.store.urls import resolve_database_url

Factory = Callable[[str], BaseSessionService]

SERVICES: dict[str, Factory] = {
    "adk": lambda url: DatabaseSessionService(db_url=resolve_database_url(url)),
    "plangate": StoreSessionService,
}


@pytest.fixture(params=sorted(SERVICES))
def make_service(request: pytest.FixtureRequest) -> Factory:
    return SERVICES[request.param]


def _event(author: str, text_: str, delta: dict[str, Any] | None = None) -> Event:
    return Event(
        author=author,
        invocation_id="inv-1",
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text_)]
        ),
        actions=EventActions(state_delta=delta or {}),
    )


async def _close(service: BaseSessionService) -> None:
    close = getattr(service, "close", None)
    if close is not None:
        await close()


def test_state_and_events_survive_a_new_service(database_url: str, make_service: Factory) -> None:
    async def main() -> None:
        first = make_service(database_url)
        session = await first.create_session(
            app_name="app", user_id="u", session_id="s1", state={"k": 1, "app:a": "A"}
        )
        await first.append_event(session, _event("user", "hello", {"k": 2, "user:name": "Ada"}))
        await first.append_event(session, _event("agent", "hi", {"temp:scratch": 1, "x": [1]}))
        assert session.state["temp:scratch"] == 1  # the live object keeps temp state
        await _close(first)

        again = make_service(database_url)  # a restart: nothing but the database
        loaded = await again.get_session(app_name="app", user_id="u", session_id="s1")
        assert loaded is not None
        assert loaded.state == {"k": 2, "x": [1], "app:a": "A", "user:name": "Ada"}
        assert [e.content.parts[0].text for e in loaded.events] == ["hello", "hi"]
        assert "temp:scratch" not in loaded.events[1].actions.state_delta
        # App and user state reach the user's other sessions.
        other = await again.create_session(app_name="app", user_id="u", session_id="s2")
        assert other.state == {"app:a": "A", "user:name": "Ada"}
        state_only = await again.get_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            config=GetSessionConfig(num_recent_events=0),
        )
        assert state_only is not None and state_only.events == [] and state_only.state["k"] == 2
        last = await again.get_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            config=GetSessionConfig(num_recent_events=1),
        )
        assert last is not None and [e.content.parts[0].text for e in last.events] == ["hi"]
        await _close(again)

    asyncio.run(main())


def test_refusals(database_url: str, make_service: Factory) -> None:
    async def main() -> None:
        service = make_service(database_url)
        session = await service.create_session(app_name="app", user_id="u", session_id="dup")
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name="app", user_id="u", session_id="dup")
        assert await service.get_session(app_name="app", user_id="u", session_id="nope") is None
        # A session object another writer has overtaken cannot append: nothing is stored.
        stale = await service.get_session(app_name="app", user_id="u", session_id="dup")
        assert stale is not None
        await asyncio.sleep(0.01)
        await service.append_event(session, _event("user", "first", {"n": 1}))
        with pytest.raises(StaleSessionError):
            await service.append_event(stale, _event("user", "lost", {"n": 2}))
        stored = await service.get_session(app_name="app", user_id="u", session_id="dup")
        assert stored is not None and stored.state == {"n": 1}
        assert [e.content.parts[0].text for e in stored.events] == ["first"]
        await _close(service)

    asyncio.run(main())


def test_each_read_is_a_session_of_its_own(database_url: str, make_service: Factory) -> None:
    """A caller may change the events of the session it read: the next read gives the
    stored ones. A session deleted and created again under its id has only its own."""

    async def main() -> None:
        service = make_service(database_url)
        session = await service.create_session(app_name="app", user_id="u", session_id="own")
        for n in range(3):
            await service.append_event(session, _event("user", f"said {n}"))
        first = await service.get_session(app_name="app", user_id="u", session_id="own")
        assert first is not None
        first.events[0].content.parts[0].text = "changed by a caller"  # type: ignore[index,union-attr]
        first.events.pop()
        second = await service.get_session(app_name="app", user_id="u", session_id="own")
        assert second is not None
        texts = [e.content.parts[0].text for e in second.events]  # type: ignore[index,union-attr]
        assert texts == ["said 0", "said 1", "said 2"]
        assert second.events[1] is not first.events[1]
        # Deleted and created again by another service (another process, say).
        other = make_service(database_url)
        await other.delete_session(app_name="app", user_id="u", session_id="own")
        again = await other.create_session(app_name="app", user_id="u", session_id="own")
        await other.append_event(again, _event("user", "new life"))
        third = await service.get_session(app_name="app", user_id="u", session_id="own")
        assert third is not None
        assert [e.content.parts[0].text for e in third.events] == ["new life"]  # type: ignore[index,union-attr]
        await _close(other)
        await _close(service)

    asyncio.run(main())


def test_list_and_delete(database_url: str, make_service: Factory) -> None:
    async def main() -> None:
        service = make_service(database_url)
        for sid in ("a", "b"):
            session = await service.create_session(app_name="app", user_id="u", session_id=sid)
            await service.append_event(session, _event("user", sid))
        await service.create_session(app_name="app", user_id="v", session_id="c")
        await service.create_session(app_name="other", user_id="u", session_id="d")
        listed = await service.list_sessions(app_name="app", user_id="u")
        assert sorted(s.id for s in listed.sessions) == ["a", "b"]
        everyone = await service.list_sessions(app_name="app")
        assert sorted(s.id for s in everyone.sessions) == ["a", "b", "c"]
        await service.delete_session(app_name="app", user_id="u", session_id="a")
        assert await service.get_session(app_name="app", user_id="u", session_id="a") is None
        listed = await service.list_sessions(app_name="app", user_id="u")
        assert [s.id for s in listed.sessions] == ["b"]
        again = await service.create_session(app_name="app", user_id="u", session_id="a")
        assert again.events == []  # nothing of the deleted session's events came back
        fetched = await service.get_session(app_name="app", user_id="u", session_id="a")
        assert fetched is not None and fetched.events == []
        await _close(service)

    asyncio.run(main())


def test_a_paused_plan_run_resumes_through_the_real_runner(
    database_url: str, make_service: Factory
) -> None:
    """Plan Mode's pause and resume (a human request, the reply, the mirror) on each."""

    async def main() -> None:
        model = ScriptedLlm()
        model.add([call("enter_plan_mode", objective="tidy up")], [text("planning now")])
        agent = setup_plan(LlmAgent(name="coder", model=model))
        runner = build_runner(
            agent, database_url=database_url, session_service=make_service(database_url)
        )
        session = await PlanSession.open(runner, session_id="t1")
        async for _ in session.run("please tidy"):
            pass
        [request] = await session.pending()
        reply = await session.submit(PlanSession.confirm_enter(request, True))
        assert reply.ready and reply.message is not None
        async for _ in session.run(reply.message):
            pass
        stored = await session.session()
        texts = [
            p.text for e in stored.events if e.content for p in e.content.parts or [] if p.text
        ]
        assert texts == ["please tidy", "planning now"]
        mode = await session.mode()
        assert mode.active
        # The session-state mirror equals the store after the run.
        record = await session.record()
        assert record is not None
        assert stored.state[session.runtime.state_key]["status"] == record.status.value
        await _close(runner.session_service)

    asyncio.run(main())
