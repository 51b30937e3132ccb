"""The step boundary recovers the call ids ADK strips from a model request by matching
each part to the first unused stored part with the same tool and payload; only tools a
decision can name are matched, and identical calls keep their order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from plangate.adk.callbacks import _call_ids  # pyright: ignore[reportPrivateUsage]
from plangate.plan.session_state import IgnoredReply, PlanSessionState, Resolution


def _call(call_id: str, name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def _reply(call_id: str, name: str, **response: Any) -> types.Part:
    return types.Part(
        function_response=types.FunctionResponse(id=call_id, name=name, response=response)
    )


@dataclass
class _Session:
    events: list[Event] = field(default_factory=list)


@dataclass
class _Context:
    session: _Session


def _history(*parts: types.Part) -> tuple[_Context, LlmRequest]:
    """The stored events and the request ADK builds from them (its own ids stripped)."""
    events = [
        Event(author="user" if p.function_response else "agent", content=types.Content(parts=[p]))
        for p in parts
    ]
    contents = []
    for part in parts:
        stripped = part.model_copy(deep=True)
        if stripped.function_call is not None:
            stripped.function_call.id = None
        if stripped.function_response is not None:
            stripped.function_response.id = None
        contents.append(types.Content(role="user", parts=[stripped]))
    return _Context(_Session(events)), LlmRequest(contents=contents)


def _ids_in_order(request: LlmRequest, ids: dict[int, str]) -> list[str | None]:
    return [ids.get(id(part)) for content in request.contents for part in content.parts or []]


def test_identical_calls_keep_their_order_when_only_the_later_one_was_decided() -> None:
    # Write(a) ran directly, then the same Write(a) was asked for and approved.
    context, request = _history(
        _call("adk-1", "Write", path="a"),
        _reply("adk-1", "Write", ok=True),
        _call("adk-2", "Write", path="a"),
        _reply("adk-2", "Write", ok=True),
    )
    state = PlanSessionState(
        resolutions={
            "adk-2": Resolution(result={"status": "approved"}, tool_name="Write", decides_call=True)
        }
    )
    ids = _call_ids(request, context, state)
    assert _ids_in_order(request, ids) == ["adk-1", "adk-1", "adk-2", "adk-2"]


def test_tools_no_decision_names_are_left_out_and_plan_tools_matched() -> None:
    context, request = _history(
        _call("adk-1", "Read", path="a"),
        _reply("adk-1", "Read", text="x"),
        _call("adk-2", "exit_plan_mode"),
        _reply("adk-2", "exit_plan_mode", status="approved"),
        _call("adk-3", "exit_plan_mode"),
    )
    state = PlanSessionState(
        resolutions={"adk-2": Resolution(result={"ok": True}, tool_name="exit_plan_mode")}
    )
    ids = _call_ids(request, context, state)
    assert _ids_in_order(request, ids) == [None, None, "adk-2", "adk-2", "adk-3"]


def test_an_ignored_reply_without_a_tool_name_matches_every_part() -> None:
    context, request = _history(
        _call("adk-1", "Read", path="a"),
        _reply("adk-1", "Read", text="x"),
    )
    state = PlanSessionState(ignored={"adk-9": IgnoredReply(reason="late")})
    ids = _call_ids(request, context, state)
    assert _ids_in_order(request, ids) == ["adk-1", "adk-1"]


def test_a_reply_sent_without_an_id_is_known_by_the_reply_the_store_applied() -> None:
    context, request = _history(_call("adk-1", "ask_user_question", question="which?"))
    request.contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        name="ask_user_question", response={"answer": "this"}
                    )
                )
            ],
        )
    )
    state = PlanSessionState(
        resolutions={
            "adk-1": Resolution(
                result={"answer": "this"},
                reply={"answer": "this"},
                tool_name="ask_user_question",
            )
        }
    )
    ids = _call_ids(request, context, state)
    assert _ids_in_order(request, ids) == ["adk-1", "adk-1"]
