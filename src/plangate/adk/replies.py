"""Human replies on the host: record each one when it is given, resume once all are in.

A model step can raise several human requests at once (two questions, a question and a
plan submission). ADK resumes a paused invocation only when *every* paused call has a
function response, so plangate records each reply in its own store the moment it is
given -- through ``PlanSession.submit`` or, over the wire, through
:class:`PlanReplyPlugin` -- and builds the single resume message that answers every
paused call once none is left open.

:class:`PlanReplyPlugin` (installed by ``build_app``/``build_runner``) looks at every
message sent to ``Runner.run_async`` before ADK does:

- a reply **without a call id** (seed 000's documented shape) gets the id of the single
  open request of its tool name; none or several raise :class:`ReplyError`
  (``NO_MATCHING_REQUEST`` / ``AMBIGUOUS_REPLY``) and nothing is appended;
- a reply with a known call id but a **wrong or empty tool name** is renamed to the
  call's tool, so ADK resumes the call instead of running the tool again;
- each reply is recorded in the plan store at once, so a partial answer survives a
  restart and ``PlanSession.pending()`` stops listing it;
- when a decision withdrew other paused calls (approving or cancelling a plan withdraws
  its open questions), their results are added to the message, so the run resumes now.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.events import Event
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from plangate.adk.runtime import Loaded, PlanRuntime
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
    "PlanReplyPlugin",
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
                raise ReplyError(exc.code, exc.reason, call_id=matched.call_id) from None
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
        detail={"call_id": call_id, "tool": tool_name, "reason": exc.reason, "code": exc.code},
    )


# -- over the wire ---------------------------------------------------------------------


class PlanReplyPlugin(BasePlugin):
    """Matches, records and completes human replies before ADK resumes a run.

    Registered once on the App (``build_app`` does it); it serves every agent in the
    runner that has Plan Mode mounted.
    """

    def __init__(self) -> None:
        super().__init__(name="plangate_replies")

    async def on_user_message_callback(
        self, *, invocation_context: Any, user_message: types.Content
    ) -> types.Content | None:
        replies = replies_in(user_message)
        if not replies:
            return None
        session = invocation_context.session
        owners = list(_governed(invocation_context.agent))
        if not owners:
            return None
        scopes = {
            runtime: PlanScope(session.app_name, session.user_id, session.id, runtime.branch)
            for _, runtime in owners
        }
        loaded = {runtime: await runtime.load(scope) for runtime, scope in scopes.items()}
        changed = False
        parts: list[types.Part] = []
        routed: dict[PlanRuntime, list[types.FunctionResponse]] = {}
        for part in user_message.parts or []:
            reply = part.function_response
            if reply is None:
                parts.append(part)
                continue
            runtime, canonical = _route(reply, loaded)
            if canonical is not reply:
                changed = True
                part = types.Part(function_response=canonical)
            parts.append(part)
            if runtime is not None:
                routed.setdefault(runtime, []).append(canonical)
        states: dict[PlanRuntime, PlanSessionState] = {}
        names = {runtime: name for name, runtime in owners}
        for runtime, replies_for in routed.items():
            recorded = await record_replies(
                runtime, scopes[runtime], replies_for, agent_name=names[runtime]
            )
            states[runtime] = recorded.state
        # Calls the decisions withdrew are answered here, so the run resumes now.
        sent = {p.function_response.id for p in parts if p.function_response is not None}
        for call in paused_calls(session.events):
            if call.id in sent:
                continue
            for state in states.values():
                resolution = state.resolutions.get(call.id or "")
                if resolution is None or resolution.reply is not None:
                    continue
                parts.append(
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=call.id,
                            name=resolution.tool_name or call.name,
                            response=resolution.result,
                        )
                    )
                )
                changed = True
                break
        if not changed:
            return None
        return types.Content(role="user", parts=parts)


def _route(
    reply: types.FunctionResponse, loaded: dict[PlanRuntime, Loaded]
) -> tuple[PlanRuntime | None, types.FunctionResponse]:
    """The runtime a reply belongs to, and the reply with its id and name made canonical."""
    if reply.id:
        for runtime, current in loaded.items():
            state = current.state
            matched = match_reply(
                state.record,
                state.resolved_names(),
                call_id=reply.id,
                tool_name=reply.name,
                response=reply.response,
            )
            if matched is not None:
                return runtime, _renamed(reply, matched.call_id, matched.tool_name)
        return None, reply
    if reply.name not in PLAN_TOOL_NAMES:
        return None, reply
    candidates = [
        (runtime, p)
        for runtime, current in loaded.items()
        if current.state.record is not None
        for p in current.state.record.pending
        if p.tool_name == reply.name
    ]
    if len(candidates) == 1:
        runtime, request = candidates[0]
        return runtime, _renamed(reply, request.call_id, request.tool_name)
    if candidates:
        ids = ", ".join(p.call_id for _, p in candidates)
        raise ReplyError(
            ReplyErrorCode.AMBIGUOUS_REPLY,
            f"the reply to {reply.name} has no call id and {len(candidates)} such requests "
            f"are open ({ids})",
        )
    raise ReplyError(
        ReplyErrorCode.NO_MATCHING_REQUEST,
        f"the reply to {reply.name} has no call id and no such request is open",
    )


def _renamed(reply: types.FunctionResponse, call_id: str, name: str) -> types.FunctionResponse:
    if reply.id == call_id and reply.name == name:
        return reply
    return types.FunctionResponse(id=call_id, name=name, response=reply.response)


def _governed(agent: BaseAgent) -> Iterator[tuple[str, PlanRuntime]]:
    from plangate.adk.setup import plan_runtime

    root = agent.root_agent if hasattr(agent, "root_agent") else agent
    seen: set[int] = set()
    stack = [root]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            runtime = plan_runtime(current)
            if runtime is not None and id(runtime) not in seen:
                seen.add(id(runtime))
                yield current.name, runtime
        stack.extend(current.sub_agents)
