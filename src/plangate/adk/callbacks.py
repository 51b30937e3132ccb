"""The two hooks: the gate (before every tool call of every governed agent) and the step
boundary (before every model call of the mounted agent)."""

from __future__ import annotations

import asyncio
import copy
import json
from collections import deque
from typing import Any

from google.adk.models.llm_request import LlmRequest
from google.genai import types

from plangate.adk import telemetry
from plangate.adk.capability import ask_for_call, check_capability, read_only_hint
from plangate.adk.history import PlanHistory
from plangate.adk.own_tools import is_own
from plangate.adk.replies import apply_replies
from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import PlanScope, scope_of
from plangate.adk.tool_paths import ToolPath, tool_paths
from plangate.errors import CodedError, ErrorCode, error_result
from plangate.journal.events import JournalEvent
from plangate.plan import transitions
from plangate.plan.gate import PLAN_TOOL_NAMES, ToolCall, decide
from plangate.plan.prompts import (
    HOST_NOTE_PREFIX,
    PLAN_AWARENESS_MARKER,
    PLAN_MODE_MARKER,
    mode_switch_note,
    render_plan_prompt,
)
from plangate.plan.record import GATE_ACTIVE_STATUSES, PlanRecord
from plangate.plan.replies import ReplyError, ReplyErrorCode, match_reply
from plangate.plan.session_state import PlanSessionState
from plangate.plan.transitions import ModeSwitch, ReplyIgnored, Transition
from plangate.policy.authority import authority_of, set_authority
from plangate.policy.effects import Effect, effect_of, is_contained
from plangate.policy.policy_file import Decision, PolicyVerdict
from plangate.sandbox import hidden_paths, sandbox_status
from plangate.store.store import Conflict

__all__ = ["make_before_model", "make_gate"]

APPROVED_PLAN_MARKER = "## Approved plan"
_MAX_ATTEMPTS = 5


def make_gate(runtime: PlanRuntime) -> Any:
    @telemetry.traced_gate
    async def plangate_gate(
        tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        scope = scope_of(tool_context, runtime.branch)
        loaded = await runtime.load(scope)
        record = loaded.state.record
        effect = effect_of(tool)
        planning = loaded.unreadable is not None or (
            record is not None and record.status in GATE_ACTIVE_STATUSES
        )
        rules = runtime.tool_policy
        verdict = rules.decide(tool.name, args or {}, planning=planning) if rules else None
        if effect is None and rules is not None:
            # A tool that declares nothing takes the effect the policy file gives it.
            effect = rules.effect_of(tool.name)
        if verdict is not None:
            await _journal_verdict(runtime, scope, record, tool, tool_context, verdict)
            telemetry.gate_decided(tool.name, verdict, record, planning)
            if verdict.decision is Decision.DENY:  # deny first: nothing outranks it
                return error_result(
                    ErrorCode.POLICY_DENIED,
                    f"tool '{tool.name}' is denied: {verdict.reason}.",
                    "do without this tool; a deny rule of the tool policy refuses it",
                    tool=tool.name,
                )
        # One answer for this call, read from the store just now: every executor (the
        # sandbox of a command, Write, Edit) asks it and nothing else.
        authority = authority_of(record, planning=planning, protected_files=hidden_paths())
        set_authority(authority)
        call = ToolCall(tool.name, args or {}, effect, own=is_own(tool))
        if not planning:
            decision = decide(call, record, runtime.policy)
        elif effect is _SHELL:
            # Proving a command read-only parses it: a long command takes long, so it is
            # judged off the event loop.
            call = call._replace(contained=await _sandboxed(tool))
            decision = await asyncio.to_thread(
                decide,
                call,
                record,
                runtime.policy,
                unreadable=loaded.unreadable,
                corrupt=loaded.corrupt is not None,
            )
        else:
            decision = decide(
                call,
                record,
                runtime.policy,
                unreadable=loaded.unreadable,
                corrupt=loaded.corrupt is not None,
                selection_active=_selection_active(runtime, tool_context),
            )
        paths: tuple[ToolPath, ...] | None = None
        if decision.allowed and not planning and not call.own and effect in _JUDGED_EFFECTS:
            # A tool that does not ask the authority itself is asked for here, with the
            # paths its declaration names (Write and Edit ask again as they write).
            try:
                paths = await asyncio.to_thread(
                    tool_paths, tool, args or {}, rules, runtime.workspace
                )
            except CodedError as exc:
                refusal: CodedError | None = exc
            else:
                named = None if paths is None else [(p.rel, p.resolved) for p in paths]
                refusal = authority.refuses_tool(tool.name, effect, named)
            if refusal is not None:
                await _journal_denied(runtime, scope, record, tool, tool_context, refusal.message)
                return refusal.to_result()
        if decision.allowed:
            telemetry.gate_decided(tool.name, decision, record, planning)
            ask = (
                verdict.reason if verdict is not None and verdict.decision is Decision.ASK else None
            )
            if record is not None and record.governs_writes():
                # The scope and the policy's ask both hold, answered by one request.
                return await check_capability(
                    runtime, loaded, tool, args or {}, tool_context, ask=ask, paths=paths
                )
            if ask is not None:
                return await ask_for_call(runtime, loaded, tool, tool_context, ask)
            return None  # no approved plan whose scope holds the call (the usual case)
        telemetry.gate_decided(tool.name, decision, record, planning)
        await _journal_denied(runtime, scope, record, tool, tool_context, decision.reason, args)
        note = (
            "(Its server marks it read-only with readOnlyHint; plangate shows that but does "
            "not trust it alone: declare the tool in .plangate/policy.toml.)"
            if read_only_hint(tool)
            else ""
        )
        return decision.to_result(note)

    return plangate_gate


_SHELL = Effect.SHELL
_JUDGED_EFFECTS = (Effect.WRITE, Effect.NETWORK, None)
"""Effects of tools the gate asks the authority about: what may write or reach out."""


async def _journal_denied(
    runtime: PlanRuntime,
    scope: PlanScope,
    record: PlanRecord | None,
    tool: Any,
    tool_context: Any,
    reason: str,
    args: dict[str, Any] | None = None,
) -> None:
    await runtime.journal(
        scope,
        JournalEvent(
            kind="plan.gate.denied",
            subject=record.id if record else "",
            from_state=record.status.value if record else None,
            actor=getattr(tool_context, "agent_name", "") or "agent",
            at=runtime.now(),
            detail={"tool": tool.name, "reason": reason, "args": _short(args)},
        ),
    )


def _selection_active(runtime: PlanRuntime, tool_context: Any) -> bool:
    """Whether the user selected Plan Mode (it changes how ``enter_plan_mode`` is answered)."""
    options = runtime.options
    key = options.force_enter_plan_state_key
    return bool(key) and tool_context.state.get(key) == options.force_enter_plan_state_value


async def _journal_verdict(
    runtime: PlanRuntime,
    scope: PlanScope,
    record: PlanRecord | None,
    tool: Any,
    tool_context: Any,
    verdict: PolicyVerdict,
) -> None:
    await runtime.journal(
        scope,
        JournalEvent(
            kind=f"policy.{verdict.decision.value}",
            subject=record.id if record else "",
            from_state=record.status.value if record else None,
            actor=getattr(tool_context, "agent_name", "") or "agent",
            at=runtime.now(),
            detail={
                "tool": tool.name,
                "rule": verdict.rule,
                "reason": verdict.reason,
                "read_only_hint": read_only_hint(tool) or None,
            },
        ),
    )


async def _sandboxed(tool: Any) -> bool:
    """Whether ``tool`` runs its commands in a sandbox that works on this machine."""
    return is_contained(tool) and (await asyncio.to_thread(sandbox_status)).available


def make_before_model(runtime: PlanRuntime) -> Any:
    history = PlanHistory()
    mirrored = _MirrorCache()
    prompts = _PromptCache()

    async def plangate_before_model(callback_context: Any, llm_request: LlmRequest) -> None:
        scope = scope_of(callback_context, runtime.branch)
        replies = _replies_since_last_step(callback_context)
        state, readable, switch = await _step_boundary(runtime, scope, callback_context, replies)
        if readable:  # an unreadable store must not blank the mirror
            _mirror(runtime, state, callback_context, mirrored.dump(scope.key, state))
        # Matching every call and reply of the history is needed only while a decision is
        # recorded or a plan reply came without an id (see ``PlanHistory``); until then
        # each step costs the same at any length.
        record = state.record
        if (
            state.resolutions
            or state.ignored
            or (record is not None and record.pending)
            or history.has_plan_reply_without_id(callback_context.session)
        ):
            ids = _call_ids(llm_request, callback_context, state)
            _canonicalise_replies(llm_request, state, ids)
        _explain_unmatched(llm_request, state, replies)
        if switch is not None and _has_stepped(callback_context):
            _tell_switch(llm_request, switch)
        _inject_prompt(runtime, llm_request, state, prompts)
        return None

    return plangate_before_model


async def _step_boundary(
    runtime: PlanRuntime,
    scope: PlanScope,
    context: Any,
    replies: list[types.FunctionResponse],
) -> tuple[PlanSessionState, bool, ModeSwitch | None]:
    """Apply, exactly once, what the user did since the last model step: the replies to
    paused calls (several when one step raised several requests), a mode selection, and
    the end of an approved plan whose todos are all done.

    Everything here is idempotent by call id, so a lost compare-and-set is retried.
    Returns the state, whether the store could be read, and the user's mode switch the
    model is to be told of at this step (taken from the state, so it is told once).
    """
    for _ in range(_MAX_ATTEMPTS):
        loaded = await runtime.load(scope)
        if loaded.unreadable:
            return loaded.state, False, None
        if not replies and _nothing_to_apply(runtime, loaded.state, context):
            return loaded.state, True, None
        state = loaded.state.model_copy(deep=True)
        now = runtime.now()
        done, events = apply_replies(runtime, state, replies, now=now)
        _apply_selection(runtime, state, context, done, events, now)
        _finish_if_done(runtime, state, context, done, now)
        switch = state.take_untold_switch()
        if state == loaded.state:
            return loaded.state, True, None
        try:
            await runtime.commit(scope, loaded, state, done, events)
        except Conflict:
            continue
        await runtime.notify((t.decision for t in done), context.agent_name)
        return state, True, switch
    raise RuntimeError(f"plan state for {scope.key} kept changing; gave up after retries")


def _nothing_to_apply(runtime: PlanRuntime, state: PlanSessionState, context: Any) -> bool:
    """Whether a boundary without replies would leave ``state`` as it is: no selection
    requested or written since the last boundary, and no approved plan to finish. (The
    full path below decides the same; this spares it a deep copy at every step.)"""
    record = state.record
    if state.untold_switch is not None or (record is not None and record.is_unfinished()):
        return False
    key = runtime.options.force_enter_plan_state_key
    if not key:
        return True
    if state.requested is not None:
        return False
    in_session = context.state.get(key)
    if in_session is not None and in_session != state.mirrored_selection:
        return False
    mirrored = state.selection if state.selection is not None else in_session
    return mirrored == state.mirrored_selection


class _MirrorCache:
    """The dumped record of the last state mirrored per scope: the state read from the
    cache is the same object until the plan changes, so it is dumped once."""

    def __init__(self) -> None:
        self._dumps: dict[str, tuple[PlanRecord, dict[str, Any]]] = {}

    def dump(self, key: str, state: PlanSessionState) -> dict[str, Any] | None:
        record = state.record
        if record is None:
            self._dumps.pop(key, None)
            return None
        cached = self._dumps.get(key)
        if cached is not None and cached[0] is record:
            return cached[1]
        dumped = record.dump()
        if len(self._dumps) >= 4096:
            self._dumps.clear()
        self._dumps[key] = (record, dumped)
        return dumped


def _mirror(
    runtime: PlanRuntime, state: PlanSessionState, context: Any, dumped: dict[str, Any] | None
) -> None:
    """Session state mirrors the store: written through the callback context, so the
    write is part of the runner's own next event (never a write into a session the
    runner holds). ``dumped`` is the record as mirrored; a copy goes into the session so
    nothing there can change the cached one."""
    # Compared through the session's plain dict: a read of a dict through
    # ``context.state`` makes ADK deep-copy it (to notice nested writes later) and compare
    # it again at every event, which would cost more than the whole check. A write through
    # ``context.state`` lands in that dict too, so both reads see the same value.
    if context.session.state.get(runtime.state_key) != dumped:
        context.state[runtime.state_key] = copy.deepcopy(dumped)
    key = runtime.options.force_enter_plan_state_key
    if key and state.selection is not None and context.state.get(key) != state.selection:
        context.state[key] = state.selection


def _apply_selection(
    runtime: PlanRuntime,
    state: PlanSessionState,
    context: Any,
    done: list[Transition],
    events: list[JournalEvent],
    now: float,
) -> None:
    """A mode selection takes effect here, at the step boundary.

    The selection is either requested through plangate (``PlanSession.select_plan`` /
    ``leave_plan``, recorded in the store, safe while a run is in progress) or written by
    the host into session state (``state_delta``): a value there that differs from what
    the last boundary left is a new choice. A request in the store wins over both.
    """
    options = runtime.options
    key = options.force_enter_plan_state_key
    if not key:
        return
    in_session = context.state.get(key)
    actor = "user"
    if state.requested is not None:
        target: str | None = state.requested.value
        actor = state.requested.actor
        state.requested = None
    elif in_session is not None and in_session != state.mirrored_selection:
        target = str(in_session)
    else:
        target = None
    default = options.agent_state_value
    if target is not None and target != (state.selection or default):
        plan_value = options.force_enter_plan_state_value
        if target == plan_value:
            transition = transitions.force_enter(
                state.record,
                objective=_user_text(context),
                now=now,
                actor=actor,
                branch=runtime.branch,
            )
        elif state.selection == plan_value:
            transition = transitions.cancel(
                state.record, now=now, actor=actor, reason="mode switched"
            )
        else:
            transition = None
        if transition is not None:
            state.apply(transition)
            done.append(transition)
        events.append(
            JournalEvent(
                kind="mode.selected",
                subject=state.record.id if state.record else "",
                from_state=state.selection,
                to_state=target,
                actor=actor,
                at=now,
            )
        )
    if target is not None:
        state.selection = target
    state.mirrored_selection = state.selection if state.selection is not None else in_session


def _finish_if_done(
    runtime: PlanRuntime,
    state: PlanSessionState,
    context: Any,
    done: list[Transition],
    now: float,
) -> None:
    """An approved plan whose todos (written after the approval) are all completed is
    finished: the approved-plan note stops and Plan Mode is offered again. Its grant
    (scope, permission, sandbox binds) stays until a human closes the plan: the agent's
    own todo list cannot end what the human granted."""
    record = state.record
    key = runtime.options.todos_state_key(runtime.branch)
    if record is None or not record.is_unfinished() or not key:
        return
    todos = context.state.get(key)
    if not isinstance(todos, list) or not todos:
        return
    if not all(isinstance(t, dict) and t.get("status") == "completed" for t in todos):
        return
    approved_at = max(
        (a.decided_at for a in record.approvals if a.kind == "exit" and a.decision == "approved"),
        default=record.updated_at,
    )
    if _last_written_at(context, key) <= approved_at:
        return  # a finished list from before this plan
    transition = transitions.finish(record, now=now, reason="all todos completed")
    if transition is not None:
        state.apply(transition)
        done.append(transition)


def _last_written_at(context: Any, key: str) -> float:
    for event in reversed(context.session.events):
        delta = event.actions.state_delta if event.actions else None
        if delta and key in delta:
            return float(event.timestamp)
    return 0.0


def _replies_since_last_step(context: Any) -> list[types.FunctionResponse]:
    """The function responses the user sent since the model's last step.

    ADK appends a partial answer (one of several paused calls) and pauses again without a
    model call, so the replies of one step can span several user events. A newer
    text-only turn means none.
    """
    replies: list[types.FunctionResponse] = []
    for event in reversed(context.session.events):
        parts = (event.content.parts if event.content else None) or []
        if not parts:
            continue
        if event.author != "user":
            break
        if any(p.text for p in parts):
            break
        replies[:0] = [p.function_response for p in parts if p.function_response is not None]
    return replies


def _call_ids(llm_request: LlmRequest, context: Any, state: PlanSessionState) -> dict[int, str]:
    """The function-call id of each call and response part in the request that a plan
    decision may concern.

    ADK strips the ids it generated itself before calling the model (pinned in
    ``plangate.adk.contract``), so they are recovered by matching each part to the first
    unused stored part with the same name and payload (the request is built from those
    events, in order). A reply sent without any id is recognised by the reply the store
    applied for it.

    Only parts of tools a decision can name are matched (plan tools, tools with a request
    or a resolution): a part of another tool never matches one of those, so leaving it
    out changes no id. Stored parts are indexed by (kind, name, payload), so a step costs
    one pass over the history, not a search of it per part.
    """
    names = _decided_tool_names(state)
    pool: dict[tuple[str, str, str], deque[str]] = {}
    for event in context.session.events:
        for part in (event.content.parts if event.content else []) or []:
            call, response = part.function_call, part.function_response
            if call is not None and call.id and (names is None or call.name in names):
                key = ("call", call.name or "", _payload_key(dict(call.args or {})))
                pool.setdefault(key, deque()).append(call.id)
            elif response is not None and response.id and (names is None or response.name in names):
                key = ("response", response.name or "", _payload_key(response.response))
                pool.setdefault(key, deque()).append(response.id)
    ids: dict[int, str] = {}
    for content in llm_request.contents:
        for part in content.parts or []:
            call, response = part.function_call, part.function_response
            if call is not None:
                if names is not None and call.name not in names:
                    continue
                kind, name, payload, known = "call", call.name, dict(call.args or {}), call.id
            elif response is not None:
                if names is not None and response.name not in names:
                    continue
                kind, name, payload = "response", response.name, response.response
                known = response.id
            else:
                continue
            if known:
                ids[id(part)] = known
                continue
            waiting = pool.get((kind, name or "", _payload_key(payload)))
            if waiting:
                ids[id(part)] = waiting.popleft()
            elif kind == "response" and (alias := _applied_without_id(state, name, payload)):
                ids[id(part)] = alias
    return ids


def _decided_tool_names(state: PlanSessionState) -> frozenset[str | None] | None:
    """The tools a resolution, ignored reply or open request can name; None when one of
    them does not say which tool it concerns (then every part is matched)."""
    if state.ignored:
        return None
    names: set[str | None] = set(PLAN_TOOL_NAMES)
    for resolution in state.resolutions.values():
        if resolution.tool_name is None:
            return None
        names.add(resolution.tool_name)
    if state.record is not None:
        names.update(p.tool_name for p in state.record.pending)
    return frozenset(names)


def _payload_key(payload: Any) -> str:
    """A key equal for equal payloads (call arguments, responses: JSON-shaped)."""
    try:
        return json.dumps(payload, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(payload)


def _applied_without_id(state: PlanSessionState, name: str | None, payload: Any) -> str | None:
    for call_id, resolution in state.resolutions.items():
        applied = resolution.reply
        if resolution.tool_name == name and applied is not None and applied == payload:
            return call_id
    for call_id, ignored in state.ignored.items():
        if ignored.reply is not None and ignored.reply == payload:
            return call_id
    return None


def _canonicalise_replies(
    llm_request: LlmRequest, state: PlanSessionState, ids: dict[int, str]
) -> None:
    """Show the model the canonical result of each applied reply, in this turn and in every
    later turn's history; a duplicate or ignored reply is shown as such, with the reason.

    A plan call that never got a reply (withdrawn by a user exit, resolved by a mode
    selection, or still waiting while the user talks) gets a synthetic result, because
    models reject a function call with no response.
    """
    for content in llm_request.contents:
        for part in content.parts or []:
            response = part.function_response
            if response is None or id(part) in ids or response.id:
                continue
            if response.name in PLAN_TOOL_NAMES:
                response.response = _unmatched(state, response.name).to_result()
    _answer_dangling_calls(llm_request, state, ids)
    seen: set[str] = set()
    for content in llm_request.contents:
        for part in content.parts or []:
            response = part.function_response
            call_id = ids.get(id(part))
            if response is None or not call_id:
                continue
            resolution = state.resolutions.get(call_id)
            ignored = state.ignored.get(call_id)
            if resolution is not None and resolution.decides_call:
                continue  # the call ran (or was refused) itself; its own result stands
            if (
                resolution is not None
                and call_id not in seen
                and (resolution.reply is None or response.response == resolution.reply)
            ):
                seen.add(call_id)
                response.response = resolution.result
            elif ignored is not None and response.response == ignored.reply:
                response.response = ignored.refusal().to_result()
            elif resolution is not None and response.response != resolution.result:
                response.response = ReplyIgnored(
                    "duplicate reply: this request was already decided",
                    ReplyErrorCode.ALREADY_ANSWERED,
                ).to_result()


def _unmatched(state: PlanSessionState, name: str) -> ReplyError:
    """Why a reply without a call id answers nothing (the model is told, never silence)."""
    try:
        match_reply(state.record, {}, call_id=None, tool_name=name, response=None)
    except ReplyError as exc:
        return exc
    return ReplyError(
        ReplyErrorCode.NO_MATCHING_REQUEST,
        f"the reply to {name} has no call id and answers no request",
    )


def _explain_unmatched(
    llm_request: LlmRequest, state: PlanSessionState, replies: list[types.FunctionResponse]
) -> None:
    """Replies without a call id that matched no request are not silently dropped (ADK
    leaves them out of the request): the model is told what happened."""
    notes = []
    for reply in replies:
        if reply.id or reply.name not in PLAN_TOOL_NAMES:
            continue
        if _applied_without_id(state, reply.name, reply.response):
            continue
        error = _unmatched(state, reply.name)
        notes.append(f"- {error.code.value}: {error.message}; it was not applied.")
    if notes:
        header = f"{HOST_NOTE_PREFIX} A reply from the user could not be applied:"
        text = "\n".join([header, *notes])
        llm_request.contents.append(types.Content(role="user", parts=[types.Part(text=text)]))


def _has_stepped(context: Any) -> bool:
    """Whether the agent took a model step in this session before this one: a switch made
    before its first step is no switch to it (its first prompt already says the mode)."""
    agent = context.agent_name
    return any(event.author == agent for event in reversed(context.session.events))


def _tell_switch(llm_request: LlmRequest, switch: ModeSwitch) -> None:
    """The user's switch, said once at the step it applies from. Written as a user turn
    at the end, where the switch happened; the prompts that follow it say the mode from
    then on."""
    note = types.Part(text=mode_switch_note(switch))
    llm_request.contents.append(types.Content(role="user", parts=[note]))


_WAITING = {
    "status": "waiting",
    "message": "The user has not decided this request yet and sent a new message instead; "
    "answer it. The request stays open.",
}


def _answer_dangling_calls(
    llm_request: LlmRequest, state: PlanSessionState, ids: dict[int, str]
) -> None:
    answered = {
        ids.get(id(part))
        for content in llm_request.contents
        for part in content.parts or []
        if part.function_response is not None
    }
    pending = {p.call_id for p in state.record.pending} if state.record else set()
    contents: list[types.Content] = []
    for content in llm_request.contents:
        contents.append(content)
        synthetic = []
        for part in content.parts or []:
            call = part.function_call
            call_id = ids.get(id(part))
            if call is None or not call_id or call_id in answered:
                continue
            if call_id in state.resolutions:
                result = state.resolutions[call_id].result
            elif call_id in pending and content is not llm_request.contents[-1]:
                result = _WAITING
            else:
                continue
            # Keep the request's own id convention: ADK strips ids it generated.
            reply = types.FunctionResponse(id=call.id, name=call.name, response=dict(result))
            synthetic.append(types.Part(function_response=reply))
        if synthetic:
            contents.append(types.Content(role="user", parts=synthetic))
    llm_request.contents = contents


class _PromptCache:
    """The plan prompt rendered for the last record seen: a record read from the cache
    is the same object until the plan changes, so each plan is rendered once."""

    def __init__(self) -> None:
        self._record: PlanRecord | None = None
        self._text = ""

    def plan_prompt(self, template: str, record: PlanRecord) -> str:
        # The template is the runtime's own, the same at every step.
        if record is not self._record:
            self._record, self._text = record, render_plan_prompt(template, record)
        return self._text


def _inject_prompt(
    runtime: PlanRuntime, llm_request: LlmRequest, state: PlanSessionState, prompts: _PromptCache
) -> None:
    options = runtime.options
    system = _system_text(llm_request)
    record = state.record
    if record is not None and record.is_gate_active():
        if options.inject_prompt and PLAN_MODE_MARKER not in system:
            llm_request.append_instructions([prompts.plan_prompt(options.plan_prompt, record)])
        return
    if record is not None and record.is_unfinished():
        if options.inject_prompt and APPROVED_PLAN_MARKER not in system:
            llm_request.append_instructions([_approved_plan_note(record)])
        return
    # A finished plan's note stops (its grant holds until a human closes it): the next
    # task is offered Plan Mode again.
    selected = (
        bool(options.force_enter_plan_state_key)
        and state.selection == options.force_enter_plan_state_value
    )
    if options.inject_awareness and not selected and PLAN_AWARENESS_MARKER not in system:
        llm_request.append_instructions([options.awareness_prompt])


def _approved_plan_note(record: PlanRecord) -> str:
    return (
        f"{APPROVED_PLAN_MARKER} (revision {record.content_revisions})\n"
        "The user approved this plan. Implement it; do not re-plan unless asked.\n\n"
        + record.content
    )


def _system_text(llm_request: LlmRequest) -> str:
    instruction = llm_request.config.system_instruction if llm_request.config else None
    if instruction is None:
        return ""
    if isinstance(instruction, str):
        return instruction
    parts = getattr(instruction, "parts", None) or []
    return "\n".join(p.text or "" for p in parts)


def _user_text(context: Any) -> str:
    content = getattr(context, "user_content", None)
    if content is not None:
        text = " ".join(p.text for p in content.parts or [] if p.text)
        if text.strip():
            return text.strip()[:500]
    return "Current task"


def _short(args: dict[str, Any] | None) -> dict[str, Any]:
    return {k: (v[:200] if isinstance(v, str) else v) for k, v in (args or {}).items()}
