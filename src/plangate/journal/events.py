"""Governance journal events: every transition, decision and refusal, append-only."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["JournalEvent"]


class JournalEvent(BaseModel):
    """One journaled fact. The store adds the scope (session, branch) and a sequence number."""

    kind: str
    """Dotted event name, e.g. ``plan.transition``, ``plan.gate.denied``, ``mode.selected``."""
    subject: str = ""
    """What the event is about: a plan id, a segment id, an intent id."""
    from_state: str | None = None
    to_state: str | None = None
    actor: str = "system"
    at: float
    revision: int | None = None
    sha256: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
