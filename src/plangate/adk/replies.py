"""Human replies on the host: record each one when it is given, resume once all are in.

A model step can raise several human requests at once (two questions, a question and a
plan submission). ADK resumes a paused invocation only when *every* paused call has a
function response, so plangate records each reply in its own store the moment it is
given -- through ``PlanSession.submit`` or, over the wire, through ``PlanPlugin`` -- and
builds the single resume message that answers every paused call once none is left open.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.adk.events import Event
from google.genai import types

from plangate.adk.capability import CONFIRMATION_CALL, confirmation_reply
from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.journal.events import JournalEvent
from plangate.plan.gate import PLAN_TOOL_NAMES
from plangate.plan.record import PendingRequest, PlanStatus
from plangate.plan.replies import ReplyError, ReplyErrorCode, match_reply
from plangate.plan.session_state import PlanSessionState
from plangate.plan.transitions import ReplyIgnored, Transition
from plangate.store.store import Conflict

__all__ = [
    "Awaiting",
    "Recorded",
    "apply_replies",
    "awaiting",
    "paused_calls",
    "record_replies",
    "replies_in",
]

log = logging.getLogger("plangate")

_MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Awaiting:
    """Where the human side of a paused run stands."""

    open: list[PendingRequest]
    """Requests still waiting for an answer, in the order the model asked them."""
    message: types.Content | None = None
    """The one message that resumes the paused run: a function response for every call
    it paused on. None while any of them is open (or when nothing is paused)."""

    @property
    def ready(self) -> bool:
        return self.message is not None


@dataclass
class Recorded:
    state: PlanSessionState
    transitions: list[Transition] = field(default_factory=list)


def replies_in(
    message: types.Content | types.Part | types.FunctionResponse,
) -> list[types.FunctionResponse]:
    """The function responses a reply carries."""
    if isinstance(message, types.FunctionResponse):
        return [message]
    if isinstance(message, types.Part):
        return [message.function_response] if message.function_response else []
    return [p.function_response for p in message.parts or [] if p.function_response is not None]


def apply_replies(
    runtime: PlanRuntime,
    state: PlanSessionState,
    replies: Sequence[types.FunctionResponse],
    *,
    now: float,
    actor: str = "user",
    strict: bool = False,
) -> tuple[list[Transition], list[JournalEvent]]:
    """Apply ``replies`` to ``state`` in memory; the caller commits.

    A reply already applied (same call id and same reply) is skipped, so this is safe to
    run again on the same message. ``strict`` raises :class:`ReplyError` for any reply
    that would change nothing; otherwise such a reply is remembered with its reason (the
    model is told) when it is a plan reply, and left alone when it is not.
    """
    done: list[Transition] = []
    events: list[JournalEvent] = []
    for reply in replies:
        try:
            matched = match_reply(
                state.record,
                state.resolved_names(),
                call_id=reply.id,
                tool_name=reply.name,
                response=reply.response,
            )
        except ReplyError:
            if strict:
                raise
            continue  # shown to the model as unmatched at the step boundary
        if matched is None:
            if strict:
                raise ReplyError(
                    ReplyErrorCode.UNKNOWN_REQUEST,
                    f"no request with call id {reply.id!r} was asked",
                    call_id=reply.id,
                )
            if reply.name not in PLAN_TOOL_NAMES or not reply.id or reply.id in state.ignored:
                continue
            exc = ReplyIgnored(
                f"no pending request has call id {reply.id!r}; the reply is stale, a "
                "duplicate, or answers another request",
                ReplyErrorCode.UNKNOWN_REQUEST,
            )
            state.ignore(reply.id, exc, reply.response)
            events.append(_ignored_event(state, reply.id, reply.name, exc, now))
            continue
        resolution = state.resolutions.get(matched.call_id)
        if resolution is not None:
            same = reply.response in (resolution.reply, resolution.result)
            if strict and not same:
                raise ReplyError(
                    ReplyErrorCode.ALREADY_ANSWERED,
                    f"the request {matched.call_id!r} was already decided",
                    call_id=matched.call_id,
                )
            continue
        previous = state.ignored.get(matched.call_id)
        if previous is not None and previous.reply == reply.response and not strict:
            continue
        try:
            transition = state.apply_reply(
                call_id=matched.call_id,
                tool_name=matched.tool_name,
                response=reply.response,
                now=now,
                actor=actor,
            )
        except ReplyIgnored as exc:
            if strict:
                raise ReplyError(exc.reason_code, exc.reason, call_id=matched.call_id) from None
            state.ignore(matched.call_id, exc, reply.response)
            events.append(_ignored_event(state, matched.call_id, matched.tool_name, exc, now))
            continue
        done.append(transition)
        if transition.record.status is PlanStatus.APPROVED and transition.decision is not None:
            options = runtime.options
            if options.force_enter_plan_state_key and transition.decision.kind == "exit":
                # Approval switches the selection back, so a still-set "plan" cannot
                # clobber the approved plan.
                state.selection = options.agent_state_value
                state.requested = None
    return done, events


async def record_replies(
    runtime: PlanRuntime,
    scope: PlanScope,
    replies: Sequence[types.FunctionResponse],
    *,
    agent_name: str,
    strict: bool = False,
    actor: str = "user",
) -> Recorded:
    """Apply ``replies`` and commit them (compare-and-set, retried); notify ``on_approval``."""
    for _ in range(_MAX_ATTEMPTS):
        loaded = await runtime.load(scope)
        if loaded.unreadable:
            if strict:
                raise RuntimeError(f"the plan state cannot be read: {loaded.unreadable}")
            return Recorded(loaded.state)
        state = loaded.state.model_copy(deep=True)
        done, events = apply_replies(
            runtime, state, replies, now=runtime.now(), actor=actor, strict=strict
        )
        if not done and not events:
            return Recorded(loaded.state)
        try:
            await runtime.commit(scope, loaded, state, done, events)
        except Conflict:
            continue
        await runtime.notify((t.decision for t in done), agent_name)
        return Recorded(state, done)
    raise RuntimeError(f"plan state for {scope.key} kept changing; gave up after retries")


def paused_calls(events: Sequence[Event]) -> list[types.FunctionCall]:
    """The calls of the latest model step that have no function response yet.

    Empty when the latest step was answered, or when the user wrote a new message since
    (that turn moved on; its dangling calls are answered for the model at the boundary).
    """
    answered = {fr.id for event in events for fr in event.get_function_responses() if fr.id}
    for event in reversed(events):
        parts = (event.content.parts if event.content else None) or []
        if all(p.function_response is not None for p in parts):
            continue  # no content, or replies and results of the paused step
        if event.author == "user":
            return []  # a new message: that turn moved on
        calls = event.get_function_calls()
        return [c for c in calls if c.id and c.id not in answered]
    return []


def awaiting(state: PlanSessionState, events: Sequence[Event]) -> Awaiting:
    """The open requests, and the resume message once every paused call is decided."""
    record = state.record
    open_requests = record.open_requests() if record is not None else []
    calls = paused_calls(events)
    if not calls:
        return Awaiting(open_requests)
    parts: list[types.Part] = []
    for call in calls:
        if call.name == CONFIRMATION_CALL:
            confirmation = confirmation_reply(call, state)
            if confirmation is None:
                return Awaiting(open_requests)
            parts.append(types.Part(function_response=confirmation))
            continue
        resolution = state.resolutions.get(call.id or "")
        if resolution is None:
            # Still open here, or a long-running call plangate does not own: either way
            # the run cannot resume yet.
            return Awaiting(open_requests)
        response = resolution.reply if resolution.reply is not None else resolution.result
        name = resolution.tool_name or call.name
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(id=call.id, name=name, response=response)
            )
        )
    return Awaiting(open_requests, types.Content(role="user", parts=parts))


def _ignored_event(
    state: PlanSessionState, call_id: str, tool_name: str | None, exc: ReplyIgnored, now: float
) -> JournalEvent:
    return JournalEvent(
        kind="plan.reply.ignored",
        subject=state.record.id if state.record else "",
        actor="user",
        at=now,
        detail={
            "call_id": call_id,
            "tool": tool_name,
            "reason": exc.reason,
            "code": exc.reason_code.value,
        },
    )
