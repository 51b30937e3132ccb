"""``PlanSession``: what a surface (terminal, web, editor) needs to drive one conversation.

Surfaces never touch the store: they run turns, read the plan and its pending requests,
answer them with replies bound to what was shown, and switch modes, all through here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event, EventActions
from google.adk.runners import Runner
from google.genai import types

from plangate.adk.runner import function_reply
from plangate.adk.runtime import PlanRuntime, with_resolutions
from plangate.adk.scope import PlanScope
from plangate.adk.setup import plan_runtime
from plangate.journal.events import JournalEvent
from plangate.plan import transitions
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.session_state import PlanSessionState
from plangate.store.store import Conflict, JournalEntry

__all__ = ["ModeState", "PlanSession"]

SYSTEM_AUTHOR = "plangate"


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

    @property
    def scope(self) -> PlanScope:
        return PlanScope(self.runner.app_name, self.user_id, self.session_id, self.runtime.branch)

    # -- reading ------------------------------------------------------------------------

    async def session(self) -> Any:
        return await self.runner.session_service.get_session(
            app_name=self.runner.app_name, user_id=self.user_id, session_id=self.session_id
        )

    async def plan_state(self) -> PlanSessionState:
        return (await self.runtime.load(self.scope)).state

    async def record(self) -> PlanRecord | None:
        return (await self.plan_state()).record

    async def pending(self) -> list[PendingRequest]:
        record = await self.record()
        return list(record.pending) if record else []

    async def archived(self) -> list[PlanRecord]:
        return await self.runtime.archived(self.scope)

    async def journal(self, after: int = 0) -> list[JournalEntry]:
        store = await self.runtime.store()
        entries = await store.journal(self.scope.key, after=after)
        return entries

    async def selection(self) -> str | None:
        key = self.runtime.options.force_enter_plan_state_key
        return (await self.session()).state.get(key) if key else None

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

    def run(
        self,
        message: str | types.Content,
        *,
        state_delta: dict[str, Any] | None = None,
        run_config: RunConfig | None = None,
    ) -> AsyncIterator[Event]:
        if isinstance(message, str):
            message = types.Content(role="user", parts=[types.Part(text=message)])
        return self.runner.run_async(
            user_id=self.user_id,
            session_id=self.session_id,
            new_message=message,
            state_delta=state_delta,
            run_config=run_config,
        )

    async def set_state(self, delta: dict[str, Any]) -> None:
        """Write session state between runs (a durable selection, a mirrored record)."""
        session = await self.session()
        event = Event(
            author=SYSTEM_AUTHOR,
            invocation_id=f"e-{SYSTEM_AUTHOR}-{time.time_ns()}",
            actions=EventActions(state_delta=delta),
        )
        await self.runner.session_service.append_event(session, event)

    async def select_plan(self) -> str:
        """Select Plan Mode; it takes effect at the next step boundary."""
        mode = await self.mode()
        if mode.active and mode.pending is None:
            return "Plan mode is already active."
        await self._select(self.runtime.options.force_enter_plan_state_value)
        return "Entering plan mode (applies from the next step). Use /plan off to leave."

    async def leave_plan(self) -> str:
        """The user exit: cancel an active plan (journaled) or withdraw a pending entry.

        A corrupt plan state is archived and reset instead (journaled too): it gates like
        a plan being made, and this is the way out of it.
        """
        reset = await self._reset_corrupt()
        if reset is not None:
            return reset
        options = self.runtime.options
        mode = await self.mode()
        if mode.active:
            await self._cancel()
            return "Left plan mode: the plan was cancelled. Write tools run again."
        if mode.pending:
            await self._select(options.agent_state_value)
            return "Plan mode entry cancelled."
        return "Plan mode is already inactive."

    async def _select(self, value: str) -> None:
        key = self.runtime.options.force_enter_plan_state_key
        if not key:
            raise RuntimeError("mode selection is disabled (force_enter_plan_state_key=None)")
        await self.set_state({key: value})

    async def _cancel(self) -> None:
        runtime, scope = self.runtime, self.scope
        options = runtime.options
        for _ in range(5):
            loaded = await runtime.load(scope)
            state = loaded.state.model_copy(deep=True)
            transition = transitions.cancel(
                state.record, now=runtime.now(), actor="user", reason="user exit"
            )
            if transition is None:
                return
            state.record = transition.record
            with_resolutions(state, transition)
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
            delta: dict[str, Any] = {runtime.state_key: transition.record.dump()}
            if options.force_enter_plan_state_key:
                delta[options.force_enter_plan_state_key] = options.agent_state_value
            await self.set_state(delta)
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
        request: PendingRequest, *, content: str | None = None, note: str | None = None
    ) -> types.Content:
        response: dict[str, Any] = {
            "status": "approved",
            "approval_id": request.approval_id,
            "revision": request.revision,
            "sha256": request.sha256,
        }
        if content is not None:
            response["content"] = content
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
