"""A deterministic model that plays a script: each step answers one model call.

Used by the tests (through the real ADK Runner) and by the offline demo. A step is a
list of parts, or a function of the request returning parts, so a script can react to
tool results it sees.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field, PrivateAttr

__all__ = ["ScriptExhausted", "ScriptedLlm", "call", "last_tool_result", "text"]

Step = Sequence[types.Part] | Callable[[LlmRequest], Sequence[types.Part]]


class ScriptExhausted(RuntimeError):
    pass


class ScriptedLlm(BaseLlm):
    model: str = "scripted"
    steps: list[Any] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)
    assign_ids: bool = True
    """Give calls ids of the model's own; False leaves it to ADK, like Gemini does."""
    _counter: int = PrivateAttr(default=0)

    def add(self, *steps: Step) -> ScriptedLlm:
        self.steps.extend(steps)
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(_snapshot(llm_request))
        if not self.steps:
            raise ScriptExhausted(f"the script has no step for model call #{len(self.requests)}")
        step = self.steps.pop(0)
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


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
