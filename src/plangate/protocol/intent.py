"""Session intent: what the conversation is working on, and how a message changes it.

The store persists revisions; this module only decides *what* a revision should say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from plangate.protocol.definitions import ProtocolRef
from plangate.protocol.text_budget import truncate_text
from plangate.protocol.wire_model import WireModel

if TYPE_CHECKING:
    from plangate.protocol.router import RouteDecision

__all__ = [
    "FOLLOW_UP_LABEL",
    "INTENT_TEXT_MAX_CHARS",
    "REFINEMENT_LABEL",
    "IntentTransition",
    "SessionIntent",
    "TaskRelation",
    "effective_intent_text",
    "intent_transition_for_route",
    "refine_intent_text",
]

TaskRelation = Literal["continue", "refine", "replace", "side-chat"]
IntentChangeKind = Literal["initial", "replace", "refine", "route-switch", "handoff"]

INTENT_TEXT_MAX_CHARS = 2000
FOLLOW_UP_LABEL = "Follow-up instruction"
REFINEMENT_LABEL = "Additional requirement"
_REFINEMENT_OPEN = f"\n({REFINEMENT_LABEL}: "
_ELLIPSIS = "…"


class SessionIntent(WireModel):
    """The active revision of a session's task."""

    intent_id: str
    revision_id: str | None = None
    protocol: ProtocolRef
    text: str


class IntentTransition(WireModel):
    """A new intent revision to write; ``intent_id=None`` starts a new task identity."""

    kind: IntentChangeKind
    intent_id: str | None
    previous_revision_id: str | None
    protocol: ProtocolRef
    text: str = Field(min_length=1)
    task_relation: TaskRelation
    """The relation the run binding records once the revision is written."""


def refine_intent_text(old: str, addition: str, max_chars: int = INTENT_TEXT_MAX_CHARS) -> str:
    """Append a refinement, keeping the newest content when over ``max_chars``.

    Oldest refinements are dropped first; the original task head always stays, truncated
    from its end if the newest refinement needs the room.
    """
    head, *refinements = old.split(_REFINEMENT_OPEN)
    blocks = [_REFINEMENT_OPEN + text for text in refinements]
    blocks.append(f"{_REFINEMENT_OPEN}{addition.strip()})")
    while len(blocks) > 1 and len(head) + sum(map(len, blocks)) > max_chars:
        blocks.pop(0)
    newest = blocks[-1]
    if len(head) + len(newest) <= max_chars:
        return head + "".join(blocks)
    head_room = max_chars - len(newest)
    if head_room > len(_ELLIPSIS):
        return truncate_text(head, head_room, ellipsis=_ELLIPSIS) + newest
    # The newest refinement alone exceeds the budget: keep a sliver of the task head
    # and as much of the refinement as fits.
    head_part = truncate_text(head, min(len(head), max_chars // 4), ellipsis=_ELLIPSIS)
    return head_part + truncate_text(newest, max_chars - len(head_part), ellipsis=_ELLIPSIS)


def effective_intent_text(intent_text: str | None, user_input: str, relation: TaskRelation) -> str:
    """The task this run works on: the intent plus the message for continue/refine."""
    if not intent_text or relation in ("replace", "side-chat"):
        return user_input
    if relation == "refine":
        return refine_intent_text(intent_text, user_input)
    line = f"\n({FOLLOW_UP_LABEL}: {user_input.strip()})"
    room = INTENT_TEXT_MAX_CHARS - len(line)
    return truncate_text(intent_text, max(room, 0), ellipsis=_ELLIPSIS) + line


def intent_transition_for_route(
    base: SessionIntent | None, decision: RouteDecision, user_input: str
) -> IntentTransition | None:
    """The revision a routed run writes before the agent starts, or ``None`` for no write.

    replace (or any relation without a base) → new task identity from the input;
    refine → same identity, refined text; continue → a route-switch revision only when
    the protocol changed; side-chat and restored segments never write.
    """
    text = user_input.strip()
    relation = decision.task_relation
    if decision.source == "restored" or not text or relation == "side-chat":
        return None
    if base is None or relation == "replace":
        return IntentTransition(
            kind="initial" if base is None else "replace",
            intent_id=None,
            previous_revision_id=base.revision_id if base else None,
            protocol=decision.protocol,
            text=truncate_text(text, INTENT_TEXT_MAX_CHARS, ellipsis=_ELLIPSIS),
            task_relation="replace",
        )
    if relation == "refine":
        return IntentTransition(
            kind="refine",
            intent_id=base.intent_id,
            previous_revision_id=base.revision_id,
            protocol=decision.protocol,
            text=refine_intent_text(base.text, text),
            task_relation="refine",
        )
    if decision.protocol == base.protocol:
        return None
    return IntentTransition(
        kind="route-switch",
        intent_id=base.intent_id,
        previous_revision_id=base.revision_id,
        protocol=decision.protocol,
        text=base.text,
        task_relation="continue",
    )
