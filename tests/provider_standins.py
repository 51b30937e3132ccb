"""Fake model providers on 127.0.0.1 speaking each provider's real HTTP wire format:
OpenAI chat completions (JSON and server-sent events), Anthropic Messages and Gemini
``generateContent``. A test gives the stand-in a script -- one step per model call -- and
plangate's real client path (LiteLLM, google-genai) talks to it over HTTP.

A step is a ``Reply`` (text and/or tool calls, several calls = parallel calls in one
response), a ``Fail`` (an HTTP error in the provider's own error shape), or a function of
the request body returning one. Every request is recorded with its headers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

API_KEY = "test-key"


@dataclass
class Reply:
    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"


Step = Reply | Fail | Callable[[dict[str, Any]], "Reply | Fail"]


@dataclass
class Received:
    provider: str
    headers: dict[str, str]
    body: dict[str, Any]


class StandIn:
    """One fake provider endpoint serving all three wire formats from one script."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.requests: list[Received] = []
        self.issued_ids: list[list[str]] = []
        self.call_counts: list[int] = []
        """Per answered step: the ids the stand-in gave its calls, and how many calls."""
        self.base_url = ""

    def script(self, *steps: Step) -> StandIn:
        self.steps.extend(steps)
        return self

    def bodies(self, provider: str | None = None) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if provider in (None, r.provider)]

    # -- the app ---------------------------------------------------------------------

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1beta/models/{target:path}", self._gemini, methods=["POST"]),
            ]
        )

    async def _next(self, provider: str, request: Request, authorized: bool) -> Reply | Fail:
        body = await request.json()
        self.requests.append(Received(provider, dict(request.headers), body))
        if not authorized:
            return Fail(401, "invalid api key")
        if not self.steps:
            return Fail(500, f"the script has no step for request #{len(self.requests)}")
        step = self.steps.pop(0)
        return step(body) if callable(step) else step

    def _ids(self, prefix: str, reply: Reply) -> list[str]:
        n = len(self.issued_ids) + 1
        ids = [f"{prefix}{n}_{i}" for i in range(len(reply.calls))]
        self.issued_ids.append(ids)
        self.call_counts.append(len(ids))
        return ids

    # -- OpenAI chat completions -------------------------------------------------------

    async def _openai(self, request: Request) -> Response:
        authorized = request.headers.get("authorization") == f"Bearer {API_KEY}"
        step = await self._next("openai", request, authorized)
        if isinstance(step, Fail):
            kind = {401: "invalid_request_error", 429: "rate_limit_exceeded"}
            return JSONResponse(
                {
                    "error": {
                        "message": step.message,
                        "type": kind.get(step.status, "server_error"),
                        "param": None,
                        "code": "invalid_api_key" if step.status == 401 else None,
                    }
                },
                status_code=step.status,
            )
        ids = self._ids("call_", step)
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for call_id, (name, args) in zip(ids, step.calls, strict=True)
        ]
        finish = "tool_calls" if calls else "stop"
        base = {"id": f"chatcmpl-{len(self.requests)}", "created": int(time.time())}
        base["model"] = self.last_body()["model"]
        if not self.last_body().get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
            if calls:
                message["tool_calls"] = calls
            return JSONResponse(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            )

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            data = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            return f"data: {json.dumps(data)}\n\n"

        def events() -> Iterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            # Text in two pieces, as a real stream splits it.
            half = len(step.text) // 2
            for piece in (step.text[:half], step.text[half:]):
                if piece:
                    yield chunk({"content": piece})
            for index, call in enumerate(calls):
                head = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
                yield chunk({"tool_calls": [{"index": index, **head}]})
                arguments = call["function"]["arguments"]
                yield chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}
                )
            yield chunk({}, finish)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    def last_body(self) -> dict[str, Any]:
        return self.requests[-1].body

    # -- Anthropic Messages ------------------------------------------------------------

    async def _anthropic(self, request: Request) -> Response:
        authorized = request.headers.get("x-api-key") == API_KEY
        step = await self._next("anthropic", request, authorized)
        if isinstance(step, Fail):
            kind = {
                401: "authentication_error",
                429: "rate_limit_error",
                529: "overloaded_error",
            }.get(step.status, "api_error")
            return JSONResponse(
                {"type": "error", "error": {"type": kind, "message": step.message}},
                status_code=step.status,
            )
        ids = self._ids("toolu_", step)
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
        content += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, (name, args) in zip(ids, step.calls, strict=True)
        ]
        return JSONResponse(
            {
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": self.last_body()["model"],
                "content": content,
                "stop_reason": "tool_use" if ids else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )

    # -- Gemini generateContent --------------------------------------------------------

    async def _gemini(self, request: Request) -> Response:
        target = request.path_params["target"]
        authorized = request.headers.get("x-goog-api-key") == API_KEY
        step = await self._next("gemini", request, authorized)
        if isinstance(step, Fail):
            status = {
                401: "UNAUTHENTICATED",
                429: "RESOURCE_EXHAUSTED",
                503: "UNAVAILABLE",
            }.get(step.status, "INTERNAL")
            return JSONResponse(
                {"error": {"code": step.status, "message": step.message, "status": status}},
                status_code=step.status,
            )
        if not target.endswith(":generateContent"):
            return JSONResponse({"error": {"code": 404, "message": target}}, status_code=404)
        # Gemini sends no call ids: ADK names the calls itself.
        self.issued_ids.append([])
        self.call_counts.append(len(step.calls))
        parts: list[dict[str, Any]] = [{"text": step.text}] if step.text else []
        parts += [{"functionCall": {"name": name, "args": args}} for name, args in step.calls]
        return JSONResponse(
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": parts},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {
                    "promptTokenCount": 10,
                    "candidatesTokenCount": 5,
                    "totalTokenCount": 15,
                },
                "modelVersion": target.split(":", 1)[0],
            }
        )


@contextmanager
def serve(stand_in: StandIn) -> Iterator[StandIn]:
    """Run the stand-in on a free port of 127.0.0.1 for the duration of the block."""
    config = uvicorn.Config(
        stand_in.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the stand-in provider did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    stand_in.base_url = f"http://127.0.0.1:{port}"
    try:
        yield stand_in
    finally:
        server.should_exit = True
        thread.join(timeout=10)
