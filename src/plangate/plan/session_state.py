"""Everything Plan Mode keeps per session and branch, as one compare-and-set document.

Besides the plan record it holds what makes human replies apply exactly once (the
canonical result of every decided call id, and the replies that changed nothing) and
the user's mode selection: the one applied at the last step boundary, and one requested
since (a selection made while a run is in progress waits here for the next boundary).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from plangate.plan import transitions
from plangate.plan.record import PlanRecord
from plangate.plan.replies import ReplyErrorCode
from plangate.plan.transitions import ReplyIgnored, Transition

__all__ = ["IgnoredReply", "PlanSessionState", "Resolution", "SelectionRequest"]


class Resolution(BaseModel):
    """The canonical result of an applied human reply, shown in place of the raw reply."""

    result: dict[str, Any]
    reply: Any = None
    """The raw reply that was applied, to tell it apart from duplicates in the history.
    None when no reply was given (a request withdrawn by another decision)."""
    tool_name: str | None = None
    """The tool whose call this resolves."""


class IgnoredReply(BaseModel):
    reason: str
    reply: Any = None
    code: str | None = None


class SelectionRequest(BaseModel):
    """A mode selection the user made that the next step boundary applies."""

    value: str
    actor: str = "user"
    at: float


class PlanSessionState(BaseModel):
    record: PlanRecord | None = None
    selection: str | None = None
    """The mode selection last applied at a step boundary (e.g. ``plan`` or ``agent``)."""
    requested: SelectionRequest | None = None
    """A selection made through plangate, not applied yet (it waits for a step boundary)."""
    mirrored_selection: str | None = None
    """The selection value session state held after the last boundary; a different value
    there later is a selection the host wrote itself (``state_delta``)."""
    resolutions: dict[str, Resolution] = Field(default_factory=dict)
    """Applied HITL replies by function-call id."""
    ignored: dict[str, IgnoredReply] = Field(default_factory=dict)
    """Replies that changed nothing, by function-call id, with the reason the model is told."""

    def resolved_names(self) -> dict[str, str | None]:
        return {call_id: r.tool_name for call_id, r in self.resolutions.items()}

    def apply(self, transition: Transition, reply: Any = None) -> None:
        """Take ``transition``'s record and remember the calls it resolved."""
        before = self.record
        names = {p.call_id: p.tool_name for p in before.pending} if before else {}
        self.record = transition.record
        for call_id, result in transition.resolutions.items():
            answered = reply if reply is not None and call_id == _answered_id(transition) else None
            self.resolutions[call_id] = Resolution(
                result=result, reply=answered, tool_name=names.get(call_id)
            )

    def apply_reply(
        self, *, call_id: str, tool_name: str | None, response: Any, now: float, actor: str
    ) -> Transition:
        """Apply one reply to the request it answers; raises ReplyIgnored, changing nothing."""
        if call_id in self.resolutions:
            raise ReplyIgnored(
                "duplicate reply: this request was already decided",
                ReplyErrorCode.ALREADY_ANSWERED,
            )
        transition = transitions.apply_reply(
            self.record,
            call_id=call_id,
            tool_name=tool_name,
            response=response,
            now=now,
            actor=actor,
        )
        self.apply(transition, reply=response)
        self.ignored.pop(call_id, None)
        return transition

    def ignore(self, call_id: str, exc: ReplyIgnored, reply: Any) -> None:
        self.ignored[call_id] = IgnoredReply(reason=exc.reason, reply=reply, code=exc.code.value)


def _answered_id(transition: Transition) -> str | None:
    decision = transition.decision
    return decision.call_id if decision is not None else None
