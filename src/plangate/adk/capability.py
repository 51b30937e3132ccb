"""The approved plan as a capability, at the gate.

After approval a call whose needs the plan's scope does not cover -- a file it does not
name, a command no prefix covers, the network when the scope has none -- is not run:
it pauses with an amendment request bound to its call id and the revision in force.
Under the ``ask_each_edit`` permission every file write pauses the same way, with its
diff. The pause is ADK's tool confirmation (``request_confirmation``), so when the
human decides, ADK runs the same call again and this check lets it through (approved:
the scope now covers it, or the edit was allowed) or answers with the refusal.

The human's decision lives in plangate's store like every other reply: surfaces answer
the pending request by its call id, and :func:`confirmation_reply` turns the decision
into the confirmation ADK resumes with.

An approval is bound to the call id **and** the hash of the call's arguments, and is
spent when the call runs: a later call that reuses the id (with other arguments, or the
same ones again, from the agent or a sub-agent) is refused with ``APPROVAL_USED``.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from google.adk.tools import ToolContext
from google.genai import types
from pydantic import ValidationError

from plangate.adk.runtime import Loaded, PlanRuntime
from plangate.adk.scope import governing_scope
from plangate.adk.tool_paths import ToolPath
from plangate.errors import ErrorCode, error_result
from plangate.plan.amendments import call_sha256, request_amendment
from plangate.plan.record import PlanRecord
from plangate.plan.scope import Scope, Wants, needs_network
from plangate.plan.session_state import PlanSessionState, Resolution
from plangate.plan.transitions import Transition
from plangate.policy.command_split import split_commands
from plangate.policy.effects import Effect, effect_of, write_path_of
from plangate.policy.shell import ShellKind, classify_command

__all__ = [
    "CONFIRMATION_CALL",
    "ask_for_call",
    "check_capability",
    "confirmation_reply",
    "read_only_hint",
]

CONFIRMATION_CALL = "adk_request_confirmation"
_DIFF_MAX_BYTES = 1024 * 1024
MAX_CHANGE_CHARS = 64_000
"""The file before and after is kept with a request up to this size (the diff always)."""


async def check_capability(
    runtime: PlanRuntime,
    loaded: Loaded,
    tool: Any,
    args: dict[str, Any],
    tool_context: Any,
    *,
    ask: str | None = None,
    paths: tuple[ToolPath, ...] | None = None,
) -> dict[str, Any] | None:
    """None when the approved plan's scope (and permission) let the call run; otherwise
    the result that answers it: a pause for the human, or their refusal.

    ``ask`` is the reason when the policy file also asks for this call. Both must hold,
    and one request answers both (a call id is answered once): an amendment or edit
    review names the policy's reason too, and a call the scope covers asks as ``tool``.
    ``paths`` are the files the call writes as its declaration names them (resolved by
    the gate), for a tool that is not ``Write``, ``Edit`` or a shell.
    """
    state = loaded.state
    record = state.record
    if record is None or not record.governs_writes():
        return None
    call_id = getattr(tool_context, "function_call_id", None) or ""
    resolution = state.resolutions.get(call_id)
    found: tuple[Wants, str, Path | None] | None = None
    if resolution is not None and resolution.decides_call:
        if resolution.result.get("status") != "approved":
            return resolution.result
        digest = call_sha256(args)
        refusal = resolution.refuses(digest)
        if refusal is not None:
            return refusal
        # An approval lets the call run only within the scope in force once it was
        # given: a reviewer may approve an amendment with a narrower grant than asked,
        # and a call allowed while no scope governed it (a policy ask while planning)
        # was never judged against one. The call id cannot be asked again.
        found = await asyncio.to_thread(_wants, tool, args, paths)
        try:
            missing = record.scope.missing(found[0]) if found and record.scope else Scope()
        except ValueError as exc:
            return _unnameable(tool.name, exc)
        if missing.is_empty():
            return await _spend(runtime, tool_context, call_id, digest)
        why = (
            "the user allowed this call before the plan's scope applied"
            if _allowed_before_scope(record, call_id)
            else "the scope the user approved does not cover this call"
        )
        return error_result(
            ErrorCode.OUTSIDE_SCOPE,
            f"{why}, and it needs more than the approved scope: {missing.asks()}; it did not run",
            "call it again to ask the user for an amendment, or stay within the scope",
            tool=tool.name,
        )
    if record.pending_for(call_id) is not None:
        return _waiting(record.pending_for(call_id).payload)  # type: ignore[union-attr]
    found = await asyncio.to_thread(_wants, tool, args, paths)
    if found is None:
        return await _pause_for_policy(runtime, tool, tool_context, ask, args)
    wants, target, written = found
    try:
        missing = record.scope.missing(wants) if record.scope is not None else Scope()
        edit = Scope(write=wants.paths) if record.permission == "ask_each_edit" else Scope()
        if record.permission == "ask_each_edit" and wants.command is not None:
            # A command not proven read-only can change any file it reaches: the user
            # who asked to review each edit reviews it too, as the command shown.
            edit = edit.union(Scope(commands=(wants.command,)))
    except ValueError as exc:
        return _unnameable(tool.name, exc)
    if not missing.is_empty():
        kind, asked = "amendment", missing
    elif not edit.is_empty():
        kind, asked = "edit", edit
    else:
        return await _pause_for_policy(runtime, tool, tool_context, ask, args)
    # The diff is read only for a call that waits: an in-scope write does not pay for it.
    change = (
        await asyncio.to_thread(_diff, tool.name, written, wants.paths[0], args)
        if written is not None and wants.paths
        else None
    )
    return await _pause(
        runtime,
        tool_context,
        tool.name,
        kind,
        asked,
        target=target,
        change=change,
        reason=ask or "",
        args_sha256=call_sha256(args),
    )


def _unnameable(tool_name: str, exc: ValueError) -> dict[str, Any]:
    """What the call needs cannot be written as a scope entry (a backslash or newline in
    a path, a command over the length limit), so no amendment can grant it."""
    reason = str(exc)
    if isinstance(exc, ValidationError):
        reason = str(exc.errors()[0].get("msg", "")).removeprefix("Value error, ")
    return error_result(
        ErrorCode.INVALID_ARGS,
        f"this call cannot be asked for as a scope amendment: {reason}",
        "use a plain workspace path, or a shorter command (a script file, say)",
        tool=tool_name,
    )


def _allowed_before_scope(record: Any, call_id: str) -> bool:
    """Whether the approval that let ``call_id`` run was a policy ask (kind ``tool``),
    which says nothing about the scope."""
    return any(a.call_id == call_id and a.kind == "tool" for a in record.approvals)


async def _spend(
    runtime: PlanRuntime, tool_context: Any, call_id: str, digest: str
) -> dict[str, Any] | None:
    """Mark the approval of ``call_id`` used, so it lets this one call run; the refusal
    when it was spent meanwhile (two calls with one id race here: one wins).

    The same locked compare-and-set as plan tools: the mark is in the store before the
    call runs, so no crash or concurrent call can run it twice.
    """
    from plangate.adk.tools import commit_change

    def spent(loaded: Loaded) -> tuple[PlanSessionState, list[Transition]] | dict[str, Any]:
        resolution = loaded.state.resolutions.get(call_id)
        if resolution is None:
            return _no_approval(call_id)
        refusal = resolution.refuses(digest)
        if refusal is not None:
            return refusal
        state = loaded.state.model_copy(deep=True)
        state.resolutions[call_id] = resolution.model_copy(update={"used": True})
        return state, []

    committed = await commit_change(runtime, tool_context, spent)
    return committed if isinstance(committed, dict) else None


def _no_approval(call_id: str) -> dict[str, Any]:
    return error_result(
        ErrorCode.APPROVAL_USED,
        f"no approval of call {call_id!r} is on record any more; this call did not run",
        "make the call again with a new call id",
    )


def _call_args(tool_context: Any, call_id: str) -> dict[str, Any]:
    """The arguments of the call ``call_id`` as the model made it (the latest call with
    that id in the session), for a check that is not handed them."""
    ctx = tool_context.get_invocation_context()
    for event in reversed(ctx.session.events):
        for call in event.get_function_calls():
            if call.id == call_id:
                return dict(call.args or {})
    return {}


async def _pause_for_policy(
    runtime: PlanRuntime,
    tool: Any,
    tool_context: Any,
    ask: str | None,
    args: dict[str, Any],
) -> dict[str, Any] | None:
    if ask is None:
        return None
    return await _pause(
        runtime,
        tool_context,
        tool.name,
        "tool",
        Scope(),
        reason=_hinted(tool, ask),
        args_sha256=call_sha256(args),
    )


async def ask_for_call(
    runtime: PlanRuntime, loaded: Loaded, tool: Any, tool_context: Any, reason: str
) -> dict[str, Any] | None:
    """A call the policy file says to ask for: None once the user allowed it; otherwise
    the pause, or the user's refusal."""
    state = loaded.state
    call_id = getattr(tool_context, "function_call_id", None) or ""
    resolution = state.resolutions.get(call_id)
    if resolution is not None and resolution.decides_call:
        if resolution.result.get("status") != "approved":
            return resolution.result
        # The gate does not hand this check the arguments: the session holds the call.
        digest = call_sha256(_call_args(tool_context, call_id))
        return resolution.refuses(digest) or await _spend(runtime, tool_context, call_id, digest)
    pending = state.record.pending_for(call_id) if state.record is not None else None
    if pending is not None:
        return _waiting(pending.payload)
    if state.record is None:
        return error_result(
            ErrorCode.POLICY_ASK,
            f"calling {tool.name} needs the user's approval ({reason}), and without a plan "
            "there is nowhere to ask",
            "ask the user in plain text",
            tool=tool.name,
        )
    return await _pause(
        runtime,
        tool_context,
        tool.name,
        "tool",
        Scope(),
        reason=_hinted(tool, reason),
        args_sha256=call_sha256(_call_args(tool_context, call_id)),
    )


def _hinted(tool: Any, reason: str) -> str:
    if read_only_hint(tool):
        reason += (
            "; its server marks it read-only (readOnlyHint), which plangate shows but "
            "does not trust by itself"
        )
    return reason


def read_only_hint(tool: Any) -> bool:
    """Whether an MCP tool's server annotated it ``readOnlyHint`` (shown, never trusted)."""
    annotations = getattr(getattr(tool, "_mcp_tool", None), "annotations", None)
    return bool(getattr(annotations, "readOnlyHint", False))


async def _pause(
    runtime: PlanRuntime,
    tool_context: Any,
    tool_name: str,
    kind: str,
    asked: Scope,
    *,
    target: str = "",
    change: FileChange | None = None,
    reason: str = "",
    args_sha256: str | None = None,
) -> dict[str, Any]:
    """Open the request and pause the call with ADK's tool confirmation."""
    if governing_scope.get() is not None:
        return _refused_in_subagent(tool_name, kind, asked, reason)
    call_id = getattr(tool_context, "function_call_id", None) or ""
    if not call_id or not isinstance(tool_context, ToolContext):
        return error_result(
            ErrorCode.INVALID_STATE,
            "this call has no id, so it cannot wait for the user",
            "call it as a tool call; the host gives every call an id",
        )
    # The same locked compare-and-set as plan tools.
    from plangate.adk.tools import _apply, _call_position

    # Requests are asked in the model's call order, not in the order their commits land
    # (the calls of one step pause concurrently).
    invocation_id, call_at, call_index = _call_position(tool_context, call_id)

    def opened(current: PlanRecord | None) -> Transition:
        return request_amendment(
            current,
            kind=kind,  # type: ignore[arg-type]
            call_id=call_id,
            tool_name=tool_name,
            wants=asked,
            now=runtime.now(),
            target=target,
            diff=change.diff if change is not None else None,
            change=change.texts() if change is not None else None,
            reason=reason,
            args_sha256=args_sha256,
            invocation_id=invocation_id,
            call_at=call_at,
            call_index=call_index,
        )

    applied = await _apply(runtime, tool_context, opened, paused=True)
    if not isinstance(applied, Transition):
        return applied
    payload = applied.result
    tool_context.request_confirmation(
        hint=payload["message"],
        payload={"plangate": kind, "approval_id": payload["approval_id"]},
    )
    # The pause is not a result for the model to answer; the run waits for the human.
    tool_context.actions.skip_summarization = True
    return _waiting(payload)


def _refused_in_subagent(tool_name: str, kind: str, asked: Scope, reason: str) -> dict[str, Any]:
    """A sub-agent runs in a nested run of its own that cannot pause for the user (its
    call would wait where nobody can answer it), so what needs the user is refused."""
    if kind == "amendment":
        what = f"the approved plan's scope does not let it {asked.asks()}"
    elif kind == "edit":
        what = f"the plan asks the user for each edit ({asked.asks()})"
    else:
        what = f"calling {tool_name} needs the user's approval ({reason})"
    return error_result(
        ErrorCode.OUTSIDE_SCOPE,
        f"a sub-agent cannot wait for the user, and {what}; nothing was changed",
        "report back what is needed; the main agent's own call asks the user",
        tool=tool_name,
    )


def _waiting(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": payload["status"],
        "message": f"{payload['message']} The call waits for the user's decision.",
        "approval_id": payload["approval_id"],
    }


def _wants(
    tool: Any, args: dict[str, Any], paths: tuple[ToolPath, ...] | None = None
) -> tuple[Wants, str, Path | None] | None:
    """What the call needs, a name for it, and the file a write changes (resolved)."""
    declared = write_path_of(tool)
    if declared is not None:
        arg, root = declared
        path = args.get(arg)
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            return None  # the tool itself refuses a bad path
        real_root = Path(os.path.realpath(root))
        resolved = Path(os.path.realpath(real_root / path))
        if resolved != real_root and real_root not in resolved.parents:
            return None  # outside the workspace: the tool refuses it
        rel = resolved.relative_to(real_root).as_posix()
        return Wants(paths=(rel,)), f"{tool.name} {rel}", resolved
    if paths:
        rels = tuple(p.rel for p in paths)
        return Wants(paths=rels), f"{tool.name} {', '.join(rels)}", None
    effect = effect_of(tool)
    if effect is Effect.SHELL:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return None
        segments = split_commands(command)
        network = any(needs_network(argv) for argv in segments or ())
        name = f"{tool.name}: {command[:200]}"
        # What the planning gate proves read-only ran before approval without asking;
        # the scope grants side effects, so an approved plan does not ask for it either.
        if segments is not None:
            segments = tuple(argv for argv in segments if not _read_only(shlex.join(argv)))
            if not segments:
                return Wants(network=network), name, None
        elif _read_only(command):
            return Wants(network=network), name, None
        return Wants(command=command, segments=segments, network=network), name, None
    return None


def _read_only(command: str) -> bool:
    return classify_command(command).kind is ShellKind.READ_ONLY


@dataclass(frozen=True)
class FileChange:
    """What a Write or Edit call would change: the unified diff, and the file before and
    after (editors show those as a diff of their own, ACP's ``diff`` content)."""

    path: str
    diff: str
    old_text: str | None
    """None for a new file."""
    new_text: str

    def texts(self) -> dict[str, Any] | None:
        """The file before and after, for the request; None when too long to keep."""
        if len(self.old_text or "") + len(self.new_text) > MAX_CHANGE_CHARS:
            return None
        return {"path": self.path, "old_text": self.old_text, "new_text": self.new_text}


def _diff(tool_name: str, path: Path, rel: str, args: dict[str, Any]) -> FileChange | None:
    """What a Write or Edit call would change (None if unknown)."""
    exists = path.is_file()
    try:
        before = path.read_bytes()[: _DIFF_MAX_BYTES + 1] if exists else b""
    except OSError:
        return None
    if len(before) > _DIFF_MAX_BYTES or b"\x00" in before[:8192]:
        return None
    old = before.decode("utf-8", errors="replace")
    if tool_name == "Edit":
        old_string, new_string = args.get("old_string"), args.get("new_string")
        if not isinstance(old_string, str) or not isinstance(new_string, str) or not old_string:
            return None
        count = -1 if args.get("replace_all") is True else 1
        new = old.replace(old_string, new_string, count)
    else:
        content = args.get("content")
        if not isinstance(content, str):
            return None
        new = content
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{rel}" if before else "/dev/null",
        tofile=f"b/{rel}",
    )
    return FileChange(rel, "".join(lines), old if exists else None, new)


def confirmation_reply(
    call: types.FunctionCall, state: PlanSessionState
) -> types.FunctionResponse | None:
    """The confirmation that resumes a call paused for an amendment or edit review, once
    the human's decision is in the store; None while it is not (or not ours)."""
    if call.name != CONFIRMATION_CALL:
        return None
    original = (call.args or {}).get("originalFunctionCall")
    original_id = original.get("id") if isinstance(original, dict) else None
    resolution = state.resolutions.get(original_id or "")
    if resolution is None or not resolution.decides_call:
        return None
    # Confirmed only for the call the reviewer saw: the same arguments (the gate checks
    # them again when the call runs, and spends the approval then).
    original_args: Any = original.get("args") if isinstance(original, dict) else None
    confirmed = resolution.result.get("status") == "approved" and _same_call(
        resolution, original_args
    )
    return types.FunctionResponse(
        id=call.id, name=CONFIRMATION_CALL, response={"confirmed": confirmed}
    )


def _same_call(resolution: Resolution, args: Any) -> bool:
    if resolution.args_sha256 is None:
        return True  # stored before approvals were bound to arguments
    if not isinstance(args, dict):
        return False
    return call_sha256(cast("dict[str, Any]", args)) == resolution.args_sha256
