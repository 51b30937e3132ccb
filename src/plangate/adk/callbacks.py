"""The two hooks: the gate (before every tool call of every governed agent) and the step
boundary (before every model call of the mounted agent)."""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.models.llm_request import LlmRequest
from google.genai import types

from plangate.adk.runtime import PlanRuntime, with_resolutions
from plangate.adk.scope import PlanScope, scope_of
from plangate.journal.events import JournalEvent
from plangate.plan import transitions
from plangate.plan.gate import PLAN_TOOL_NAMES, ToolCall, decide
from plangate.plan.prompts import (
    PLAN_AWARENESS_MARKER,
    PLAN_MODE_MARKER,
    render_plan_prompt,
)
from plangate.plan.record import PlanRecord, PlanStatus
from plangate.plan.session_state import IgnoredReply, PlanSessionState
from plangate.plan.transitions import ReplyIgnored, Transition
from plangate.policy.effects import Effect, effect_of, is_contained
from plangate.sandbox import Profile, sandbox_status, set_profile
from plangate.store.store import Conflict

__all__ = ["make_before_model", "make_gate"]

APPROVED_PLAN_MARKER = "## Approved plan"
_MAX_ATTEMPTS = 5


def make_gate(runtime: PlanRuntime) -> Any:
    async def plangate_gate(
        tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        scope = scope_of(tool_context, runtime.branch)
        loaded = await runtime.load(scope)
        record = loaded.state.record
        options = runtime.options
        key = options.force_enter_plan_state_key
        selection_active = bool(key) and (
            tool_context.state.get(key) == options.force_enter_plan_state_value
        )
        effect = effect_of(tool)
        planning = loaded.unreadable is not None or bool(record and record.is_gate_active())
        # The profile of any process this call starts follows the plan state read just now.
        set_profile(Profile.PLANNING if planning else Profile.ACTING)
        contained = effect is Effect.SHELL and planning and await _sandboxed(tool)
        decision = decide(
            ToolCall(tool.name, args or {}, effect, contained),
            record,
            runtime.policy,
            unreadable=loaded.unreadable,
            corrupt=loaded.corrupt is not None,
            selection_active=selection_active,
        )
        if decision.allowed:
            return None
        await runtime.journal(
            scope,
            JournalEvent(
                kind="plan.gate.denied",
                subject=record.id if record else "",
                from_state=record.status.value if record else None,
                actor=getattr(tool_context, "agent_name", "") or "agent",
                at=runtime.now(),
                detail={"tool": tool.name, "reason": decision.reason, "args": _short(args)},
            ),
        )
        return decision.to_result()

    return plangate_gate


async def _sandboxed(tool: Any) -> bool:
    """Whether ``tool`` runs its commands in a sandbox that works on this machine."""
    return is_contained(tool) and (await asyncio.to_thread(sandbox_status)).available


def make_before_model(runtime: PlanRuntime) -> Any:
    async def plangate_before_model(callback_context: Any, llm_request: LlmRequest) -> None:
        scope = scope_of(callback_context, runtime.branch)
        state, applied, approved_now = await _step_boundary(runtime, scope, callback_context)
        record = state.record
        options = runtime.options
        if applied:
            callback_context.state[runtime.state_key] = record.dump() if record else None
        if approved_now and options.force_enter_plan_state_key:
            callback_context.state[options.force_enter_plan_state_key] = options.agent_state_value
        _canonicalise_replies(llm_request, state, _call_ids(llm_request, callback_context))
        _inject_prompt(runtime, llm_request, state, callback_context)
        return None

    return plangate_before_model


async def _step_boundary(
    runtime: PlanRuntime, scope: PlanScope, context: Any
) -> tuple[PlanSessionState, bool, bool]:
    """Apply the user's replies and mode selection at this boundary, exactly once.

    Returns the state, whether anything was applied, and whether a plan was approved.
    Retries on a lost compare-and-set: everything applied here is idempotent by call id.
    """
    for _ in range(_MAX_ATTEMPTS):
        loaded = await runtime.load(scope)
        if loaded.unreadable:
            return loaded.state, False, False
        state = loaded.state.model_copy(deep=True)
        now = runtime.now()
        done: list[Transition] = []
        events: list[JournalEvent] = []
        approved_now = False
        for reply in _latest_user_replies(context):
            if reply.id in state.resolutions:
                continue
            previous = state.ignored.get(reply.id or "")
            if previous is not None and previous.reply == reply.response:
                continue
            try:
                transition = transitions.apply_reply(
                    state.record,
                    call_id=reply.id or "",
                    tool_name=reply.name,
                    response=reply.response,
                    now=now,
                    actor="user",
                )
            except ReplyIgnored as exc:
                if not reply.id or not _is_plan_reply(reply, state):
                    continue
                state.ignored[reply.id] = IgnoredReply(reason=exc.reason, reply=reply.response)
                events.append(
                    JournalEvent(
                        kind="plan.reply.ignored",
                        subject=state.record.id if state.record else "",
                        actor="user",
                        at=now,
                        detail={"call_id": reply.id, "tool": reply.name, "reason": exc.reason},
                    )
                )
                continue
            state.record = transition.record
            with_resolutions(state, transition, reply=reply.response)
            done.append(transition)
            if transition.record.status is PlanStatus.APPROVED:
                approved_now = True
                state.selection = runtime.options.agent_state_value
        _apply_selection(runtime, state, context, done, events, now, approved_now)
        if not done and not events and state.selection == loaded.state.selection:
            return loaded.state, False, False
        try:
            await runtime.commit(scope, loaded, state, done, events)
        except Conflict:
            continue
        await runtime.notify((t.decision for t in done), context.agent_name)
        return state, True, approved_now
    raise RuntimeError(f"plan state for {scope.key} kept changing; gave up after retries")


def _apply_selection(
    runtime: PlanRuntime,
    state: PlanSessionState,
    context: Any,
    done: list[Transition],
    events: list[JournalEvent],
    now: float,
    approved_now: bool,
) -> None:
    """A mode selection takes effect here, at the step boundary."""
    options = runtime.options
    key = options.force_enter_plan_state_key
    if not key or approved_now:
        return
    selected = context.state.get(key)
    # No selection at all means the default mode.
    if (selected or options.agent_state_value) == (state.selection or options.agent_state_value):
        return
    plan_value = options.force_enter_plan_state_value
    if selected == plan_value:
        transition = transitions.force_enter(
            state.record,
            objective=_user_text(context),
            now=now,
            actor="user",
            branch=runtime.branch,
        )
        if transition is not None:
            state.record = transition.record
            with_resolutions(state, transition)
            done.append(transition)
    elif state.selection == plan_value:
        transition = transitions.cancel(state.record, now=now, actor="user", reason="mode switched")
        if transition is not None:
            state.record = transition.record
            with_resolutions(state, transition)
            done.append(transition)
    events.append(
        JournalEvent(
            kind="mode.selected",
            subject=state.record.id if state.record else "",
            from_state=state.selection,
            to_state=str(selected) if selected is not None else None,
            actor="user",
            at=now,
        )
    )
    state.selection = str(selected) if selected is not None else None


def _latest_user_replies(context: Any) -> list[types.FunctionResponse]:
    """Function responses in the latest user turn only; a newer text-only turn means none."""
    for event in reversed(context.session.events):
        if event.author != "user":
            continue
        return [
            part.function_response
            for part in (event.content.parts if event.content else []) or []
            if part.function_response is not None
        ]
    return []


def _is_plan_reply(reply: types.FunctionResponse, state: PlanSessionState) -> bool:
    return reply.name in PLAN_TOOL_NAMES or (
        state.record is not None and state.record.pending_for(reply.id or "") is not None
    )


def _call_ids(llm_request: LlmRequest, context: Any) -> dict[int, str]:
    """The function-call id of each call and response part in the request.

    ADK strips the ids it generated itself before calling the model, so they are
    recovered by matching each part to the first unused stored part with the same name
    and payload (the request is built from those events, in order).
    """
    pool: list[tuple[str, str, Any, str]] = []
    for event in context.session.events:
        for part in (event.content.parts if event.content else []) or []:
            if part.function_call is not None and part.function_call.id:
                call = part.function_call
                pool.append(("call", call.name or "", dict(call.args or {}), call.id))
            elif part.function_response is not None and part.function_response.id:
                response = part.function_response
                pool.append(("response", response.name or "", response.response, response.id))
    used = [False] * len(pool)
    ids: dict[int, str] = {}
    for content in llm_request.contents:
        for part in content.parts or []:
            if part.function_call is not None:
                kind, name, payload = (
                    "call",
                    part.function_call.name,
                    dict(part.function_call.args or {}),
                )
                known = part.function_call.id
            elif part.function_response is not None:
                kind, name, payload = (
                    "response",
                    part.function_response.name,
                    part.function_response.response,
                )
                known = part.function_response.id
            else:
                continue
            if known:
                ids[id(part)] = known
                continue
            for index, (k, n, p, call_id) in enumerate(pool):
                if not used[index] and k == kind and n == name and p == payload:
                    used[index] = True
                    ids[id(part)] = call_id
                    break
    return ids


def _canonicalise_replies(
    llm_request: LlmRequest, state: PlanSessionState, ids: dict[int, str]
) -> None:
    """Show the model the canonical result of each applied reply, in this turn and in every
    later turn's history; a duplicate or ignored reply is shown as such, with the reason.

    A plan call that never got a reply (withdrawn by a user exit, resolved by a mode
    selection, or still waiting while the user talks) gets a synthetic result, because
    models reject a function call with no response.
    """
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
            if (
                resolution is not None
                and call_id not in seen
                and (resolution.reply is None or response.response == resolution.reply)
            ):
                seen.add(call_id)
                response.response = resolution.result
            elif ignored is not None and response.response == ignored.reply:
                response.response = ReplyIgnored(ignored.reason).to_result()
            elif resolution is not None and response.response != resolution.result:
                response.response = ReplyIgnored(
                    "duplicate reply: this request was already decided"
                ).to_result()


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
            elif call_id in pending:
                result = _WAITING
            else:
                continue
            # Keep the request's own id convention: ADK strips ids it generated.
            reply = types.FunctionResponse(id=call.id, name=call.name, response=dict(result))
            synthetic.append(types.Part(function_response=reply))
        if synthetic and content is not llm_request.contents[-1]:
            contents.append(types.Content(role="user", parts=synthetic))
    llm_request.contents = contents


def _inject_prompt(
    runtime: PlanRuntime, llm_request: LlmRequest, state: PlanSessionState, context: Any
) -> None:
    options = runtime.options
    system = _system_text(llm_request)
    record = state.record
    if record is not None and record.is_gate_active():
        if options.inject_prompt and PLAN_MODE_MARKER not in system:
            llm_request.append_instructions([render_plan_prompt(options.plan_prompt, record)])
        return
    if record is not None and record.status is PlanStatus.APPROVED:
        if options.inject_prompt and APPROVED_PLAN_MARKER not in system:
            llm_request.append_instructions([_approved_plan_note(record)])
        return
    key = options.force_enter_plan_state_key
    selected = bool(key) and context.state.get(key) == options.force_enter_plan_state_value
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
