"""A user's switch of Plan Mode is told to the model once, at the step it applies from --
whether it came through ``PlanSession`` (``/plan``, ``/plan off``, the web toggle, ACP) or
through session state -- unless something the model sees already says it. Through the
real Runner with a scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.models.llm_request import LlmRequest

from harness import make_agent, tool_results
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.plan.prompts import MODE_SWITCH_MARKER, mode_switch_note
from plangate.policy.effects import Effect, declare_effect

ENTERED = mode_switch_note("entered")
LEFT = mode_switch_note("left")


async def open_session(
    database_url: str, model: ScriptedLlm, *, tools: list[Any] | None = None, **state: Any
) -> PlanSession:
    runner = build_runner(make_agent(model, tools=tools), database_url=database_url, app_name="n")
    return await PlanSession.open(runner, session_id="s1", state=state or None)


async def turn(session: PlanSession, message: Any, **kwargs: Any) -> list[Any]:
    return [event async for event in session.run(message, **kwargs)]


def notes(request: LlmRequest) -> list[str]:
    """The switch notes in one model request."""
    return [
        part.text
        for content in request.contents
        for part in content.parts or []
        if part.text and part.text.startswith(MODE_SWITCH_MARKER)
    ]


def notes_per_request(model: ScriptedLlm, since: int) -> list[list[str]]:
    return [notes(request) for request in model.requests[since:]]


async def test_leaving_between_runs_is_told_at_the_next_step_once(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model, agent_mode="plan")
    model.add([call("update_plan_content", content="1. Step", mode="replace")], [text("drafted")])
    await turn(session, "plan the fix")
    # Selected before the model's first step: its first prompt says the mode; no note.
    assert notes_per_request(model, 0) == [[], []]
    assert (await session.leave_plan()).startswith("Left plan mode")

    before = len(model.requests)
    model.add([call("Read", path="a")], [text("done")])
    await turn(session, "just fix it")
    assert notes_per_request(model, before) == [[LEFT], []]
    # The note is the last thing the model reads, after the user's message.
    last = model.requests[before].contents[-1].parts or []
    assert last[0].text == LEFT

    before = len(model.requests)
    model.add([text("still done")])
    await turn(session, "thanks")
    assert notes_per_request(model, before) == [[]]


async def test_selecting_plan_between_runs_is_told_once(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    model.add([text("hello")])
    await turn(session, "hi")
    await session.select_plan()
    before = len(model.requests)
    model.add([call("Read", path="a")], [text("exploring")])
    await turn(session, "add persistence")
    assert notes_per_request(model, before) == [[ENTERED], []]
    assert (await session.record()).status is PlanStatus.EXPLORING


async def test_a_switch_written_into_session_state_is_told_too(database_url: str) -> None:
    """A host writing the selection into session state, as the seed's UI does."""
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    model.add([text("hello")])
    await turn(session, "hi")
    before = len(model.requests)
    model.add([text("planning")])
    await turn(session, "plan it", state_delta={"agent_mode": "plan"})
    model.add([text("acting")])
    await turn(session, "no, just do it", state_delta={"agent_mode": "agent"})
    assert notes_per_request(model, before) == [[ENTERED], [LEFT]]
    assert (await session.record()).status is PlanStatus.CANCELLED


async def test_entering_and_leaving_before_the_next_step_tells_nothing(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    model.add([text("hello")])
    await turn(session, "hi")
    await session.select_plan()
    model.add([text("planning")])
    await turn(session, "plan it")
    await session.leave_plan()
    await session.select_plan()  # left and entered again: a new plan, and it is said
    before = len(model.requests)
    model.add([text("planning again")])
    await turn(session, "plan the other thing")
    assert notes_per_request(model, before) == [[ENTERED]]

    await session.leave_plan()
    await session.select_plan()
    await session.leave_plan()  # the model last saw Plan Mode left: that is said once
    before = len(model.requests)
    model.add([text("acting")])
    await turn(session, "do it")
    assert notes_per_request(model, before) == [[LEFT]]


async def test_leaving_while_a_request_waits_is_told_by_its_result(database_url: str) -> None:
    """The withdrawn question's result says the user left; no second note."""
    model = ScriptedLlm()
    session = await open_session(database_url, model, agent_mode="plan")
    model.add([call("ask_user_question", question="Which database?")])
    await turn(session, "add persistence")
    await session.leave_plan()
    before = len(model.requests)
    model.add([text("acting")])
    await turn(session, "never mind, use SQLite")
    assert notes_per_request(model, before) == [[]]
    shown = [
        part.function_response.response
        for content in model.requests[before].contents
        for part in content.parts or []
        if part.function_response is not None
    ]
    assert shown and "The user left Plan Mode" in str(shown[-1])


async def test_leaving_mid_run_is_told_at_the_next_step(database_url: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def Inspect(path: str) -> dict[str, Any]:
        """Inspect a path slowly."""
        started.set()
        await release.wait()
        return {"inspected": path}

    model = ScriptedLlm()
    session = await open_session(
        database_url, model, tools=[declare_effect(Inspect, Effect.READ)], agent_mode="plan"
    )
    model.add([text("ready")])
    await turn(session, "hi")
    before = len(model.requests)
    model.add([call("Inspect", path="src")], [text("acting")], [text("next")])
    run = asyncio.create_task(turn(session, "do the task"))
    await asyncio.wait_for(started.wait(), 30)
    await session.leave_plan()
    release.set()
    events = await asyncio.wait_for(run, 60)
    assert tool_results(events, "Inspect") == [{"inspected": "src"}]
    assert notes_per_request(model, before) == [[], [LEFT]]
    await turn(session, "and now?")
    assert notes_per_request(model, before + 2) == [[]]
