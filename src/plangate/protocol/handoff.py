"""Handoff: leaving one protocol segment for another inside the same run.

``evaluate_handoff`` decides a proposal from server-side state only and returns
everything the store must write atomically: both segment states, the journal events and
the intent revision. Nothing the model reports about its own progress is trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from plangate.protocol.actions import HANDOFF_ACTION, HANDOFF_TOOL, is_data_action
from plangate.protocol.definitions import (
    DEFINITIONS,
    LedgerEntry,
    ProtocolDefinition,
    ProtocolRef,
    ProtocolState,
    evaluate_completion,
    next_segment_id,
    start_segment,
)
from plangate.protocol.intent import (
    INTENT_TEXT_MAX_CHARS,
    IntentTransition,
    SessionIntent,
    TaskRelation,
)
from plangate.protocol.text_budget import truncate_text
from plangate.protocol.wire_model import WireModel

__all__ = [
    "HandoffDecision",
    "ProtocolEvent",
    "TransitionKind",
    "evaluate_handoff",
]

TransitionKind = Literal["handoff", "route-correction"]


class ProtocolEvent(WireModel):
    """A journal event to append; the store adds scope, sequence number and time."""

    kind: str
    subject: str
    """The segment the event is about."""
    revision: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class HandoffDecision(WireModel):
    accepted: bool
    reason_code: str | None = None
    transition_kind: TransitionKind | None = None
    unresolved_goals: tuple[str, ...] = ()
    """Computed from the source protocol's completion policy, never from the proposal."""
    source_state: ProtocolState
    """The source segment to store: ended when accepted, with the refused proposal in its
    ledger when rejected. Record the propose action through this, not ``record_action``."""
    target_state: ProtocolState | None = None
    events: tuple[ProtocolEvent, ...]
    intent_transition: IntentTransition | None = None
    warnings: tuple[str, ...] = ()


def _data_action_succeeded(
    entries: Iterable[LedgerEntry], is_data_action: Callable[[str], bool]
) -> bool:
    return any(e.status == "succeeded" and is_data_action(e.action) for e in entries)


def _rejection(
    state: ProtocolState,
    target: ProtocolRef,
    code: str,
    proposed: ProtocolEvent,
    unresolved: tuple[str, ...],
) -> HandoffDecision:
    ended = state.status not in ("active", "waiting")
    source_state = state
    if not ended:
        entry = LedgerEntry(
            action=HANDOFF_ACTION, tool=HANDOFF_TOOL, status="rejected", reason_code=code
        )
        source_state = state.model_copy(
            update={"ledger": (*state.ledger, entry), "revision": state.revision + 1}
        )
    rejected = ProtocolEvent(
        kind="protocol.handoff.rejected",
        subject=state.segment_id,
        revision=proposed.revision,
        detail={"reasonCode": code, "targetProtocol": str(target)},
    )
    return HandoffDecision(
        accepted=False,
        reason_code=code,
        unresolved_goals=unresolved,
        source_state=source_state,
        events=(proposed, rejected),
    )


def _intent_transition(
    intent: SessionIntent | None,
    task_relation: TaskRelation | None,
    user_input: str,
    target: ProtocolRef,
    warnings: list[str],
) -> IntentTransition | None:
    if intent is not None and task_relation != "side-chat":
        return IntentTransition(
            kind="handoff",
            intent_id=intent.intent_id,
            previous_revision_id=intent.revision_id,
            protocol=target,
            text=intent.text,
            task_relation=task_relation or "continue",
        )
    # A side-chat or intent-less run that needs another protocol is doing real work:
    # the current message becomes the task.
    text = user_input.strip()
    if not text:
        warnings.append("SESSION_INTENT_TEXT_REQUIRED")
        return None
    return IntentTransition(
        kind="handoff",
        intent_id=None,
        previous_revision_id=intent.revision_id if intent else None,
        protocol=target,
        text=truncate_text(text, INTENT_TEXT_MAX_CHARS, ellipsis="…"),
        task_relation="replace",
    )


def evaluate_handoff(
    state: ProtocolState,
    target: ProtocolRef,
    *,
    authorized: Collection[ProtocolRef],
    registered: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
    correction_requested: bool = False,
    earlier_ledger: Sequence[LedgerEntry] = (),
    intent: SessionIntent | None = None,
    task_relation: TaskRelation | None = None,
    user_input: str = "",
    target_requirements: Iterable[str] = (),
    is_data_action: Callable[[str], bool] = is_data_action,
) -> HandoffDecision:
    """Accept or reject a proposal to move the run from ``state``'s protocol to ``target``.

    Checks, in order: source segment still running; target registered; a requested route
    correction only while no data action has succeeded anywhere in the run
    (``earlier_ledger`` holds the run's previous segments); not the same protocol and
    version (a version upgrade is a handoff); target authorized; a strict source with
    unresolved goals cannot be left for a non-strict protocol except by correction.
    """
    source = registered[state.protocol]
    completion = evaluate_completion(state, definitions=registered)
    unresolved = completion.reason_codes if completion.status == "continue" else ()
    revision = state.revision + 1
    proposed = ProtocolEvent(
        kind="protocol.handoff.proposed",
        subject=state.segment_id,
        revision=revision,
        detail={
            "sourceProtocol": str(state.protocol),
            "targetProtocol": str(target),
            "correctionRequested": correction_requested,
            "unresolvedGoals": list(unresolved),
        },
    )

    def reject(code: str) -> HandoffDecision:
        return _rejection(state, target, code, proposed, unresolved)

    if state.status not in ("active", "waiting"):
        return reject("PROTOCOL_HANDOFF_SOURCE_NOT_ACTIVE")
    target_definition = registered.get(target)
    if target_definition is None:
        return reject("PROTOCOL_HANDOFF_TARGET_UNAVAILABLE")
    if correction_requested and _data_action_succeeded(
        (*earlier_ledger, *state.ledger), is_data_action
    ):
        return reject("PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED")
    if target.id == state.protocol.id and target.version <= state.protocol.version:
        return reject(
            "PROTOCOL_HANDOFF_SAME_PROTOCOL"
            if target.version == state.protocol.version
            else "PROTOCOL_HANDOFF_VERSION_DOWNGRADE"
        )
    if target not in set(authorized):
        return reject("PROTOCOL_HANDOFF_NOT_AUTHORIZED")
    if source.strict and not target_definition.strict and unresolved and not correction_requested:
        return reject("PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS")

    kind: TransitionKind = "route-correction" if correction_requested else "handoff"
    end_status = "aborted" if correction_requested else "handed_off"
    entry = LedgerEntry(action=HANDOFF_ACTION, tool=HANDOFF_TOOL, status="succeeded")
    source_state = state.model_copy(
        update={
            "ledger": (*state.ledger, entry),
            "revision": revision,
            "status": end_status,
        }
    )
    target_state = start_segment(
        target,
        next_segment_id(state.segment_id),
        requirements=target_requirements,
        definitions=registered,
    )
    reason_codes = ["PROTOCOL_ROUTE_CORRECTED"] if correction_requested else []
    ended_detail: dict[str, Any] = {"status": end_status, "transitionKind": kind}
    if correction_requested:
        ended_detail["reasonCode"] = "PROTOCOL_ROUTE_CORRECTED"
    events = (
        proposed,
        ProtocolEvent(
            kind="protocol.segment.ended",
            subject=state.segment_id,
            revision=revision,
            detail=ended_detail,
        ),
        ProtocolEvent(
            kind="protocol.handoff.accepted",
            subject=target_state.segment_id,
            revision=0,
            detail={
                "previousSegmentId": state.segment_id,
                "protocol": str(target),
                "reasonCodes": reason_codes,
                "transitionKind": kind,
            },
        ),
        ProtocolEvent(
            kind="protocol.segment.started",
            subject=target_state.segment_id,
            revision=0,
            detail={"protocol": str(target), "phase": target_state.phase},
        ),
    )
    warnings: list[str] = []
    transition = _intent_transition(intent, task_relation, user_input, target, warnings)
    return HandoffDecision(
        accepted=True,
        transition_kind=kind,
        unresolved_goals=unresolved,
        source_state=source_state,
        target_state=target_state,
        events=events,
        intent_transition=transition,
        warnings=tuple(warnings),
    )
