"""Who keeps the sessions when nobody said: plangate's session service on a new
database, ADK's where ADK's already keeps threads (they stay readable), and whatever a
caller names otherwise."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.sessions import DatabaseSessionService

from harness import user_texts
from plangate.adk import PlanOptions, setup_plan
from plangate.adk.database import prepare_database
from plangate.adk.runner import SESSIONS_ENV_VAR, adk_session_service, build_runner
from plangate.adk.session import PlanSession
from plangate.adk.session_choice import FirstUseSessionService, sessions_in
from plangate.adk.session_service import StoreSessionService
from plangate.models.scripted import ScriptedLlm, text
from plangate.store.urls import resolve_database_url


def _runner(database_url: str, model: ScriptedLlm, **options: Any) -> Any:
    agent = setup_plan(LlmAgent(name="agent", model=model), PlanOptions())
    return build_runner(agent, database_url=database_url, app_name="choice", **options)


async def _say(runner: Any, words: str, session_id: str | None = None) -> PlanSession:
    session = await PlanSession.open(runner, session_id=session_id)
    async for _ in session.run(words):
        pass
    return session


async def test_a_new_database_gets_plangates_session_service(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SESSIONS_ENV_VAR, raising=False)
    await prepare_database(database_url)  # as every entry point does: ADK's tables, empty
    model = ScriptedLlm().add([text("hi")])
    runner = _runner(database_url, model)
    service = runner.session_service
    assert isinstance(service, FirstUseSessionService) and service.chosen is None
    await _say(runner, "hello", "t1")
    assert isinstance(service.chosen, StoreSessionService)
    assert await sessions_in(database_url) == "plangate"
    # A later process, with ADK's tables there all along, chooses the same.
    again = _runner(database_url, ScriptedLlm())
    found = await again.session_service.get_session(
        app_name="choice", user_id="user", session_id="t1"
    )
    assert found is not None and user_texts(found.events) == ["hello"]


async def test_a_database_whose_threads_adk_keeps_stays_with_adk(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SESSIONS_ENV_VAR, raising=False)
    await prepare_database(database_url)
    earlier = _runner(database_url, ScriptedLlm().add([text("hi")]), sessions="adk")
    await _say(earlier, "from before", "old")
    assert await sessions_in(database_url) == "adk"
    runner = _runner(database_url, ScriptedLlm().add([text("again")]))
    session = await PlanSession.find(runner, session_id="old")
    assert session is not None
    assert isinstance(runner.session_service.chosen, DatabaseSessionService)
    async for _ in session.run("still here"):
        pass
    service = DatabaseSessionService(db_url=resolve_database_url(database_url))
    try:
        stored = await service.get_session(app_name="choice", user_id="user", session_id="old")
    finally:
        await service.db_engine.dispose()
    assert stored is not None and user_texts(stored.events) == ["from before", "still here"]


async def test_a_named_choice_wins(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SESSIONS_ENV_VAR, "adk")
    assert isinstance(_runner(database_url, ScriptedLlm()).session_service, DatabaseSessionService)
    assert isinstance(
        _runner(database_url, ScriptedLlm(), sessions="plangate").session_service,
        StoreSessionService,
    )
    monkeypatch.setenv(SESSIONS_ENV_VAR, "sqlite")
    with pytest.raises(ValueError, match=SESSIONS_ENV_VAR):
        _runner(database_url, ScriptedLlm())
    service = adk_session_service(resolve_database_url(database_url))
    await service.db_engine.dispose()


async def test_adks_sessions_wait_for_a_busy_file_as_long_as_plangates_store(
    tmp_path: Any,
) -> None:
    """Under load ADK's appends queue behind other commits on the file: its driver's
    default 5 s would end runs with DATABASE_ERROR while the file is only busy."""
    from sqlalchemy import text as sql

    from plangate.store.store import Store

    url = resolve_database_url(f"sqlite:///{tmp_path / 'plangate.db'}")
    await prepare_database(url)
    service = adk_session_service(url)
    store = await Store.open(url)
    try:
        async with service.db_engine.connect() as adk, store.engine.connect() as ours:
            theirs = (await adk.execute(sql("PRAGMA busy_timeout"))).scalar()
            plangates = (await ours.execute(sql("PRAGMA busy_timeout"))).scalar()
        assert theirs == plangates == 30_000
    finally:
        await service.db_engine.dispose()
        await store.close()


@pytest.mark.parametrize("sessions", ["plangate", "adk", None])
async def test_the_thread_list_titles_each_thread_by_its_first_message(
    database_url: str, sessions: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever keeps the sessions (``None``: chosen at first use), the list names each
    thread by its first user message, newest thread first. On plangate's service that
    title comes from a bounded read of the first events, not from the whole thread."""
    from google.adk.events import Event, EventActions
    from google.genai import types

    from plangate.web.threads import thread_list

    monkeypatch.delenv(SESSIONS_ENV_VAR, raising=False)
    await prepare_database(database_url)
    model = ScriptedLlm().add([text("one")], [text("two")], [text("three")])
    runner = _runner(database_url, model, sessions=sessions)
    first = await _say(runner, "fix the build " + "x" * 90, "t-first")
    async for _ in first.run("and then the docs"):
        pass
    # A thread whose first events carry no user text: an agent's state write, then a reply
    # to a paused call (a user event without text), then the message.
    service = runner.session_service
    quiet = await service.create_session(app_name="choice", user_id="user", session_id="t-q")
    reply = types.Part(function_response=types.FunctionResponse(name="f", id="c1", response={}))
    for event in (
        Event(author="agent", actions=EventActions(state_delta={"k": 1})),
        Event(author="user", content=types.Content(role="user", parts=[reply])),
        Event(author="user", content=types.Content(role="user", parts=[types.Part(text=" hi ")])),
    ):
        await service.append_event(quiet, event)
    await _say(runner, "second thread", "t-second")
    listed = await thread_list(runner, "user", running={"t-second"})
    assert [(t["threadId"], t["title"], t["running"]) for t in listed] == [
        ("t-second", "second thread", True),
        ("t-q", "hi", False),
        ("t-first", "fix the build " + "x" * 65 + "…", False),
    ]
    if sessions == "adk":
        await service.db_engine.dispose()  # type: ignore[attr-defined]
