"""The ``Bash`` workspace tool: one ``bash -c`` command in the workspace root.

The command and everything it starts form one process group that is killed as a
whole on timeout; output keeps its beginning and end, and a cut is always marked.
Bash does not judge commands itself: the plan gate decides whether a command may run
while a plan is being drafted.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plangate.agent.tool_errors import (
    INVALID_ARGS,
    IO_ERROR,
    TIMEOUT,
    WorkspaceError,
    error_result,
    require_str,
    truncation_marker,
)

if TYPE_CHECKING:
    from plangate.agent.workspace import Workspace

__all__ = ["bash_tool"]


@dataclass
class _Capture:
    """A stream reader keeping the head and the tail of the output, counting the rest."""

    keep: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                excess = len(self.tail) - self.keep
                if excess > 0:
                    del self.tail[:excess]
                    self.dropped += excess

    def parts(self) -> tuple[str, str, int]:
        """(head, tail, dropped): the decoded ends and the bytes dropped between them."""
        if not self.dropped:
            whole = bytes(self.head + self.tail).decode("utf-8", errors="replace")
            return whole, "", 0
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        return head, tail, self.dropped


def _fit(head: str, tail: str, dropped: int, budget: int) -> tuple[str, bool]:
    """Cut the output to about ``budget`` chars, keeping its start and its end.

    ``head`` and ``tail`` are the captured ends of a stream and ``dropped`` the size
    of what the capture already left out between them (0 when it kept everything,
    in which case ``tail`` is empty). The cut is marked "... [truncated N chars]".
    """
    if not dropped:
        if len(head) <= budget:
            return head, False
        tail = head
        keep_head = budget * 2 // 5
        keep_tail = budget - keep_head
        cut = len(head) - budget
    else:
        keep_head = min(len(head), budget * 2 // 5)
        keep_tail = min(len(tail), budget - keep_head)
        cut = (len(head) - keep_head) + dropped + (len(tail) - keep_tail)
    end = tail[len(tail) - keep_tail :] if keep_tail > 0 else ""
    return f"{head[:keep_head]}\n{truncation_marker(cut)}\n{end}", True


def _split_budget(out_len: int, err_len: int, budget: int) -> tuple[int, int]:
    """Share ``budget`` chars between stdout and stderr; a short stream keeps all of it."""
    half = budget // 2
    if out_len + err_len <= budget:
        return out_len, err_len
    if out_len <= half:
        return out_len, budget - out_len
    if err_len <= half:
        return budget - err_len, err_len
    return half, budget - half


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a finished future's exception so asyncio does not log it as unhandled."""
    if not future.cancelled():
        future.exception()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _bash(workspace: Workspace, command: Any, timeout: Any, max_chars: int) -> dict:
    command = require_str(command, "command")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise WorkspaceError("timeout_s must be a number of seconds", INVALID_ARGS)
    if not math.isfinite(timeout) or timeout <= 0:
        raise WorkspaceError("timeout_s must be a positive number of seconds", INVALID_ARGS)

    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=workspace.root,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, killed as a whole on timeout
    )
    keep = max_chars * 4 + 1024  # bytes kept at each end of each stream
    out, err = _Capture(keep), _Capture(keep)
    assert proc.stdout is not None and proc.stderr is not None
    readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
    readers.add_done_callback(_consume)
    waiter = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait({readers, waiter}, timeout=timeout)
    except BaseException:  # cancelled: take the command down with us
        _kill_group(proc)
        readers.cancel()
        waiter.cancel()
        raise
    timed_out = not (readers.done() and waiter.done())
    if timed_out:
        _kill_group(proc)
        await asyncio.wait({waiter}, timeout=5)
        # A process that left the group may still hold the pipes open: stop reading.
        await asyncio.wait({readers}, timeout=2)
        for pending in (readers, waiter):
            if not pending.done():
                pending.cancel()
                await asyncio.wait({pending})

    out_head, out_tail, out_dropped = out.parts()
    err_head, err_tail, err_dropped = err.parts()
    out_budget, err_budget = _split_budget(
        len(out_head) + len(out_tail) + out_dropped,
        len(err_head) + len(err_tail) + err_dropped,
        max_chars,
    )
    stdout, cut_out = _fit(out_head, out_tail, out_dropped, out_budget)
    stderr, cut_err = _fit(err_head, err_tail, err_dropped, err_budget)
    result: dict[str, Any] = {
        "exit_code": None if timed_out else proc.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": cut_out or cut_err,
    }
    if timed_out:
        return {"error": f"{TIMEOUT}: timed out after {timeout:g}s (process killed)", **result}
    return result


def bash_tool(
    workspace: Workspace, *, timeout_s: float, max_chars: int
) -> Callable[..., Coroutine[Any, Any, dict]]:
    """The ``Bash`` tool function bound to ``workspace``."""
    bash_timeout_s = timeout_s

    async def Bash(command: str, timeout_s: float | None = None) -> dict:
        """Run a shell command with `bash -c` in the workspace root folder.

        The command and everything it starts are killed when the timeout expires.
        A background job (`cmd &`) must redirect its output, or the call waits for it.

        Args:
          command: The command line, e.g. "python -m pytest -q".
          timeout_s: Seconds before the command is killed (default set by the agent).

        Returns:
          {"exit_code", "stdout", "stderr", "truncated"}; long output keeps its
          beginning and end around a "... [truncated N chars]" note. On timeout:
          {"error": "TIMEOUT: ...", "exit_code": null, ...partial output}.
        """
        timeout = bash_timeout_s if timeout_s is None else timeout_s
        try:
            return await _bash(workspace, command, timeout, max_chars)
        except WorkspaceError as exc:
            return error_result(exc.code, str(exc))
        except OSError as exc:
            return error_result(IO_ERROR, f"could not start bash: {exc}")

    return Bash
