"""Everything Plan Mode keeps per session and branch, as one compare-and-set document."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from plangate.plan.record import PlanRecord

__all__ = [
    "CorruptPlanState",
    "IgnoredReply",
    "PlanSessionState",
    "Resolution",
    "read_stored",
    "salvage",
]


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


class CorruptPlanState(ValueError):
    """A stored plan state this code did not write; the gate treats it as unreadable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_Entry = TypeVar("_Entry", Resolution, IgnoredReply)
_FIELDS = frozenset(PlanSessionState.model_fields)


def read_stored(data: object, *, plan_selection: str | None = None) -> PlanSessionState:
    """Parse a stored plan-state document, refusing anything this code never writes.

    Every write dumps every field, so a document without ``record`` (``{}`` included) is
    not "no plan" but a document someone else wrote. The other fields have defaults and
    may be absent, so a field added later does not turn every older row corrupt. An
    unknown key is refused: the next write would silently drop it.
    ``plan_selection`` is the selection value that means Plan Mode.
    """
    if not isinstance(data, dict):
        raise CorruptPlanState(f"the document is {_json_type(data)}, not an object")
    if "record" not in data:
        raise CorruptPlanState("the document has no 'record'")
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        raise CorruptPlanState(f"unknown key {', '.join(map(repr, unknown))}")
    try:
        state = PlanSessionState.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CorruptPlanState(f"invalid {where}: {first['msg']}") from None
    # `record: null` is how "no plan yet" is written (an applied Agent selection, an
    # ignored reply, a reset), so it is only corrupt where it contradicts the rest:
    # applying a Plan Mode selection always creates a record, and nothing ever removes
    # one, so a null record under an applied Plan Mode selection was not written here.
    if state.record is None and plan_selection is not None and state.selection == plan_selection:
        raise CorruptPlanState("Plan Mode is applied but there is no plan record")
    return state


_WITHDRAWN = {
    "status": "cancelled",
    "message": "The plan state was corrupt and the user reset it; this request was "
    "withdrawn. Do not act on the plan unless the user asks again.",
}


def salvage(data: object, *, selection: str | None) -> PlanSessionState:
    """The clean "no plan" state that replaces a corrupt document.

    It keeps what of the document is still readable so the conversation's history reads
    the same: the canonical results of replies already applied, and the ignored ones. A
    request the corrupt plan was waiting on gets a withdrawn result, because models
    reject a function call with no response.
    """
    if not isinstance(data, dict):
        return PlanSessionState(selection=selection)
    state = PlanSessionState(
        selection=selection,
        resolutions=_readable(data.get("resolutions"), Resolution),
        ignored=_readable(data.get("ignored"), IgnoredReply),
    )
    record = data.get("record")
    pending = record.get("pending") if isinstance(record, dict) else None
    for request in pending if isinstance(pending, list) else ():
        call_id = request.get("callId") if isinstance(request, dict) else None
        if isinstance(call_id, str) and call_id and call_id not in state.resolutions:
            state.resolutions[call_id] = Resolution(result=dict(_WITHDRAWN))
    return state


def _readable(entries: object, model: type[_Entry]) -> dict[str, _Entry]:
    """The entries of a by-call-id map that still validate."""
    readable: dict[str, _Entry] = {}
    for call_id, entry in entries.items() if isinstance(entries, dict) else ():
        try:
            readable[str(call_id)] = model.model_validate(entry)
        except ValidationError:
            continue
    return readable


def _json_type(data: object) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "a boolean"
    if isinstance(data, int | float):
        return "a number"
    if isinstance(data, str):
        return "a string"
    if isinstance(data, list):
        return "an array"
    return type(data).__name__
