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
import stat
import sys
from typing import Any, Protocol

from acp import run_agent
from acp.interfaces import Agent

__all__ = ["GuardedStdio", "check_message", "run_stdio"]

logger = logging.getLogger("plangate.acp")

# ACP messages may carry whole files (embedded resources); the asyncio default is 64 KiB.
STDIO_LIMIT = 50 * 1024 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603


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

    def __init__(
        self, reader: asyncio.StreamReader, writer: Writer, *, answer_all: bool = False
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self._answer_all = answer_all
        self._unanswered: set[Any] = set()
        """Ids of the client's requests the agent has not answered yet."""
        self._asked: set[Any] = set()
        """Ids of the agent's requests the client has not answered yet."""
        self._sent = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()
        if "method" in message:
            if "id" in message:
                self._asked.add(message["id"])
        elif "id" in message:
            self._unanswered.discard(message["id"])
        self._sent.set()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return await self._after_input()
            line = line.strip()
            if not line:
                continue
            try:
                message = check_message(line)
            except InvalidMessage as exc:
                logger.warning("answered an invalid line with %s: %.200r", exc.code, line)
                await self.send(exc.response())
                continue
            if message is None:
                continue
            if "method" in message:
                if "id" in message:
                    self._unanswered.add(message["id"])
            else:
                self._asked.discard(message.get("id"))
            return message

    async def _after_input(self) -> dict[str, Any] | None:
        """The end of input. With ``answer_all`` (input read from a file: every request
        is in it, and whoever reads the output wants every answer), the connection stays
        until each request read is answered; a question the agent asks meanwhile can get
        no answer from the file, so it gets an error in the client's place."""
        while self._answer_all and self._unanswered:
            if self._asked:
                return {
                    "jsonrpc": "2.0",
                    "id": self._asked.pop(),
                    "error": {"code": INTERNAL_ERROR, "message": "the client's input has ended"},
                }
            self._sent.clear()
            await self._sent.wait()
        return None

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

    Pipes and sockets (an editor) are read and written by the event loop; a regular file
    on either side (``plangate acp < requests.jsonl > replies.jsonl``) is read or
    written in a worker thread, since the loop cannot watch a file.
    """
    if os.name == "nt":  # pragma: no cover - the pipe setup below is POSIX only
        await run_agent(agent, use_unstable_protocol=True)
        return
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STDIO_LIMIT)
    feeding: asyncio.Task[None] | None = None
    if _is_stream(sys.stdin.fileno()):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    else:
        feeding = loop.create_task(_feed_from_file(reader, sys.stdin.fileno()))
    writer: Writer
    if _is_stream(protocol_fd):
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    else:
        writer = FileWriter(protocol_fd)
    try:
        # session/fork and session/close are still marked unstable in the SDK.
        transport = GuardedStdio(reader, writer, answer_all=feeding is not None)
        await run_agent(agent, transport, use_unstable_protocol=True)
    finally:
        if feeding is not None:
            feeding.cancel()
        close = getattr(agent, "aclose", None)
        if close is not None:  # what the agent started for its sessions (MCP servers)
            await close()


def _is_stream(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket or a terminal. Other
    character devices (``/dev/null``) cannot be watched (epoll refuses them, and the
    SDK's reader then failed with a traceback and hung); they are read like a file."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def _feed_from_file(reader: asyncio.StreamReader, fd: int) -> None:
    while chunk := await asyncio.to_thread(os.read, fd, 1 << 16):
        reader.feed_data(chunk)
    reader.feed_eof()


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class FileWriter:
    """Protocol output to a regular file: each message is written whole, off the loop.

    Closing while a message is still being written (the session ends as its last reply
    goes out) closes the file once that write is done, with what was queued after it:
    the file gets every reply, and the write never lands on a closed descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = bytearray()
        self._writing = 0
        self._closing = False

    def write(self, data: bytes) -> None:
        self._pending += data

    async def drain(self) -> None:
        if self._closing:
            return  # written out when the file is closed
        data, self._pending = bytes(self._pending), bytearray()
        self._writing += 1
        try:
            await asyncio.to_thread(_write_all, self._fd, data)
        finally:
            self._writing -= 1
            self._close_when_idle()

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._close_when_idle()

    def _close_when_idle(self) -> None:
        if self._closing and not self._writing and self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                _write_all(fd, bytes(self._pending))  # a few bytes at most, at the end
            finally:
                self._pending.clear()
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
