"""The stdio transport: newline-delimited JSON-RPC on stdin/stdout, guarded line by line.

The SDK's own stdio reader hands every decoded JSON value to its dispatcher, and a value
that is not an object (a batch array, a bare string, a number) ends the receive loop,
closing every open session with it. :class:`GuardedStdio` checks each line first: a line
that is not JSON gets a ``-32700`` Parse error, one that is not a JSON-RPC object gets a
``-32600`` Invalid Request (id null, as JSON-RPC 2.0 says), and the agent keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from acp import run_agent
from acp.interfaces import Agent

__all__ = ["GuardedStdio", "check_message", "run_stdio"]

logger = logging.getLogger("plangate.acp")

# ACP messages may carry whole files (embedded resources); the asyncio default is 64 KiB.
STDIO_LIMIT = 50 * 1024 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class InvalidMessage(Exception):
    """A line the agent answers with a JSON-RPC error instead of dispatching it."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def response(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "error": {"code": self.code, "message": self.message},
        }


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def check_message(line: bytes) -> dict[str, Any] | None:
    """The JSON-RPC message on ``line``; None for a line to drop silently (a malformed
    response: answering a response could start an error ping-pong).

    Raises InvalidMessage for a line that must be answered with an error.
    """
    try:
        message = json.loads(line)
    except ValueError as exc:  # also UnicodeDecodeError
        raise InvalidMessage(PARSE_ERROR, f"Parse error: {exc}") from None
    if not isinstance(message, dict):
        kind = "a batch (array)" if isinstance(message, list) else type(message).__name__
        raise InvalidMessage(
            INVALID_REQUEST, f"Invalid Request: expected a JSON-RPC object, got {kind}"
        )
    request_id = message.get("id")
    if "method" in message:
        if not _valid_id(request_id):
            raise InvalidMessage(
                INVALID_REQUEST, "Invalid Request: 'id' must be a string or number"
            )
        if not isinstance(message["method"], str):
            raise InvalidMessage(
                INVALID_REQUEST, "Invalid Request: 'method' must be a string", request_id
            )
        params = message.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            raise InvalidMessage(
                INVALID_REQUEST, "Invalid Request: 'params' must be an object", request_id
            )
        return message
    if "id" in message and _valid_id(request_id):
        return message  # a response to one of the agent's requests
    logger.warning("dropped a message that is neither a request nor a response: %.200r", line)
    return None


class GuardedStdio:
    """An ``acp`` message transport over an asyncio stream pair that answers bad lines
    itself, so the SDK's dispatcher only ever sees JSON-RPC objects."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None  # end of input
            line = line.strip()
            if not line:
                continue
            try:
                message = check_message(line)
            except InvalidMessage as exc:
                logger.warning("answered an invalid line with %s: %.200r", exc.code, line)
                await self.send(exc.response())
                continue
            if message is not None:
                return message

    async def close(self) -> None:
        self._writer.close()

    async def _read_line(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            try:
                chunks.append(await self._reader.readuntil(b"\n"))
                return b"".join(chunks)
            except asyncio.LimitOverrunError as exc:  # longer than the limit: keep reading
                chunks.append(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:  # the last line, without a newline
                chunks.append(exc.partial)
                return b"".join(chunks)


async def run_stdio(agent: Agent) -> None:
    """Serve ``agent`` on stdin/stdout until the editor closes the connection.

    Standard output carries the protocol and nothing else: the process's own fd 1 is
    pointed at stderr first, so a stray print or a child process writing there cannot
    corrupt the stream. An agent with an ``aclose`` coroutine is closed at the end.
    """
    if os.name == "nt":  # pragma: no cover - the pipe setup below is POSIX only
        await run_agent(agent, use_unstable_protocol=True)
        return
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIO_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    try:
        # session/fork and session/close are still marked unstable in the SDK.
        await run_agent(agent, GuardedStdio(reader, writer), use_unstable_protocol=True)
    finally:
        close = getattr(agent, "aclose", None)
        if close is not None:  # what the agent started for its sessions (MCP servers)
            await close()
