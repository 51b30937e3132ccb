"""Plan calls of one model step take effect in the order the model wrote them.

ADK runs the calls of a step as parallel tasks, and each passes awaiting callbacks (the
gate reads the store) before its tool starts, so their order at the plan is a race. A
model that batches ``update_plan_content`` then ``exit_plan_mode`` means "write, then
submit": the submit must see the content. Each plan call therefore waits until the plan
calls written before it in the same step have finished.

Only a step's first execution is ordered: when any call of the step already has a
response (a resumed or re-run call), the others are not running and nothing waits.
A predecessor that never reaches its tool (a name the model made up for a hidden tool)
releases its successors after ``WAIT_LIMIT_S``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from google.adk.events import Event
from google.adk.tools import ToolContext

from plangate.plan.gate import PLAN_TOOL_NAMES

__all__ = ["WAIT_LIMIT_S", "in_call_order"]

log = logging.getLogger("plangate")

WAIT_LIMIT_S = 2.0


@dataclass
class _Step:
    plan_calls: int
    finished: set[str] = field(default_factory=set)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


# (event loop, step event id) -> the step's finished plan calls in this process.
_steps: dict[tuple[int, str], _Step] = {}


@asynccontextmanager
async def in_call_order(tool_context: ToolContext) -> AsyncIterator[None]:
    """Wait for the earlier plan calls of this call's step, run, then release the later ones."""
    call_id = tool_context.function_call_id or ""
    found = _earlier_plan_calls(tool_context, call_id)
    if found is None:
        yield
        return
    step_event, earlier, plan_calls = found
    key = (id(asyncio.get_running_loop()), step_event.id)
    step = _steps.setdefault(key, _Step(plan_calls=plan_calls))
    if earlier:
        try:
            async with step.changed:
                await asyncio.wait_for(
                    step.changed.wait_for(lambda: earlier <= step.finished), WAIT_LIMIT_S
                )
        except TimeoutError:
            log.warning("plan call %s ran before %s of its step", call_id, earlier - step.finished)
    try:
        yield
    finally:
        async with step.changed:
            step.finished.add(call_id)
            step.changed.notify_all()
        if len(step.finished) >= step.plan_calls:
            _steps.pop(key, None)


def _earlier_plan_calls(
    tool_context: ToolContext, call_id: str
) -> tuple[Event, set[str], int] | None:
    """The step event, the ids of plan calls written before this one, and the step's count
    of plan calls; ``None`` when there is nothing to order."""
    if not call_id:
        return None
    events = tool_context.get_invocation_context().session.events
    for position in range(len(events) - 1, -1, -1):
        calls = events[position].get_function_calls()
        ids = [call.id or "" for call in calls]
        if call_id not in ids:
            continue
        plan_ids = [call.id or "" for call in calls if call.name in PLAN_TOOL_NAMES]
        if len(plan_ids) < 2 or _has_responses(events[position + 1 :], set(ids)):
            return None
        earlier = set(plan_ids[: plan_ids.index(call_id)]) if call_id in plan_ids else set()
        return events[position], earlier, len(plan_ids)
    return None


def _has_responses(events: list[Event], ids: set[str]) -> bool:
    return any(
        response.id in ids for event in events for response in event.get_function_responses()
    )
