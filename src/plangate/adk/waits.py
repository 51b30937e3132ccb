"""What a run waits for: the one record the governors read to tell a pause from an end.

A run is paused while a human request it raised is open in plangate's store (entering
Plan Mode, a plan approval, a question, an amendment, an edit review, a policy ``ask``),
or while it holds a long-running call -- plangate's or a host tool's -- that no function
response has answered yet. Both are sets keyed by call id; nothing here looks at which
event came last. (It did once: a model step that batched a question beside another call
appends result and mirror events after the paused call, and the protocol runtime then
took the pause for the end of the run and closed its protocol run under it.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.adk.events import Event
from google.adk.events._interrupts import extract_event_interrupt_ids

from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import scope_of
from plangate.plan.record import PendingRequest

__all__ = ["RunWaits", "run_waits", "unanswered_calls"]


@dataclass(frozen=True)
class RunWaits:
    """What one invocation waits for."""

    requests: tuple[PendingRequest, ...] = ()
    """plangate's open requests raised by this invocation, in the order they were asked."""
    calls: tuple[str, ...] = ()
    """Ids of this invocation's long-running calls with no function response yet."""

    @property
    def paused(self) -> bool:
        return bool(self.requests or self.calls)


def unanswered_calls(events: Iterable[Event], invocation_id: str) -> tuple[str, ...]:
    """The long-running calls of ``invocation_id`` that no function response answers.

    A set difference over the whole session, so any batch shape and any events appended
    after the pause (partial results, state mirrors) give the same answer.
    """
    asked: list[str] = []
    answered: set[str] = set()
    for event in events:
        answered.update(r.id for r in event.get_function_responses() if r.id)
        if event.invocation_id == invocation_id:
            interrupts = extract_event_interrupt_ids(event)
            asked.extend(c.id for c in event.get_function_calls() if c.id in interrupts)
    return tuple(call_id for call_id in asked if call_id not in answered)


async def run_waits(context: Any, plan: PlanRuntime | None) -> RunWaits:
    """What the invocation of ``context`` (a callback or tool context) waits for.

    ``plan`` is the Plan Mode runtime mounted on the agent, if any. A plan state that
    cannot be read adds nothing: the unanswered calls still tell a pause.
    """
    invocation_id: str = context.invocation_id
    requests: tuple[PendingRequest, ...] = ()
    if plan is not None:
        loaded = await plan.load(scope_of(context, plan.branch))
        record = loaded.state.record
        if record is not None:
            requests = tuple(
                request
                for request in record.open_requests()
                if request.invocation_id == invocation_id
            )
    session = context.session
    return RunWaits(requests, unanswered_calls(session.events, invocation_id))
