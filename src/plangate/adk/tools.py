"""The four plan tools. Three of them pause the run for a human, but only for a valid
request: an invalid one returns a structured error the model can correct in the same run."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events import Event, EventActions
from google.adk.tools import BaseTool, ToolContext
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

from plangate.adk.call_order import in_call_order
from plangate.adk.contract import (
    DeclaredOnceFunctionTool,
    DeclaredOnceLongRunningTool,
    refresh_tools_every_step,
)
from plangate.adk.own_tools import mark_own
from plangate.adk.replies import record_replies
from plangate.adk.runtime import Loaded, PlanRuntime
from plangate.adk.scope import scope_of
from plangate.errors import ErrorCode, error_result
from plangate.plan import transitions
from plangate.plan.record import PlanRecord
from plangate.plan.session_state import PlanSessionState
from plangate.plan.transitions import PlanError, Transition
from plangate.store.store import Conflict

__all__ = ["PlanToolSet", "UpdatePlanContentTool", "make_enter_plan_mode_tool", "plan_runtime"]

log = logging.getLogger("plangate")

_MAX_ATTEMPTS = 5


class PlanToolSet(BaseToolset):
    """``enter_plan_mode``, ``update_plan_content``, ``exit_plan_mode``, ``ask_user_question``.

    ``enter_plan_mode`` is left out of the schema while the user has selected Plan Mode or
    a plan is already being made.
    """

    def __init__(self, runtime: PlanRuntime) -> None:
        super().__init__()
        # The tool list depends on the plan's state, which changes within an invocation.
        refresh_tools_every_step(self)
        self.runtime = runtime
        self._tools = _build_tools(runtime)

    async def get_tools(self, readonly_context: Any = None) -> list[BaseTool]:
        if readonly_context is None:
            return list(self._tools)
        if await self._hide_enter(readonly_context):
            return [t for t in self._tools if t.name != "enter_plan_mode"]
        return list(self._tools)

    async def _hide_enter(self, context: Any) -> bool:
        options = self.runtime.options
        key = options.force_enter_plan_state_key
        if key and context.state.get(key) == options.force_enter_plan_state_value:
            return True
        loaded = await self.runtime.load(scope_of(context, self.runtime.branch))
        record = loaded.state.record
        return loaded.unreadable is not None or (record is not None and record.is_gate_active())


def _build_tools(runtime: PlanRuntime) -> list[BaseTool]:
    async def exit_plan_mode(
        tool_context: ToolContext, summary: str | None = None
    ) -> dict[str, Any] | None:
        """Submit the plan for the user's approval. The run pauses until they decide.

        The plan must not be empty. If the user rejects it, revise it with
        update_plan_content and submit again.

        Args:
            summary: A one-line summary for the reviewer.
        """
        async with in_call_order(tool_context):
            return await _pausing(
                runtime,
                tool_context,
                lambda record: transitions.request_exit(
                    record, summary=summary, call_id=_call_id(tool_context), now=runtime.now()
                ),
            )

    async def ask_user_question(
        question: str, tool_context: ToolContext, options: list[str] | None = None
    ) -> dict[str, Any] | None:
        """Ask the user a clarifying question while planning. The run pauses for the answer.

        Args:
            question: The question.
            options: Suggested answers, if there are natural choices.
        """
        async with in_call_order(tool_context):
            return await _pausing(
                runtime,
                tool_context,
                lambda record: transitions.ask_question(
                    record,
                    question=question,
                    options=options,
                    call_id=_call_id(tool_context),
                    now=runtime.now(),
                ),
            )

    return [
        make_enter_plan_mode_tool(runtime),
        UpdatePlanContentTool(runtime),
        mark_own(DeclaredOnceLongRunningTool(exit_plan_mode)),
        mark_own(DeclaredOnceLongRunningTool(ask_user_question)),
    ]


def make_enter_plan_mode_tool(runtime: PlanRuntime) -> LongRunningFunctionTool:
    """``enter_plan_mode`` bound to ``runtime``: a valid call opens an entry request and
    pauses the run until the user confirms; an invalid one returns an error result.

    ``PlanToolSet`` mounts it; build it yourself only to compose your own toolset over a
    runtime ``setup_plan`` mounted (``plan_runtime(agent)``).
    """

    async def enter_plan_mode(objective: str, tool_context: ToolContext) -> dict[str, Any] | None:
        """Ask the user to enter Plan Mode before starting non-trivial work.

        While in Plan Mode only read-only tools run: explore, clarify with
        ask_user_question, write the plan with update_plan_content and submit it with
        exit_plan_mode. The run pauses until the user confirms.

        Args:
            objective: A short description of what the plan is for.
        """
        options = runtime.options
        key = options.force_enter_plan_state_key
        async with in_call_order(tool_context):
            if key and tool_context.state.get(key) == options.force_enter_plan_state_value:
                return error_result(
                    ErrorCode.PLAN_MODE_GATE,
                    "the user selected Plan Mode in the UI, so entry is automatic",
                    "start exploring with read-only tools or an Explore sub-agent, or "
                    "ask_user_question",
                    tool="enter_plan_mode",
                )
            return await _pausing(
                runtime,
                tool_context,
                lambda record: transitions.request_enter(
                    record,
                    objective=objective,
                    call_id=_call_id(tool_context),
                    now=runtime.now(),
                    branch=runtime.branch,
                ),
            )

    return mark_own(DeclaredOnceLongRunningTool(enter_plan_mode))


class UpdatePlanContentTool(DeclaredOnceFunctionTool):
    """``update_plan_content`` bound to ``runtime``: writes the plan's Markdown (append or
    replace) and its scope; it never pauses. ``PlanToolSet`` mounts it."""

    def __init__(self, runtime: PlanRuntime) -> None:
        super().__init__(_update_plan_content(runtime))
        self.runtime = runtime
        mark_own(self)


def _update_plan_content(runtime: PlanRuntime) -> Callable[..., Any]:
    async def update_plan_content(
        tool_context: ToolContext,
        content: str = "",
        mode: str = "append",
        scope: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write the plan (Markdown) and its scope. The first update moves the plan from
        exploring to drafting.

        The scope is what the approved plan may do: after approval, writing another
        file, running another command or using the network pauses for the user.

        Args:
            content: Plan Markdown to add, or the whole plan when mode is "replace".
                May be empty when only the scope changes.
            mode: "append" (default) adds to the plan; "replace" replaces it.
            scope: Replaces the plan's scope, e.g. {"write": ["inventory/stock.py",
                "tests/"], "commands": ["python -m pytest"], "network": false}.
                "write" takes workspace-relative paths or globs ("src/**/*.py",
                "docs/" for a folder); "commands" takes command prefixes.
        """
        async with in_call_order(tool_context):
            applied = await _apply(
                runtime,
                tool_context,
                lambda record: transitions.update_content(
                    record, content=content, mode=mode, now=runtime.now(), scope=scope
                ),
            )
            if not isinstance(applied, Transition):
                return applied
            # Carried by this call's result event, so a UI streaming the run sees the
            # draft grow; when a plan call of the same step commits later, the runner
            # plugin brings the value level with the store as the event is appended.
            tool_context.state[runtime.state_key] = applied.record.dump()
            return applied.result

    return update_plan_content


def _call_id(tool_context: ToolContext) -> str:
    return tool_context.function_call_id or ""


# One plan transition at a time per plan in this process: parallel calls of one model
# step then commit (and mirror) in a definite order. Compare-and-set still guards
# against writers in other processes. Held weakly: a lock lives while a call holds or
# awaits it, so a server that sees many sessions keeps none of theirs once they are idle.
_locks: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()


def _lock(key: str) -> asyncio.Lock:
    slot = (id(asyncio.get_running_loop()), key)
    lock = _locks.get(slot)
    if lock is None:
        lock = _locks[slot] = asyncio.Lock()
    return lock


StateChange = Callable[[Loaded], "tuple[PlanSessionState, list[Transition]] | dict[str, Any]"]
"""From the plan state just loaded: the state to commit and its transitions, or the error
result that answers the call instead (nothing is committed then)."""


async def commit_change(
    runtime: PlanRuntime,
    tool_context: Any,
    change: StateChange,
    *,
    paused: bool = False,
) -> tuple[PlanSessionState, list[Transition]] | dict[str, Any]:
    """Load the plan state, compute one change and commit it by compare-and-set, under
    the session's lock and retried when another writer won; what was committed, or an
    error result (an unreadable state, the change's own refusal, every attempt lost).

    A ``paused`` call mirrors the committed record before the next call may commit, so
    several paused calls of one step leave the mirror at the last of them.
    """
    scope = scope_of(tool_context, runtime.branch)
    conflict: Conflict | None = None
    async with _lock(scope.key):
        for _ in range(_MAX_ATTEMPTS):
            loaded = await runtime.load(scope)
            if loaded.unreadable:
                return _unreadable(loaded.unreadable)
            changed = change(loaded)
            if isinstance(changed, dict):
                return changed
            state, done = changed
            try:
                await runtime.commit(scope, loaded, state, done)
            except Conflict as exc:
                conflict = exc
                continue
            if paused and state.record is not None:
                await _mirror_while_paused(runtime, tool_context, state.record)
            return changed
        assert conflict is not None  # every attempt lost a compare-and-set
        return _conflict(conflict)


async def _apply(
    runtime: PlanRuntime,
    tool_context: Any,
    step: Callable[[PlanRecord | None], Transition],
    *,
    paused: bool = False,
) -> Transition | dict[str, Any]:
    """Run one pure transition of the plan record and commit it (:func:`commit_change`);
    the transition, or an error result."""

    def change(loaded: Loaded) -> tuple[PlanSessionState, list[Transition]] | dict[str, Any]:
        try:
            transition = step(loaded.state.record)
        except PlanError as exc:
            return exc.to_result()
        return loaded.state.model_copy(update={"record": transition.record}), [transition]

    committed = await commit_change(runtime, tool_context, change, paused=paused)
    return committed if isinstance(committed, dict) else committed[1][0]


async def _pausing(
    runtime: PlanRuntime, tool_context: ToolContext, step: Callable[[PlanRecord | None], Transition]
) -> dict[str, Any] | None:
    """Run a transition that opens a human request; ``None`` tells ADK to pause the run."""
    call_id = _call_id(tool_context)
    if not call_id:
        return error_result(
            ErrorCode.INVALID_STATE,
            "this tool must be called as a function call with an id",
            "call it as a tool call; the host gives every call an id",
        )
    rerun = await _rerun(runtime, tool_context, call_id)
    if rerun is not _NEW_CALL:
        return rerun
    invocation_id, call_at, call_index = _call_position(tool_context, call_id)

    def opened(record: PlanRecord | None) -> Transition:
        transition = step(record)
        request = transition.record.pending_for(call_id)
        if request is not None:
            request.invocation_id = invocation_id
            request.call_at = call_at
            request.call_index = call_index
            if call_at is not None:
                transitions.number_in_call_order(transition.record, invocation_id, call_at)
        return transition

    applied = await _apply(runtime, tool_context, opened, paused=True)
    if not isinstance(applied, Transition):
        return applied
    return None


_NEW_CALL: Any = object()


async def _rerun(
    runtime: PlanRuntime, tool_context: ToolContext, call_id: str
) -> dict[str, Any] | None:
    """A call that already opened a request is never asked twice.

    ADK runs a paused call again when the reply it got is malformed (a wrong or empty
    tool name); the request it opened is answered with the reply instead, or stays open.
    """
    scope = scope_of(tool_context, runtime.branch)
    loaded = await runtime.load(scope)
    state = loaded.state
    if call_id in state.resolutions:
        return state.resolutions[call_id].result
    if state.record is None or state.record.pending_for(call_id) is None:
        return _NEW_CALL
    replies = [r for r in _session_replies(tool_context) if r.id == call_id]
    if replies:
        recorded = await record_replies(
            runtime, scope, replies[-1:], agent_name=tool_context.agent_name
        )
        resolution = recorded.state.resolutions.get(call_id)
        if resolution is not None:
            return resolution.result
        ignored = recorded.state.ignored.get(call_id)
        if ignored is not None:
            log.warning("reply to %s ignored on re-run: %s", call_id, ignored.reason)
    return None


def _session_replies(tool_context: ToolContext) -> list[types.FunctionResponse]:
    session = tool_context.get_invocation_context().session
    return [
        part.function_response
        for event in session.events
        if event.author == "user"
        for part in (event.content.parts if event.content else None) or []
        if part.function_response is not None
    ]


def _call_position(tool_context: ToolContext, call_id: str) -> tuple[str, float | None, int]:
    """The invocation, step time and position of this call among its step's calls."""
    ctx = tool_context.get_invocation_context()
    for event in reversed(ctx.session.events):
        calls = event.get_function_calls()
        for index, call in enumerate(calls):
            if call.id == call_id:
                return ctx.invocation_id, float(event.timestamp), index
    return ctx.invocation_id, None, 0


async def _mirror_while_paused(
    runtime: PlanRuntime, tool_context: ToolContext, record: PlanRecord
) -> None:
    """A paused tool emits no event, so its state delta would be lost; append one (of the
    runner's own invocation) so UIs reading session state see the pending request now."""
    ctx = tool_context.get_invocation_context()
    event = Event(
        author=tool_context.agent_name,
        invocation_id=ctx.invocation_id,
        branch=ctx.branch,
        actions=EventActions(state_delta={runtime.state_key: record.dump()}),
    )
    await ctx.session_service.append_event(ctx.session, event)


def _unreadable(reason: str) -> dict[str, Any]:
    return error_result(
        ErrorCode.PLAN_STATE_UNREADABLE, reason, "ask the user to leave Plan Mode (/plan off)"
    )


def _conflict(exc: Conflict) -> dict[str, Any]:
    return error_result(
        ErrorCode.PLAN_CONFLICT,
        f"the plan was changed by another call at the same time ({exc}); nothing was applied",
        "look at the current plan and retry if still needed",
    )


def plan_runtime(agent: LlmAgent) -> PlanRuntime | None:
    """The Plan Mode runtime mounted on ``agent``, if any (its :class:`PlanToolSet`)."""
    for tool in agent.tools:
        if isinstance(tool, PlanToolSet):
            return tool.runtime
    return None
