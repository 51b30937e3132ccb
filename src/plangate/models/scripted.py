"""A deterministic model that plays a script: each step answers one model call.

Used by the tests (through the real ADK Runner) and by the offline demo. A step is a
list of parts, or a function of the request returning parts, so a script can react to
tool results it sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field, PrivateAttr

__all__ = [
    "ScriptExhausted",
    "ScriptedLlm",
    "call",
    "last_tool_result",
    "load_script",
    "text",
]

Step = Sequence[types.Part] | Callable[[LlmRequest], Sequence[types.Part]]


class ScriptExhausted(RuntimeError):
    pass


class ScriptedLlm(BaseLlm):
    model: str = "scripted"
    steps: list[Any] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)
    assign_ids: bool = True
    """Give calls ids of the model's own; False leaves it to ADK, like Gemini does."""
    side_answer: str | None = None
    """When set, a request that offers no tools (a side call such as the protocol
    classifier) gets this text and uses no step."""
    _counter: int = PrivateAttr(default=0)

    def add(self, *steps: Step) -> ScriptedLlm:
        self.steps.extend(steps)
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.side_answer is not None and not (llm_request.config and llm_request.config.tools):
            yield LlmResponse(content=types.Content(role="model", parts=[text(self.side_answer)]))
            return
        self.requests.append(_snapshot(llm_request))
        if not self.steps:
            raise ScriptExhausted(f"the script has no step for model call #{len(self.requests)}")
        step: Step = self.steps.pop(0)
        parts = list(step(llm_request) if callable(step) else step)
        for part in parts:
            if self.assign_ids and part.function_call is not None and not part.function_call.id:
                self._counter += 1
                part.function_call.id = f"call-{self._counter}-{id(self) % 10_000}"
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def _snapshot(request: LlmRequest) -> LlmRequest:
    """What the model was sent. The tool objects are shared, not copied: they can hold
    resources (database connections) that cannot be deep-copied."""
    snapshot = request.model_copy()
    snapshot.contents = [content.model_copy(deep=True) for content in request.contents]
    snapshot.config = request.config.model_copy(deep=True)
    return snapshot


def call(name: str, call_id: str | None = None, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args, id=call_id))


def text(value: str) -> types.Part:
    return types.Part(text=value)


def last_tool_result(request: LlmRequest, name: str | None = None) -> dict[str, Any] | None:
    """The latest function response in a request (optionally of one tool)."""
    for content in reversed(request.contents):
        for part in reversed(content.parts or []):
            response = part.function_response
            if response is not None and (name is None or response.name == name):
                return dict(response.response or {})
    return None


def load_script(path: str | Path) -> ScriptedLlm:
    """A scripted model from a JSON file (``--model script:PATH``, for terminal tests).

    The file holds a list of steps; each step is a list of parts::

        [[{"call": "ask_user_question", "args": {"question": "Which database?"}}],
         [{"echo": "You said: "}]]

    ``{"text": ...}`` is text, ``{"call": name, "args": {...}}`` a function call, and
    ``{"echo": prefix}`` the prefix followed by the JSON of the function responses the
    model was just given. Side calls without tools (the protocol classifier) are answered
    as general-task work without using a step.
    """
    raw = json.loads(Path(path).read_text())
    if not isinstance(raw, list) or not all(isinstance(step, list) for step in raw):
        raise ValueError(f"{path}: a script is a JSON list of steps, each a list of parts")
    side = dumps(
        {
            "protocolId": "general-task",
            "protocolVersion": 1,
            "confidence": 0.9,
            "reasonCodes": ["SCRIPTED"],
            "taskRelation": "replace",
        }
    )
    return ScriptedLlm(
        model=f"script:{Path(path).name}",
        steps=[_script_step(step) for step in raw],
        side_answer=side,
    )


def _script_step(step: list[dict[str, Any]]) -> Step:
    if any("echo" in part for part in step):
        return lambda request: [_script_part(part, request) for part in step]
    return [_script_part(part, None) for part in step]


def _script_part(part: dict[str, Any], request: LlmRequest | None) -> types.Part:
    if "call" in part:
        return call(part["call"], **(part.get("args") or {}))
    if "echo" in part:
        assert request is not None
        latest = request.contents[-1] if request.contents else None
        responses = [
            p.function_response.response
            for p in (latest.parts if latest else None) or []
            if p.function_response is not None
        ]
        return text(str(part["echo"]) + dumps(responses))
    if "text" in part:
        return text(str(part["text"]))
    raise ValueError(f"unknown script part {part!r}: use text, call or echo")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
