"""The plan record: a durable, versioned design document with its approval history."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from plangate.plan.scope import Permission, Scope, plan_sha256

__all__ = [
    "GATE_ACTIVE_STATUSES",
    "ApprovalEvent",
    "PendingRequest",
    "PlanQuestion",
    "PlanRecord",
    "PlanStatus",
    "Revision",
    "content_sha256",
]


class PlanStatus(StrEnum):
    PENDING_ENTER = "pending_enter"
    EXPLORING = "exploring"
    DRAFTING = "drafting"
    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    CANCELLED = "cancelled"


# `pending_enter` blocks writes too: a plan the user has not yet confirmed must not
# leave a window in which the agent can write.
GATE_ACTIVE_STATUSES = frozenset(
    {
        PlanStatus.PENDING_ENTER,
        PlanStatus.EXPLORING,
        PlanStatus.DRAFTING,
        PlanStatus.PENDING_APPROVAL,
    }
)


def content_sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Revision(_Model):
    number: int
    content: str
    sha256: str
    author: Literal["model", "reviewer"]
    created_at: float
    scope: Scope | None = None
    """The scope approved with this revision (None: the whole workspace)."""


class PlanQuestion(_Model):
    id: int
    question: str
    options: list[str] | None = None
    answer: str | None = None
    call_id: str | None = None
    asked_at: float
    answered_at: float | None = None


class PendingRequest(_Model):
    """A human-in-the-loop request the run is paused on, keyed by its function-call id."""

    kind: Literal["enter", "exit", "question", "amendment", "edit", "tool"]
    """``amendment``: an approved plan's call needs more than its scope; ``edit``: a file
    write waiting for the human under the ``ask_each_edit`` permission; ``tool``: a call
    the policy file says to ask for."""
    call_id: str
    approval_id: str
    tool_name: str
    payload: dict[str, Any]
    revision: int | None = None
    sha256: str | None = None
    question_id: int | None = None
    created_at: float
    invocation_id: str | None = None
    """The ADK invocation paused on this request."""
    call_at: float | None = None
    """When the model made the call (its step); with ``call_index``, the order to ask in."""
    call_index: int = 0
    """The call's position among the function calls of its model step."""
    args_sha256: str | None = None
    """The paused call's arguments, hashed (amendments, edit reviews, tool calls): the
    approval lets only a call with these arguments run."""

    @property
    def order(self) -> tuple[float, int]:
        return (self.call_at if self.call_at is not None else self.created_at, self.call_index)


RequestKind = Literal["enter", "exit", "question", "amendment", "edit", "tool"]
DecisionKind = Literal["enter", "exit", "question", "exit_mode", "amendment", "edit", "tool"]
Decision = Literal["approved", "rejected", "answered", "cancelled", "withdrawn"]


class ApprovalEvent(_Model):
    """One applied human decision: who decided what about which revision, and when."""

    approval_id: str
    kind: DecisionKind
    decision: Decision
    actor: str
    decided_at: float
    call_id: str | None = None
    revision: int | None = None
    sha256: str | None = None
    note: str | None = None
    scope: Scope | None = None
    """The scope in force after the decision (approvals of plans and amendments)."""
    plan_id: str = ""
    agent_name: str = ""
    plan: PlanRecord | None = None
    """The plan as it was decided (set on the event handed to ``on_approval``; not stored
    inside the record's own history)."""


class PlanRecord(_Model):
    id: str
    status: PlanStatus
    objective: str
    branch: str = ""
    entry: Literal["model", "selection"] = "model"
    content: str = ""
    scope: Scope | None = None
    """What the plan may write, run and reach once approved; None keeps the behaviour of
    plans without a scope (the whole workspace)."""
    permission: Permission = "auto"
    """Chosen at approval: ``auto`` acts within the scope, ``ask_each_edit`` pauses every
    file write with its diff."""
    revisions: list[Revision] = Field(default_factory=list[Revision])
    asked_questions: list[PlanQuestion] = Field(default_factory=list[PlanQuestion])
    pending: list[PendingRequest] = Field(default_factory=list[PendingRequest])
    approvals: list[ApprovalEvent] = Field(default_factory=list[ApprovalEvent])
    reviewer_note: str | None = None
    suggested_content: str | None = None
    started_at: float
    updated_at: float
    finished_at: float | None = None
    """When the agent completed every todo of the approved plan: the approved-plan note
    stops and the agent is offered Plan Mode again. It ends nothing the human granted
    (a record stored before ``closed_at`` existed keeps its grant too, until a human
    closes the plan: only a human decision ends a grant)."""
    closed_at: float | None = None
    """When a human closed the approved plan (accepted the work, approved a new plan, or
    left Plan Mode): its scope, permission and sandbox binds stop applying then."""
    closed_by: str | None = None
    """Who closed it (always a human actor, e.g. ``user``)."""
    held: PlanRecord | None = None
    """The approved plan whose grant still held when the model asked to plan anew
    (``enter_plan_mode``): it comes back if the user declines, and is closed by the user
    when they confirm. The model's request alone ends no grant."""

    def is_gate_active(self) -> bool:
        return self.status in GATE_ACTIVE_STATUSES

    def is_being_implemented(self) -> bool:
        """Approved and not closed by a human: the grant (scope, permission) holds, even
        once the agent has completed its todos."""
        return self.status is PlanStatus.APPROVED and self.closed_at is None

    def is_unfinished(self) -> bool:
        """Being implemented and its todos not all completed yet: the agent is told of
        the approved plan at every step."""
        return self.is_being_implemented() and self.finished_at is None

    def open_requests(self) -> list[PendingRequest]:
        """The pending requests in the order the model asked them."""
        return sorted(self.pending, key=lambda p: p.order)

    @property
    def content_revisions(self) -> int:
        return len(self.revisions)

    @property
    def sha256(self) -> str:
        """The hash approvals are bound to: the content and, when set, the scope."""
        return plan_sha256(self.content, self.scope)

    def governs_writes(self) -> bool:
        """Whether the approved plan limits or reviews what the agent changes."""
        return self.is_being_implemented() and (
            self.scope is not None or self.permission == "ask_each_edit"
        )

    def pending_for(self, call_id: str) -> PendingRequest | None:
        return next((p for p in self.pending if p.call_id == call_id), None)

    def dump(self) -> dict[str, Any]:
        """The JSON form shown to models and UIs (camelCase, with derived fields)."""
        data = self.model_dump(
            mode="json", by_alias=True, exclude={"approvals": {"__all__": {"plan"}}, "held": True}
        )
        data["holdsGrant"] = self.held is not None
        data["contentRevisions"] = self.content_revisions
        data["sha256"] = self.sha256
        data["gateActive"] = self.is_gate_active()
        data["scopeSummary"] = self.scope.summary() if self.scope is not None else None
        return data


ApprovalEvent.model_rebuild()
PlanRecord.model_rebuild()
