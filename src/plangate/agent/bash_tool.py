"""The ``Bash`` workspace tool: one ``bash -c`` command in the workspace root, sandboxed.

Every command runs in the operating-system sandbox (:mod:`plangate.sandbox`) with the
profile of the call's authority (:mod:`plangate.policy.authority`), which the plan gate
read from the store at the moment of the call: read-only everything while a plan is
being made, the workspace (or the approved scope) writable once it is approved. Called
without an authority (around the gate) it runs nothing. The command
and everything it starts end with it or at the timeout; nothing it left in its private
``/tmp`` survives. Output keeps its beginning and end, and a cut is always marked.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plangate.agent.tool_errors import (
    HINTS,
    INVALID_ARGS,
    IO_ERROR,
    TIMEOUT,
    WorkspaceError,
    error_result,
    require_str,
    truncation_marker,
)
from plangate.errors import ErrorCode
from plangate.policy.authority import NoAuthority, require_authority
from plangate.policy.command_split import split_commands
from plangate.policy.effects import declare_contained
from plangate.sandbox import Limits, Profile, SandboxSpec, git_guard, hidden_paths, sandbox_status
from plangate.sandbox.policy import MAX_TIMEOUT_S
from plangate.sandbox.probe import SandboxUnavailable
from plangate.sandbox.process import Finished, run_command
from plangate.sandbox.scope_binds import prepare_writable

if TYPE_CHECKING:
    from plangate.agent.workspace import Workspace

__all__ = ["SECRET_HOME_PATHS", "bash_tool"]

SECRET_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".config/gcloud",
    ".config/gh",
)
"""Credentials under the user's home folder that no command needs to read."""


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


def _masked() -> tuple[Path, ...]:
    home = Path.home()
    return (*hidden_paths(), *(home / name for name in SECRET_HOME_PATHS))


async def _bash(
    workspace: Workspace,
    command: Any,
    timeout: Any,
    max_chars: int,
    *,
    network: bool,
    limits: Limits,
) -> dict:
    command = require_str(command, "command")
    if "\x00" in command:
        raise WorkspaceError("command contains a NUL character", INVALID_ARGS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise WorkspaceError("timeout_s must be a number of seconds", INVALID_ARGS)
    if not math.isfinite(timeout) or timeout <= 0:
        raise WorkspaceError("timeout_s must be a positive number of seconds", INVALID_ARGS)
    # The profile and the writable paths follow the authority the gate gave this call.
    authority = require_authority("Bash")
    profile = Profile.PLANNING if authority.planning else Profile.ACTING
    scope = authority.scope if profile is Profile.ACTING else None
    binds = None
    if scope is not None:
        binds = await asyncio.to_thread(prepare_writable, scope, workspace.root)
        # The network follows the scope (for the whole plan, or granted to this command
        # as it was shown) as well as the agent's own setting.
        network = network and scope.grants_network(command, split_commands(command))
    spec = SandboxSpec(
        profile=profile,
        workspace=workspace.root,
        network=network and profile is Profile.ACTING,
        masked=_masked(),
        limits=limits,
        writable=binds.paths if binds is not None else None,
    )
    keep = max_chars * 4 + 1024  # bytes kept at each end of each stream
    status = await asyncio.to_thread(sandbox_status)
    git_before = await asyncio.to_thread(_git_before, workspace.root, profile, status.available)
    try:
        finished = await run_command(
            command, spec, timeout_s=float(timeout), keep_bytes=keep, status=status
        )
    finally:
        if binds is not None:
            # What was made only so it could be bound, and left as it was, goes again.
            await asyncio.to_thread(binds.tidy)
        # Whatever the command did to what makes the user's git run programs goes back,
        # before anything else can run git in the workspace.
        # Shielded: a run stopped meanwhile must not leave a change half put back.
        reverted = await asyncio.shield(asyncio.to_thread(git_guard.restore, git_before))
    return _reported(_result(finished, max_chars, profile), reverted)


def _git_before(root: Path, profile: Profile, sandboxed: bool) -> git_guard.GitSurface:
    if sandboxed and profile is Profile.ACTING:
        # Empty folders the sandbox then binds read-only: no hook or repository can be
        # made in them.
        git_guard.make_missing_git_dirs(root)
    return git_guard.snapshot(root)


def _reported(result: dict, reverted: list[str]) -> dict:
    """The result of a command that changed git's program-running files: it says what
    was put back, as an error the model reads (the command's own output stays)."""
    if not reverted:
        return result
    message = (
        "the command changed what makes git run programs for the user; plangate put it "
        "back: " + "; ".join(reverted)
    )
    hint = (
        "leave .git's config, hooks, commondir, info, modules and worktrees and "
        "submodule repositories alone; ask the user to make such a change themselves"
    )
    if "error" in result:  # a timeout: keep its code, add what was put back
        return {**result, "git_reverted": reverted}
    return error_result(
        ErrorCode.GIT_CHANGE_REVERTED, message, hint, **result, git_reverted=reverted
    )


def _result(finished: Finished, max_chars: int, profile: Profile) -> dict:
    out_head, out_tail, out_dropped = finished.stdout.parts()
    err_head, err_tail, err_dropped = finished.stderr.parts()
    out_budget, err_budget = _split_budget(
        len(out_head) + len(out_tail) + out_dropped,
        len(err_head) + len(err_tail) + err_dropped,
        max_chars,
    )
    stdout, cut_out = _fit(out_head, out_tail, out_dropped, out_budget)
    stderr, cut_err = _fit(err_head, err_tail, err_dropped, err_budget)
    result: dict[str, Any] = {
        "exit_code": finished.returncode,
        "stdout": stdout,
        "stderr": stderr,
        "truncated": cut_out or cut_err,
    }
    if finished.sandboxed and profile is Profile.PLANNING:
        result["sandbox"] = "read-only (planning): the command could not change any file"
    if finished.timed_out:
        limit = f"{finished.timeout_s:g}s"
        return error_result(
            TIMEOUT,
            f"timed out after {limit} (process killed)",
            HINTS[TIMEOUT],
            **result,
        )
    return result


def bash_tool(
    workspace: Workspace,
    *,
    timeout_s: float,
    max_chars: int,
    allow_network: bool = False,
    limits: Limits | None = None,
) -> Callable[..., Coroutine[Any, Any, dict]]:
    """The ``Bash`` tool function bound to ``workspace``.

    ``allow_network`` lets commands reach the network after approval (never while
    planning); ``limits`` are the resource limits of every command.
    """
    bash_timeout_s = min(timeout_s, MAX_TIMEOUT_S)
    command_limits = limits or Limits()

    async def Bash(command: str, timeout_s: float | None = None) -> dict:
        """Run a shell command with `bash -c` in the workspace root folder, in a sandbox.

        While a plan is being made the command cannot change any file and has no
        network; after approval it may change files in the workspace only. It ends,
        with everything it started, when it exits or when the timeout expires
        (at most 600 s); background jobs do not outlive it.

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
            return await _bash(
                workspace,
                command,
                timeout,
                max_chars,
                network=allow_network,
                limits=command_limits,
            )
        except (WorkspaceError, NoAuthority, SandboxUnavailable) as exc:
            return exc.to_result()
        except OSError as exc:
            return WorkspaceError(f"could not start bash: {exc}", IO_ERROR).to_result()

    return declare_contained(Bash)
