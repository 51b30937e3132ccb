"""``PlanSession``: what a surface (terminal, web, editor) needs to drive one conversation.

Surfaces never touch the store: they run turns, read the plan and its pending requests,
answer them with replies bound to what was shown, and switch modes, all through here.

Human replies -- every request answered exactly once
-----------------------------------------------------
One model step can raise several requests (two ``ask_user_question`` calls, a question
beside ``exit_plan_mode``). The run resumes only when every one is answered, so answers
are recorded one by one and the run is resumed once::

    for request in await session.pending():           # open requests, call order, each once
        reply = PlanSession.answer(request, "PostgreSQL")   # or approve / reject / confirm_enter
        waiting = await session.submit(reply)          # recorded now; raises ReplyError
    if waiting.ready:                                  # nothing left open
        async for event in session.run(waiting.message):   # one message, every response
            ...

- ``await pending() -> list[PendingRequest]``: the open requests in the order the model
  asked them; an answered or withdrawn request is not listed.
- ``await submit(reply) -> Awaiting``: records one reply (a ``Content`` from the
  builders, a ``Part`` or a ``FunctionResponse``) in the plan store at once -- it
  survives a restart -- after checking it against the request it answers: the call id,
  and the ``approval_id`` / ``revision`` / ``sha256`` / ``question_id`` it carries. A
  reply without a call id answers the single open request of its tool name. Refused
  replies raise :class:`~plangate.plan.replies.ReplyError` with a ``code``
  (``UNKNOWN_REQUEST``, ``ALREADY_ANSWERED``, ``NO_MATCHING_REQUEST``,
  ``AMBIGUOUS_REPLY``, ``STALE_REPLY``, ``INVALID_REPLY``), a message and a hint; nothing
  is recorded then. Submitting the very same reply again changes nothing and is not an
  error. Approving a plan, or declining or leaving Plan Mode, withdraws the questions
  still open (the model is told so), so the run can resume at once.
- ``await awaiting() -> Awaiting``: ``open`` (as ``pending()``), ``message`` (the
  ``types.Content`` with a function response for every call the run paused on, once
  none is open, else None) and ``ready``. ``await resume_message()`` is its message.
- The static builders ``approve``, ``reject``, ``answer`` and ``confirm_enter`` build a
  reply bound to what was shown. With a single request, passing it straight to ``run``
  works as before; with several, submit each and run ``resume_message()``.

Mode selection -- safe while a run is in progress
-------------------------------------------------
``close_plan()`` is the human's step that ends an approved plan's grant (its todos
being completed does not). ``select_plan()`` and ``leave_plan()`` write only plangate's store, never the ADK
session a running invocation holds: the selection is recorded and applied at the next
model-step boundary of the running invocation (or, for ``leave_plan`` with no run in
progress in this process, at once). ``mode()`` shows ``{active, pending}``. A selection
passed as ``state_delta`` to ``run`` is recorded the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event, EventActions
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from plangate.adk.capability import CONFIRMATION_CALL
from plangate.adk.replies import Awaiting, awaiting, record_replies, replies_in
from plangate.adk.run_config import run_config as observed_run_config
from plangate.adk.runner import function_reply
from plangate.adk.runtime import Loaded, PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.adk.setup import plan_runtime
from plangate.errors import ErrorCode, error_result
from plangate.journal.events import JournalEvent
from plangate.plan import transitions
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.plan.scope import Permission, Scope
from plangate.plan.session_state import PlanSessionState, SelectionRequest
from plangate.store.store import Conflict, JournalEntry

__all__ = ["Awaiting", "ModeState", "PlanSession", "ReplyError", "ReplyErrorCode"]

log = logging.getLogger("plangate")

SYSTEM_AUTHOR = "plangate"

_MAX_ATTEMPTS = 5

_STATE_ONLY = GetSessionConfig(num_recent_events=0)

# Tools whose call waits for a person; a stop never answers them in the person's place.
_HUMAN_REQUEST_TOOLS = frozenset({"enter_plan_mode", "exit_plan_mode", "ask_user_question"})

# Runs in progress in this process, by session: a mode switch made meanwhile waits for
# the running invocation's next step boundary instead of writing into its session.
_running: dict[str, int] = {}


@dataclass(frozen=True)
class ModeState:
    """Plan mode as the user sees it: ``active`` now, and a selection ``pending`` for the
    next step boundary (None when nothing is pending)."""

    active: bool
    pending: bool | None
    plan_status: str | None


class PlanSession:
    def __init__(self, runner: Runner, *, user_id: str, session_id: str) -> None:
        agent = runner.agent
        if not isinstance(agent, LlmAgent) or plan_runtime(agent) is None:
            raise ValueError("the runner's root agent has no Plan Mode; call setup_plan first")
        self.runner = runner
        self.agent = agent
        self.runtime: PlanRuntime = plan_runtime(agent)  # type: ignore[assignment]
        self.user_id = user_id
        self.session_id = session_id
        self.settled_state: dict[str, Any] | None = None
        """The session state as stored once the last ``run`` settled (None: not known),
        so a caller reconciling with it after the run need not read it again."""

    @classmethod
    async def open(
        cls,
        runner: Runner,
        *,
        user_id: str = "user",
        session_id: str | None = None,
        state: dict[str, Any] | None = None,
    ) -> PlanSession:
        """Resume ``session_id`` if it exists, else create it."""
        service = runner.session_service
        existing = None
        if session_id:
            existing = await service.get_session(
                app_name=runner.app_name, user_id=user_id, session_id=session_id
            )
        if existing is None:
            existing = await service.create_session(
                app_name=runner.app_name, user_id=user_id, session_id=session_id, state=state
            )
        return cls(runner, user_id=user_id, session_id=existing.id)

    @classmethod
    async def find(
        cls, runner: Runner, *, session_id: str, user_id: str = "user"
    ) -> PlanSession | None:
        """The stored session ``session_id``, or None when there is none (nothing is
        created: a mistyped id must not silently become a new session)."""
        existing = await runner.session_service.get_session(
            app_name=runner.app_name, user_id=user_id, session_id=session_id
        )
        return None if existing is None else cls(runner, user_id=user_id, session_id=existing.id)

    @property
    def scope(self) -> PlanScope:
        return PlanScope(self.runner.app_name, self.user_id, self.session_id, self.runtime.branch)

    @property
    def running(self) -> bool:
        """A run of this session is in progress in this process."""
        return _running.get(self.scope.session_key, 0) > 0

    # -- reading ------------------------------------------------------------------------

    async def session(self, *, events: bool = True) -> Any:
        """The stored ADK session; ``events=False`` reads its state alone, which costs
        the same however long the conversation is."""
        return await self.runner.session_service.get_session(
            app_name=self.runner.app_name,
            user_id=self.user_id,
            session_id=self.session_id,
            config=None if events else _STATE_ONLY,
        )

    async def plan_state(self) -> PlanSessionState:
        # A copy: the loaded state is shared with the gate's cache.
        return (await self.runtime.load(self.scope)).state.model_copy(deep=True)

    async def record(self) -> PlanRecord | None:
        return (await self.plan_state()).record

    async def pending(self) -> list[PendingRequest]:
        """The open human requests, in the order the model asked them, each once."""
        record = await self.record()
        return record.open_requests() if record else []

    async def awaiting(self) -> Awaiting:
        """The open requests and, once none is left, the message that resumes the run."""
        state = await self.plan_state()
        session = await self.session()
        return awaiting(state, session.events if session is not None else [])

    async def resume_message(self) -> types.Content | None:
        """One user turn with a function response for every call the run paused on, once
        all are answered (None before that, or when nothing is paused)."""
        return (await self.awaiting()).message

    async def archived(self) -> list[PlanRecord]:
        return await self.runtime.archived(self.scope)

    async def journal(self, after: int = 0) -> list[JournalEntry]:
        store = await self.runtime.store()
        entries = await store.journal(self.scope.key, after=after)
        return entries

    async def selection(self) -> str | None:
        """The mode the user selected last (applied or still waiting for a boundary)."""
        key = self.runtime.options.force_enter_plan_state_key
        if not key:
            return None
        state = await self.plan_state()
        if state.requested is not None:
            return state.requested.value
        session = await self.session(events=False)
        in_session = session.state.get(key) if session is not None else None
        if in_session is not None and in_session != state.mirrored_selection:
            return str(in_session)  # written by the host, not applied yet
        return state.selection if state.selection is not None else in_session

    async def mode(self) -> ModeState:
        state = await self.plan_state()
        record = state.record
        active = bool(record and record.is_gate_active())
        options = self.runtime.options
        # No selection at all means the default mode.
        selected = await self.selection() or options.agent_state_value
        applied = state.selection or options.agent_state_value
        pending: bool | None = None
        if selected != applied:
            pending = selected == options.force_enter_plan_state_value
        return ModeState(active, pending, record.status.value if record else None)

    # -- acting -------------------------------------------------------------------------

    async def run(
        self,
        message: str | types.Content,
        *,
        state_delta: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
    ) -> AsyncGenerator[Event]:
        """Run one turn (a user message, or the resume message of a paused run)."""
        if isinstance(message, str):
            message = types.Content(role="user", parts=[types.Part(text=message)])
        key = self.runtime.options.force_enter_plan_state_key
        if state_delta and key and state_delta.get(key) is not None:
            await self._request(str(state_delta[key]))
        session_key = self.scope.session_key
        self.settled_state = None
        _running[session_key] = _running.get(session_key, 0) + 1
        try:
            async with aclosing(
                self.runner.run_async(
                    user_id=self.user_id,
                    session_id=self.session_id,
                    new_message=message,
                    state_delta=state_delta,
                    run_config=observed_run_config(run_config),
                )
            ) as events:
                async for event in events:
                    yield event
        finally:
            _running[session_key] -= 1
            if not _running[session_key]:
                del _running[session_key]
                try:
                    self.settled_state = await self._settle()
                except Exception:  # settling is best effort; the next boundary catches up
                    log.exception("could not settle plan state after the run")

    async def submit(self, reply: types.Content | types.Part | types.FunctionResponse) -> Awaiting:
        """Record one human reply now; raises ReplyError (with a code) when it is refused.

        Returns what is still open, and the resume message once nothing is.
        """
        replies = replies_in(reply)
        if len(replies) != 1:
            raise ReplyError(
                ReplyErrorCode.INVALID_REPLY,
                f"submit takes exactly one function response, got {len(replies)}",
            )
        state = await self.plan_state()
        resolution = state.resolutions.get(replies[0].id or "")
        if resolution is not None and resolution.reply is None:
            raise ReplyError(
                ReplyErrorCode.ALREADY_ANSWERED,
                f"the request {replies[0].id!r} was withdrawn: "
                f"{resolution.result.get('message', '')}",
                call_id=replies[0].id,
            )
        await record_replies(
            self.runtime, self.scope, replies, agent_name=self.agent.name, strict=True
        )
        if not self.running:
            await self._sync_mirror()
        return await self.awaiting()

    async def note_stopped(self, *, actor: str = "user", surface: str = "") -> None:
        """Journal that the user stopped the run in progress (``run.stopped``), and answer
        the tool calls the stop cut off.

        A call left without a response makes the next model request invalid for providers
        that pair every tool call with its result (OpenAI, Anthropic); each gets a
        ``RUN_STOPPED`` result instead. Open human requests keep waiting for their reply.
        """
        record = await self.record()
        event = JournalEvent(
            kind="run.stopped",
            subject=record.id if record else "",
            actor=actor,
            at=self.runtime.now(),
            detail={"surface": surface} if surface else {},
        )
        await self.runtime.journal(self.scope, event)
        # Human requests (open, or answered and waiting to be delivered together with the
        # rest of their batch) are not cut off: their replies resume the run.
        state = await self.plan_state()
        requests = {request.call_id for request in record.pending} if record else set()
        requests |= state.resolutions.keys()
        session = await self.session()
        cut_off = [
            call
            for call in unanswered_calls(session.events)
            if call.id and not _asks_the_human(call, requests)
        ]
        if cut_off:
            await self.runner.session_service.append_event(
                session,
                Event(
                    author="user",
                    invocation_id=f"e-{SYSTEM_AUTHOR}-{time.time_ns()}",
                    content=types.Content(
                        role="user",
                        parts=[
                            types.Part(
                                function_response=types.FunctionResponse(
                                    id=call.id,
                                    name=call.name,
                                    response=error_result(
                                        ErrorCode.RUN_STOPPED,
                                        "the user stopped the run before this call "
                                        "finished; its effect, if any, is unknown",
                                        "check what the call did before you repeat it",
                                    ),
                                )
                            )
                            for call in cut_off
                        ],
                    ),
                ),
            )

    async def set_state(self, delta: dict[str, Any]) -> None:
        """Write session state between runs (never while a run holds the session)."""
        if self.running:
            raise RuntimeError("a run of this session is in progress; its session is busy")
        await self._append_state(await self.session(events=False), delta)

    async def _append_state(self, session: Any, delta: dict[str, Any]) -> None:
        event = Event(
            author=SYSTEM_AUTHOR,
            invocation_id=f"e-{SYSTEM_AUTHOR}-{time.time_ns()}",
            actions=EventActions(state_delta=delta),
        )
        await self.runner.session_service.append_event(session, event)

    async def select_plan(self) -> str:
        """Select Plan Mode; it takes effect at the next step boundary."""
        mode = await self.mode()
        if mode.active:
            if mode.pending is False:
                await self._request(self.runtime.options.force_enter_plan_state_value)
            return "Plan mode is already active."
        await self._request(self.runtime.options.force_enter_plan_state_value)
        return "Entering plan mode (applies from the next step). Use /plan off to leave."

    async def leave_plan(self) -> str:
        """The user exit: cancel an active plan (journaled) or withdraw a pending entry.

        While a run is in progress the exit is recorded and applied at its next step
        boundary; otherwise at once.

        A corrupt plan state is archived and reset instead (journaled too): it gates like
        a plan being made, and this is the way out of it.

        """
        reset = await self._reset_corrupt()
        if reset is not None:
            return reset
        options = self.runtime.options
        mode = await self.mode()
        if mode.active:
            if self.running:
                await self._request(options.agent_state_value)
                return "Leaving plan mode at the next step: the plan will be cancelled."
            await self._cancel()
            return "Left plan mode: the plan was cancelled. Write tools run again."
        if mode.pending:
            await self._request(options.agent_state_value)
            return "Plan mode entry cancelled."
        record = await self.record()
        if record is not None and record.is_being_implemented():
            # A mode switch, which hosts may send on their own, never ends a grant.
            return (
                "Plan mode is already inactive. The approved plan still holds its scope "
                "and permission; /plan done closes it."
            )
        return "Plan mode is already inactive."

    async def accept_plan(self) -> str:
        """``close_plan`` for a surface's "plan done" command: the line to show."""
        if await self.close_plan():
            return (
                "Closed the approved plan: its scope and permission no longer apply. "
                "Start the next plan with /plan."
            )
        return "No approved plan is open."

    async def close_plan(self, *, actor: str = "user", reason: str = "accepted") -> bool:
        """The human closes the approved plan (accepts the finished work): its grant --
        scope, permission, the sandbox's scoped binds -- ends now, journaled as
        ``plan.closed`` with ``actor``. Requests still open under it are withdrawn.

        Completed todos never end a grant; this (or approving a new plan, or leaving
        Plan Mode) does. Returns False when no approved plan holds a grant.
        """
        runtime, scope = self.runtime, self.scope
        for _ in range(_MAX_ATTEMPTS):
            loaded = await runtime.load(scope)
            if loaded.unreadable:
                raise RuntimeError(f"the plan state cannot be read: {loaded.unreadable}")
            state = loaded.state.model_copy(deep=True)
            transition = transitions.close(
                state.record, now=runtime.now(), actor=actor, reason=reason
            )
            if transition is None:
                return False
            state.apply(transition)
            try:
                await runtime.commit(scope, loaded, state, [transition], [])
            except Conflict:
                continue
            if not self.running:
                await self._sync_mirror()
            return True
        raise RuntimeError("the plan kept changing while closing it; try again")

    # -- internals -------------------------------------------------------------------------

    async def _request(self, value: str) -> None:
        """Record a mode selection for the next step boundary (store only)."""
        runtime, scope = self.runtime, self.scope
        if not runtime.options.force_enter_plan_state_key:
            raise RuntimeError("mode selection is disabled (force_enter_plan_state_key=None)")
        for _ in range(_MAX_ATTEMPTS):
            loaded = await runtime.load(scope)
            if loaded.unreadable:
                raise RuntimeError(f"the plan state cannot be read: {loaded.unreadable}")
            state = loaded.state.model_copy(deep=True)
            now = runtime.now()
            state.requested = SelectionRequest(value=value, actor="user", at=now)
            event = JournalEvent(
                kind="mode.requested",
                subject=state.record.id if state.record else "",
                from_state=state.selection,
                to_state=value,
                actor="user",
                at=now,
            )
            try:
                await runtime.commit(scope, loaded, state, [], [event])
            except Conflict:
                continue
            return
        raise RuntimeError("the plan kept changing while selecting a mode; try again")

    async def _cancel(self) -> None:
        runtime, scope = self.runtime, self.scope
        options = runtime.options
        for _ in range(_MAX_ATTEMPTS):
            loaded = await runtime.load(scope)
            state = loaded.state.model_copy(deep=True)
            transition = transitions.cancel(
                state.record, now=runtime.now(), actor="user", reason="user exit"
            )
            if transition is None:
                return
            state.apply(transition)
            state.requested = None
            if options.force_enter_plan_state_key:
                state.selection = options.agent_state_value
            event = JournalEvent(
                kind="mode.selected",
                subject=transition.record.id,
                from_state=loaded.state.selection,
                to_state=options.agent_state_value,
                actor="user",
                at=runtime.now(),
            )
            try:
                await runtime.commit(scope, loaded, state, [transition], [event])
            except Conflict:
                continue
            await self._sync_mirror()
            return
        raise RuntimeError("the plan kept changing while leaving plan mode; try again")

    async def corrupt_state(self) -> str | None:
        """Why the stored plan state is corrupt, or None when it is not; ``leave_plan``
        resets a corrupt one."""
        loaded = await self.runtime.load(self.scope)
        return loaded.unreadable if loaded.corrupt is not None else None

    async def _reset_corrupt(self) -> str | None:
        """Archive a corrupt plan state and replace it with "no plan"; None if not corrupt."""
        runtime, scope = self.runtime, self.scope
        options = runtime.options
        key = options.force_enter_plan_state_key
        for _ in range(5):
            loaded = await runtime.load(scope)
            if loaded.corrupt is None:
                return None
            try:
                await runtime.reset_corrupt(
                    scope,
                    loaded,
                    actor="user",
                    selection=options.agent_state_value if key else None,
                )
            except Conflict:
                continue
            delta: dict[str, Any] = {runtime.state_key: None}
            if key:
                delta[key] = options.agent_state_value
            await self.set_state(delta)
            return (
                f"The corrupt plan state was reset ({loaded.unreadable}); the raw state is "
                "archived and the reset journaled. Plan mode is off: write tools run again."
            )
        raise RuntimeError("the plan state kept changing while resetting it; try again")

    async def _settle(self) -> dict[str, Any] | None:
        """After a run: an exit requested during it that no boundary applied applies now,
        and session state is brought level with the store. Returns the session state as
        stored then (None when it was not read)."""
        # Only looked at, never changed: the shared value needs no copy, and the mirror
        # below is brought level with this very read.
        loaded = await self.runtime.load(self.scope)
        state = loaded.state
        requested = state.requested
        options = self.runtime.options
        record = state.record
        if (
            requested is not None
            and requested.value == options.agent_state_value
            and record is not None
            and record.is_gate_active()
        ):
            await self._cancel()
            return None
        return await self._sync_mirror(loaded)

    async def _sync_mirror(self, loaded: Loaded | None = None) -> dict[str, Any] | None:
        """Session state mirrors the store (between runs only); ``loaded`` is the plan
        state as just read, if it was. Returns the session state as stored afterwards
        (None when the session or the plan state is unreadable)."""
        if loaded is None:
            loaded = await self.runtime.load(self.scope)
        session = await self.session(events=False)
        if session is None or loaded.unreadable:
            return None
        state = loaded.state
        delta: dict[str, Any] = {}
        dumped = state.record.dump() if state.record is not None else None
        if session.state.get(self.runtime.state_key) != dumped:
            delta[self.runtime.state_key] = dumped
        key = self.runtime.options.force_enter_plan_state_key
        in_session = session.state.get(key) if key else None
        if (
            key
            and state.requested is None
            and state.selection is not None
            and in_session in (None, state.mirrored_selection)
            and in_session != state.selection
        ):
            # The selection changed in the store (an approval or an exit); a value the
            # host wrote itself and no boundary saw yet is left alone.
            delta[key] = state.selection
        if delta:
            await self._append_state(session, delta)
        # ``append_event`` applied the delta to ``session.state`` as it stored it.
        return dict(session.state)

    # -- replies bound to what was shown --------------------------------------------------

    @staticmethod
    def confirm_enter(request: PendingRequest, yes: bool, note: str | None = None) -> types.Content:
        response: dict[str, Any] = {
            "status": "approved" if yes else "rejected",
            "approval_id": request.approval_id,
        }
        if note:
            response["reviewer_note"] = note
        return function_reply(request.call_id, request.tool_name, response)

    @staticmethod
    def approve(
        request: PendingRequest,
        *,
        content: str | None = None,
        note: str | None = None,
        scope: Scope | dict[str, Any] | None = None,
        permission: Permission | None = None,
    ) -> types.Content:
        """Approve a plan (optionally with edited content, an edited scope and the
        permission it acts with) or an amendment (optionally with an edited scope)."""
        response: dict[str, Any] = {
            "status": "approved",
            "approval_id": request.approval_id,
            "revision": request.revision,
            "sha256": request.sha256,
        }
        if content is not None:
            response["content"] = content
        if scope is not None:
            response["scope"] = scope.model_dump(mode="json") if isinstance(scope, Scope) else scope
        if permission is not None:
            response["permission"] = permission
        if note:
            response["reviewer_note"] = note
        return function_reply(request.call_id, request.tool_name, response)

    @staticmethod
    def reject(request: PendingRequest, *, note: str, content: str | None = None) -> types.Content:
        response: dict[str, Any] = {
            "status": "rejected",
            "approval_id": request.approval_id,
            "revision": request.revision,
            "sha256": request.sha256,
            "reviewer_note": note,
        }
        if content is not None:
            response["content"] = content
        return function_reply(request.call_id, request.tool_name, response)

    @staticmethod
    def answer(request: PendingRequest, answer: str) -> types.Content:
        return function_reply(
            request.call_id,
            request.tool_name,
            {"status": "answered", "question_id": request.question_id, "answer": answer},
        )


def _asks_the_human(call: types.FunctionCall, requests: set[str]) -> bool:
    """Whether ``call`` waits for a human: a plan tool, a request in the store, or ADK's
    confirmation of a call paused for an amendment, an edit review or a policy ask (its
    request is keyed by the paused call, the confirmation has an id of its own)."""
    if call.name in _HUMAN_REQUEST_TOOLS or call.id in requests:
        return True
    original = (
        (call.args or {}).get("originalFunctionCall") if call.name == CONFIRMATION_CALL else None
    )
    return isinstance(original, dict) and original.get("id") in requests


def unanswered_calls(events: list[Event]) -> list[types.FunctionCall]:
    """The function calls in ``events`` that no later event answers, in call order."""
    answered = {response.id for event in events for response in event.get_function_responses()}
    return [
        call for event in events for call in event.get_function_calls() if call.id not in answered
    ]
