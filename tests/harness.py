"""Drive the real ADK Runner over a real database, with a scripted model."""

from __future__ import annotations

import re
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.genai import types

from plangate.adk import PlanOptions, get_plan_record, setup_plan
from plangate.adk.runner import build_runner, function_reply
from plangate.errors import ErrorCode
from plangate.models.scripted import ScriptedLlm
from plangate.plan.record import PlanRecord
from plangate.policy.effects import Effect, declare_effect, declare_write_paths

WRITES: list[tuple[str, str]] = []


def Write(path: str, content: str) -> dict[str, Any]:
    """Write a file."""
    WRITES.append((path, content))
    return {"written": path}


def Read(path: str) -> dict[str, Any]:
    """Read a file."""
    return {"path": path, "content": f"contents of {path}"}


def write_file(path: str, content: str) -> dict[str, Any]:
    """An undeclared tool with a name no list knows."""
    WRITES.append((path, content))
    return {"written": path}


declare_effect(Write, Effect.WRITE)
declare_write_paths(Write, ("path",))  # relative to the agent's workspace (here the cwd)
declare_effect(Read, Effect.READ)


def make_agent(
    model: ScriptedLlm,
    options: PlanOptions | None = None,
    *,
    tools: list[Any] | None = None,
    sub_agents: list[Any] | None = None,
    name: str = "orchestrator",
) -> LlmAgent:
    agent = LlmAgent(
        name=name,
        model=model,
        instruction="You are a careful coding agent.",
        tools=tools if tools is not None else [Read, Write, write_file],
        sub_agents=sub_agents or [],
    )
    return setup_plan(agent, options or PlanOptions())


class Harness:
    def __init__(self, agent: LlmAgent, database_url: str, app_name: str = "tests") -> None:
        self.agent = agent
        self.app_name = app_name
        self.user_id = "user"
        self.runner = build_runner(agent, database_url=database_url, app_name=app_name)
        self.session_id = ""
        self.events: list[Event] = []

    async def start(
        self, state: dict[str, Any] | None = None, session_id: str | None = None
    ) -> str:
        session = await self.runner.session_service.create_session(
            app_name=self.app_name, user_id=self.user_id, state=state, session_id=session_id
        )
        self.session_id = session.id
        return session.id

    async def send(
        self, message: str | types.Content, state_delta: dict[str, Any] | None = None
    ) -> list[Event]:
        if isinstance(message, str):
            message = types.Content(role="user", parts=[types.Part(text=message)])
        events = [
            event
            async for event in self.runner.run_async(
                user_id=self.user_id,
                session_id=self.session_id,
                new_message=message,
                state_delta=state_delta,
            )
        ]
        self.events.extend(events)
        return events

    async def reply(self, call_id: str, name: str, response: dict[str, Any]) -> list[Event]:
        return await self.send(function_reply(call_id, name, response))

    async def session(self) -> Any:
        return await self.runner.session_service.get_session(
            app_name=self.app_name, user_id=self.user_id, session_id=self.session_id
        )

    async def state(self) -> dict[str, Any]:
        return dict((await self.session()).state)

    async def record(self) -> PlanRecord | None:
        return get_plan_record(await self.session(), branch=self.agent.name)


def tool_results(events: list[Event], name: str | None = None) -> list[dict[str, Any]]:
    results = [
        dict(part.function_response.response or {})
        for event in events
        for part in (event.content.parts if event.content else []) or []
        if part.function_response is not None
        and (name is None or part.function_response.name == name)
    ]
    for result in results:
        check_error_shape(result)
    return results


_CODE_PREFIX = re.compile(r"^([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)[:\s]")


def check_error_shape(result: dict[str, Any]) -> None:
    """Every error a scenario produces is of the one error model: a known code, a
    message and a hint beside the seed's ``"<CODE>: message"`` text. Run on every result
    the scenarios read, so each real run checks its errors."""
    error = result.get("error")
    if not isinstance(error, str):
        return
    prefix = _CODE_PREFIX.match(error)
    if prefix is None and "code" not in result:
        return  # a foreign tool's plain error text
    assert "code" in result, f"a coded error without a code field: {result}"
    code = ErrorCode(result["code"])  # raises for a code outside the enum
    assert isinstance(result.get("message"), str) and "hint" in result, result
    assert error.startswith(code.value), result


def paused_call_id(events: list[Event], name: str) -> str:
    """The id of the call the run paused on (a long-running call with no response)."""
    answered = {
        part.function_response.id
        for event in events
        for part in (event.content.parts if event.content else []) or []
        if part.function_response is not None
    }
    for event in reversed(events):
        for part in (event.content.parts if event.content else []) or []:
            call = part.function_call
            if call is not None and call.name == name and call.id not in answered:
                return call.id
    raise AssertionError(f"the run did not pause on {name}")


def final_text(events: list[Event]) -> str:
    """The text of the last model event that has any."""
    for event in reversed(events):
        parts = (event.content.parts if event.content else []) or []
        texts = [p.text for p in parts if p.text]
        if texts:
            return "".join(texts)
    raise AssertionError("no text in the run")


def user_texts(events: list[Event]) -> list[str]:
    """What the user said, in order: the text of the user's events."""
    return [
        part.text
        for event in events
        if event.author == "user" and event.content is not None
        for part in event.content.parts or []
        if part.text
    ]


def agreeing_reply(request: Any) -> types.Content:
    """The user who says yes: confirms Plan Mode, picks the first option, approves."""
    from plangate.adk.session import PlanSession

    if request.kind == "enter":
        return PlanSession.confirm_enter(request, True)
    if request.kind == "question":
        return PlanSession.answer(request, request.payload["options"][0])
    return PlanSession.approve(request)


async def run_agreeing(session: Any, message: str) -> None:
    """Run ``message``, then answer every request the run raises with ``agreeing_reply``
    until none is open."""
    async for _ in session.run(message):
        pass
    while pending := await session.pending():
        async for _ in session.run(agreeing_reply(pending[0])):
            pass
