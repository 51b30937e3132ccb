"""Everything Plan Mode keeps per session and branch, as one compare-and-set document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from plangate.plan.record import PlanRecord

__all__ = ["IgnoredReply", "PlanSessionState", "Resolution"]


class Resolution(BaseModel):
    """The canonical result of an applied human reply, shown in place of the raw reply."""

    result: dict[str, Any]
    reply: Any = None
    """The raw reply that was applied, to tell it apart from duplicates in the history."""


class IgnoredReply(BaseModel):
    reason: str
    reply: Any = None


class PlanSessionState(BaseModel):
    record: PlanRecord | None = None
    selection: str | None = None
    """The mode selection last applied at a step boundary (e.g. ``plan`` or ``agent``)."""
    resolutions: dict[str, Resolution] = Field(default_factory=dict)
    """Applied HITL replies by function-call id."""
    ignored: dict[str, IgnoredReply] = Field(default_factory=dict)
    """Replies that changed nothing, by function-call id, with the reason the model is told."""
