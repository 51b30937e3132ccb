"""The ADK behaviour plangate relies on beyond ADK's documented API
(``plangate.adk.contract``), pinned through the real Runner: an ADK upgrade that renames
or changes any of it fails here, by name, before it breaks plan mode somewhere subtle."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import BaseTool, FunctionTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from plangate.adk.contract import (
    ADK_CALL_ID_PREFIX,
    DeclaredOnceFunctionTool,
    DeclaredOnceLongRunningTool,
    current_branch_events,
    is_adk_call_id,
    refresh_tools_every_step,
)
from plangate.models.scripted import ScriptedLlm, call, text


def lookup(path: str) -> dict[str, Any]:
    """Look something up."""
    return {"path": path, "found": True}


async def run(agent: LlmAgent, *messages: str) -> list[Any]:
    runner = Runner(app_name="contract", agent=agent, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="contract", user_id="u")
    events = []
    for message in messages:
        content = types.Content(role="user", parts=[types.Part(text=message)])
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=content
        ):
            events.append(event)
    return events


def test_the_private_names_still_exist_with_the_shape_plangate_calls() -> None:
    signature = inspect.signature(InvocationContext._get_events)
    assert {"current_invocation", "current_branch"} <= set(signature.parameters), (
        "ADK changed InvocationContext._get_events: update plangate.adk.contract"
    )
    assert hasattr(InvocationContext, "should_pause_invocation")
    probe = _CountingToolset()
    assert probe._use_invocation_cache is True, (
        "ADK renamed BaseToolset._use_invocation_cache: update plangate.adk.contract"
    )
    from google.adk.utils._function_call_names import AF_FUNCTION_CALL_ID_PREFIX

    assert AF_FUNCTION_CALL_ID_PREFIX == ADK_CALL_ID_PREFIX


async def test_current_branch_events_are_this_invocations_only() -> None:
    seen: list[list[Any]] = []

    def before_model(callback_context: Any, llm_request: Any) -> None:
        ctx = callback_context.get_invocation_context()
        events = current_branch_events(ctx)
        assert all(e.invocation_id == ctx.invocation_id for e in events)
        seen.append(events)

    model = ScriptedLlm().add([text("first")], [call("lookup", path="a")], [text("second")])
    agent = LlmAgent(name="a", model=model, tools=[lookup], before_model_callback=before_model)
    await run(agent, "one", "two")
    # 2nd invocation, 2nd model call: its user message, the call, the response -- nothing
    # of the first invocation.
    last = seen[-1]
    assert [e.author for e in last] == ["user", "a", "a"]
    assert last[1].get_function_calls()[0].name == "lookup"
    assert last[2].get_function_responses()[0].response == {"path": "a", "found": True}


class _CountingToolset(BaseToolset):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    async def get_tools(self, readonly_context: Any = None) -> list[BaseTool]:
        self.asked += 1
        return [FunctionTool(lookup)]


@pytest.mark.parametrize("refresh", [True, False])
async def test_a_toolset_can_be_asked_again_at_every_step(refresh: bool) -> None:
    toolset = _CountingToolset()
    if refresh:
        refresh_tools_every_step(toolset)
    model = ScriptedLlm().add([call("lookup", path="a")], [call("lookup", path="b")], [text("ok")])
    await run(LlmAgent(name="a", model=model, tools=[toolset]), "go")
    # Three model steps (plus the lookups of the calls themselves) in one invocation.
    assert (toolset.asked >= 3) if refresh else (toolset.asked == 1)


async def test_adk_names_id_less_calls_and_strips_those_ids_before_the_model() -> None:
    model = ScriptedLlm(assign_ids=False).add([call("lookup", path="a")], [text("ok")])
    events = await run(LlmAgent(name="a", model=model, tools=[lookup]), "go")
    stored = [c.id for e in events for c in e.get_function_calls()]
    assert len(stored) == 1 and is_adk_call_id(stored[0])
    sent = [
        part
        for content in model.requests[1].contents
        for part in content.parts or []
        if part.function_call or part.function_response
    ]
    assert [p.function_call.id for p in sent if p.function_call] == [None]
    assert [p.function_response.id for p in sent if p.function_response] == [None]


async def test_ids_a_model_sent_reach_the_model_unchanged() -> None:
    model = ScriptedLlm().add([call("lookup", call_id="toolu_01", path="a")], [text("ok")])
    await run(LlmAgent(name="a", model=model, tools=[lookup]), "go")
    sent = [p for c in model.requests[1].contents for p in c.parts or []]
    assert [p.function_call.id for p in sent if p.function_call] == ["toolu_01"]
    assert [p.function_response.id for p in sent if p.function_response] == ["toolu_01"]
    assert not is_adk_call_id("toolu_01") and not is_adk_call_id(None)


async def test_a_declared_once_tool_reaches_the_model_with_adks_declaration() -> None:
    """ADK builds a request's tool list from ``_get_declaration``; the cached one is the
    same declaration ADK builds itself, long-running note included, at every step."""
    from google.adk.models.llm_request import LlmRequest

    for cached, plain in (
        (DeclaredOnceFunctionTool(lookup), FunctionTool(lookup)),
        (DeclaredOnceLongRunningTool(lookup), LongRunningFunctionTool(lookup)),
    ):
        declarations = []
        for _ in range(2):
            request = LlmRequest()
            await cached.process_llm_request(tool_context=None, llm_request=request)  # type: ignore[arg-type]
            assert request.config.tools is not None
            [tool] = request.config.tools
            assert tool.function_declarations is not None
            declarations.extend(tool.function_declarations)
        expected = plain._get_declaration()
        assert declarations == [expected, expected]
        assert request.tools_dict["lookup"] is cached
