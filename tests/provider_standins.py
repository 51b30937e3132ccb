"""Fake model providers on 127.0.0.1 speaking each provider's real HTTP wire format:
OpenAI chat completions and Responses, Anthropic Messages and Gemini ``generateContent``,
each as JSON and as server-sent events. A test gives the stand-in a script -- one step
per model call -- and plangate's real client path (LiteLLM, google-genai) talks to it
over HTTP.

A step is a ``Reply`` (text, reasoning and/or tool calls, several calls = parallel calls
in one response), a ``Fail`` (an HTTP error in the provider's own error shape), or a
function of the request body returning one. Every request is recorded with its headers.
``Wire`` says how the stand-in shapes its answers beyond the step (argument fragments,
calls interleaved, empty text parts, a gateway repeating a call id); ``side_answer``
answers the requests that offer no tools (a side call such as the protocol classifier)
without using a step.
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
SIGNATURE = "c2lnbmVkIHRoaW5raW5n"
"""The signature the Anthropic stand-in puts on its thinking blocks."""
GEMINI_SIGNATURE = "dGhvdWdodCBzaWduYXR1cmU="
"""The ``thoughtSignature`` the Gemini stand-in puts on a thinking step's first call."""


@dataclass
class Reply:
    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    thinking: str = ""
    """Reasoning shown before the answer: OpenAI ``reasoning_content``, a Responses
    reasoning summary, an Anthropic ``thinking`` block, a Gemini thought part."""


@dataclass(frozen=True)
class Wire:
    """How the stand-in shapes every answer on the wire, beyond what a step says."""

    fragment: int = 0
    """Streamed tool-call arguments in pieces of this many characters (0: one piece)."""
    interleave: bool = False
    """OpenAI chat stream: the calls' argument fragments alternate between the calls, each
    chunk naming its call by ``index`` (as some OpenAI-compatible servers send them)."""
    empty_text: bool = False
    """Empty text parts / deltas / blocks beside the real ones."""
    repeated_id: bool = False
    """A gateway that gives every call of a step the same id."""


def pieces(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (one piece when ``size`` is 0)."""
    if size <= 0 or not text:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


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
    side: bool = False
    """Answered with ``side_answer`` (the request offered no tools)."""


class StandIn:
    """One fake provider endpoint serving all three wire formats from one script."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.requests: list[Received] = []
        self.issued_ids: list[list[str]] = []
        self.call_counts: list[int] = []
        """Per answered step: the ids the stand-in gave its calls, and how many calls."""
        self.base_url = ""
        self.wire = Wire()
        self.side_answer: str | None = None

    def reset(self) -> StandIn:
        """A fresh script and record on the same server (one server for a test module)."""
        self.steps.clear()
        self.requests.clear()
        self.issued_ids.clear()
        self.call_counts.clear()
        self.wire = Wire()
        self.side_answer = None
        return self

    def step_requests(self) -> list[Received]:
        """The requests that used a step (side calls left out)."""
        return [r for r in self.requests if not r.side]

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
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1beta/models/{target:path}", self._gemini, methods=["POST"]),
            ]
        )

    async def _next(self, provider: str, request: Request, authorized: bool) -> Reply | Fail:
        body = await request.json()
        self.requests.append(Received(provider, dict(request.headers), body))
        if not authorized:
            return Fail(401, "invalid api key")
        if self.side_answer is not None and not body.get("tools"):
            self.requests[-1].side = True
            return Reply(self.side_answer)
        if not self.steps:
            return Fail(500, f"the script has no step for request #{len(self.requests)}")
        step = self.steps.pop(0)
        return step(body) if callable(step) else step

    def _ids(self, prefix: str, reply: Reply) -> list[str]:
        if self.requests[-1].side:
            return []
        n = len(self.issued_ids) + 1
        ids = [f"{prefix}{n}_{0 if self.wire.repeated_id else i}" for i in range(len(reply.calls))]
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
            if step.thinking:
                message["reasoning_content"] = step.thinking
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

        wire = self.wire

        def fragments(index: int, call: dict[str, Any]) -> list[str]:
            return [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in pieces(call["function"]["arguments"], wire.fragment)
            ]

        def events() -> Iterator[str]:
            yield chunk({"role": "assistant", "content": ""})
            for piece in pieces(step.thinking, 8) if step.thinking else []:
                yield chunk({"reasoning_content": piece})
            # Text in two pieces, as a real stream splits it.
            half = len(step.text) // 2
            for piece in (step.text[:half], step.text[half:]):
                if piece:
                    yield chunk({"content": piece})
                if wire.empty_text:
                    yield chunk({"content": ""})
            heads = [
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                **call,
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                for index, call in enumerate(calls)
            ]
            if wire.interleave:
                yield from heads
                rounds = [fragments(index, call) for index, call in enumerate(calls)]
                for n in range(max((len(r) for r in rounds), default=0)):
                    yield from (r[n] for r in rounds if n < len(r))
            else:
                for index, call in enumerate(calls):
                    yield heads[index]
                    yield from fragments(index, call)
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
        content: list[dict[str, Any]] = []
        if step.thinking:
            content.append({"type": "thinking", "thinking": step.thinking, "signature": SIGNATURE})
        if step.text or self.wire.empty_text:
            content.append({"type": "text", "text": step.text})
        content += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, (name, args) in zip(ids, step.calls, strict=True)
        ]
        message = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": self.last_body()["model"],
            "content": content,
            "stop_reason": "tool_use" if ids else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        if not self.last_body().get("stream"):
            return JSONResponse(message)
        return StreamingResponse(self._anthropic_events(message), media_type="text/event-stream")

    def _anthropic_events(self, message: dict[str, Any]) -> Iterator[str]:
        """Messages streaming: ``message_start``, per block ``content_block_start`` /
        ``_delta`` (text, thinking + signature, ``input_json_delta`` fragments) / ``_stop``,
        then ``message_delta`` and ``message_stop``."""

        def event(kind: str, **data: Any) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        head = {**message, "content": [], "stop_reason": None}
        head["usage"] = {"input_tokens": 10, "output_tokens": 1}
        yield event("message_start", message=head)
        yield event("ping")
        for index, block in enumerate(message["content"]):
            kind = block["type"]
            if kind == "thinking":
                yield event(
                    "content_block_start",
                    index=index,
                    content_block={"type": "thinking", "thinking": "", "signature": ""},
                )
                for piece in pieces(block["thinking"], 8):
                    yield event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "thinking_delta", "thinking": piece},
                    )
                yield event(
                    "content_block_delta",
                    index=index,
                    delta={"type": "signature_delta", "signature": block["signature"]},
                )
            elif kind == "text":
                yield event(
                    "content_block_start", index=index, content_block={"type": "text", "text": ""}
                )
                for piece in pieces(block["text"], 8) if block["text"] else []:
                    yield event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "text_delta", "text": piece},
                    )
            else:
                yield event(
                    "content_block_start",
                    index=index,
                    content_block={**block, "input": {}},
                )
                for piece in pieces(json.dumps(block["input"]), self.wire.fragment):
                    yield event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
            yield event("content_block_stop", index=index)
        yield event(
            "message_delta",
            delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
            usage={"output_tokens": 5},
        )
        yield event("message_stop")

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
        streamed = target.endswith(":streamGenerateContent")
        if not (streamed or target.endswith(":generateContent")):
            return JSONResponse({"error": {"code": 404, "message": target}}, status_code=404)
        if not self.requests[-1].side:
            # Gemini sends no call ids: ADK names the calls itself.
            self.issued_ids.append([])
            self.call_counts.append(len(step.calls))
        thought: list[dict[str, Any]] = []
        if step.thinking:
            thought.append({"text": step.thinking, "thought": True})
        parts: list[dict[str, Any]] = [{"text": step.text}] if step.text else []
        if self.wire.empty_text:
            parts.append({"text": ""})
        calls: list[dict[str, Any]] = [
            {"functionCall": {"name": name, "args": args}} for name, args in step.calls
        ]
        if calls and step.thinking:
            # A thinking model signs its first call; the signature must come back with it.
            calls[0]["thoughtSignature"] = GEMINI_SIGNATURE

        def response(chunk_parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
            candidate: dict[str, Any] = {
                "content": {"role": "model", "parts": chunk_parts},
                "index": 0,
            }
            if last:
                candidate["finishReason"] = "STOP"
            return {
                "candidates": [candidate],
                "usageMetadata": {
                    "promptTokenCount": 10,
                    "candidatesTokenCount": 5,
                    "totalTokenCount": 15,
                },
                "modelVersion": target.split(":", 1)[0],
            }

        if not streamed:
            return JSONResponse(response(thought + parts + calls, True))
        # As Gemini streams: thoughts first, text in pieces, each call whole in a chunk.
        chunks = [[part] for part in thought]
        chunks += [[{"text": piece}] for piece in pieces(step.text, 8)] if step.text else []
        if self.wire.empty_text:
            chunks.append([{"text": ""}])
        chunks += [[call] for call in calls]
        chunks = chunks or [[{"text": ""}]]
        frames = [
            f"data: {json.dumps(response(c, i == len(chunks) - 1))}\r\n\r\n"
            for i, c in enumerate(chunks)
        ]
        return StreamingResponse(iter(frames), media_type="text/event-stream")

    # -- OpenAI Responses --------------------------------------------------------------

    async def _responses(self, request: Request) -> Response:
        authorized = request.headers.get("authorization") == f"Bearer {API_KEY}"
        step = await self._next("responses", request, authorized)
        if isinstance(step, Fail):
            return JSONResponse(
                {
                    "error": {
                        "message": step.message,
                        "type": "invalid_request_error" if step.status == 401 else "server_error",
                        "param": None,
                        "code": "invalid_api_key" if step.status == 401 else None,
                    }
                },
                status_code=step.status,
            )
        ids = self._ids("call_", step)
        n = len(self.requests)
        output: list[dict[str, Any]] = []
        if step.thinking:
            output.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{n}",
                    "summary": [{"type": "summary_text", "text": step.thinking}],
                }
            )
        if step.text or self.wire.empty_text:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": step.text, "annotations": []}],
                }
            )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (call_id, (name, args)) in enumerate(zip(ids, step.calls, strict=True))
        ]
        body = self.last_body()
        response = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        }
        if not body.get("stream"):
            return JSONResponse(response)
        return StreamingResponse(self._responses_events(response), media_type="text/event-stream")

    def _responses_events(self, response: dict[str, Any]) -> Iterator[str]:
        """Responses streaming: ``response.created``, per output item ``output_item.added``,
        its deltas (reasoning summary, ``output_text``, ``function_call_arguments``) and
        ``output_item.done``, then ``response.completed``."""
        sequence = 0

        def event(kind: str, **data: Any) -> str:
            nonlocal sequence
            sequence += 1
            payload = {"type": kind, "sequence_number": sequence, **data}
            return f"event: {kind}\ndata: {json.dumps(payload)}\n\n"

        pending = {**response, "status": "in_progress", "output": []}
        yield event("response.created", response=pending)
        yield event("response.in_progress", response=pending)
        for index, item in enumerate(response["output"]):
            kind = item["type"]
            if kind == "function_call":
                yield event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
                for piece in pieces(item["arguments"], self.wire.fragment):
                    yield event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=piece,
                    )
                yield event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                )
            elif kind == "message":
                text = item["content"][0]["text"]
                yield event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "content": [], "status": "in_progress"},
                )
                for piece in pieces(text, 8) if text else [""]:
                    yield event(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        delta=piece,
                    )
            else:
                text = item["summary"][0]["text"]
                yield event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "summary": []},
                )
                for piece in pieces(text, 8):
                    yield event(
                        "response.reasoning_summary_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        summary_index=0,
                        delta=piece,
                    )
            yield event("response.output_item.done", output_index=index, item=item)
        yield event("response.completed", response=response)


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
