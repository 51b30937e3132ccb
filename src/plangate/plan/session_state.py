"""Everything Plan Mode keeps per session and branch, as one compare-and-set document.

Besides the plan record it holds what makes human replies apply exactly once (the
canonical result of every decided call id, and the replies that changed nothing) and
the user's mode selection: the one applied at the last step boundary, and one requested
since (a selection made while a run is in progress waits here for the next boundary).
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from pydantic import BaseModel, Field, ValidationError

from plangate.errors import ErrorCode, error_result
from plangate.plan import transitions
from plangate.plan.record import PlanRecord
from plangate.plan.replies import ReplyErrorCode
from plangate.plan.transitions import ModeSwitch, ReplyIgnored, Transition

__all__ = [
    "CorruptPlanState",
    "IgnoredReply",
    "PlanSessionState",
    "Resolution",
    "SelectionRequest",
    "read_stored",
    "salvage",
]


class Resolution(BaseModel):
    """The canonical result of an applied human reply, shown in place of the raw reply."""

    result: dict[str, Any]
    reply: Any = None
    """The raw reply that was applied, to tell it apart from duplicates in the history.
    None when no reply was given (a request withdrawn by another decision)."""
    tool_name: str | None = None
    """The tool whose call this resolves."""
    decides_call: bool = False
    """The reply decided whether the call itself runs (an amendment or edit review): the
    model sees the call's own result, not this one."""
    args_sha256: str | None = None
    """The arguments of the call the reviewer saw (``call_sha256``); None for a request
    stored before approvals were bound to them."""
    used: bool = False
    """The approved call ran: the approval is spent, a second call with this id asks."""

    def refuses(self, args_sha256: str) -> dict[str, Any] | None:
        """Why an approval of this call does not let a call with arguments
        ``args_sha256`` run now: it was spent, or given for other arguments. None when
        it does (or when this resolution is no approval to spend)."""
        if not self.decides_call or self.result.get("status") != "approved":
            return None
        if self.used:
            why = "the user's approval of this call id was already used by the call it approved"
        elif self.args_sha256 is not None and self.args_sha256 != args_sha256:
            why = "the user approved this call id with other arguments"
        else:
            return None
        return error_result(
            ErrorCode.APPROVAL_USED,
            f"{why}; an approval lets one call run, once, with the arguments shown. "
            "This call did not run",
            "make the call again with a new call id: it will be checked, and asked for, anew",
        )


class IgnoredReply(BaseModel):
    reason: str
    reply: Any = None
    code: str | None = None

    def refusal(self) -> ReplyIgnored:
        """The refusal the model and the surfaces are shown for this reply."""
        try:
            code = ReplyErrorCode(self.code or ReplyErrorCode.INVALID_REPLY)
        except ValueError:  # a state written before the codes existed
            code = ReplyErrorCode.INVALID_REPLY
        return ReplyIgnored(self.reason, code)


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
    untold_switch: ModeSwitch | None = None
    """A mode switch by the user the model has not been told of yet; its next step is."""

    def resolved_names(self) -> dict[str, str | None]:
        return {call_id: r.tool_name for call_id, r in self.resolutions.items()}

    def apply(self, transition: Transition, reply: Any = None) -> None:
        """Take ``transition``'s record and remember the calls it resolved."""
        before = self.record
        names = {p.call_id: p.tool_name for p in before.pending} if before else {}
        hashes = {p.call_id: p.args_sha256 for p in before.pending} if before else {}
        gating: set[str] = (
            {p.call_id for p in before.pending if p.kind in ("amendment", "edit", "tool")}
            if before
            else set()
        )
        self.record = transition.record
        self._note_switch(transition.narrate)
        for call_id, result in transition.resolutions.items():
            answered = reply if reply is not None and call_id == _answered_id(transition) else None
            self.resolutions[call_id] = Resolution(
                result=result,
                reply=answered,
                tool_name=names.get(call_id),
                decides_call=call_id in gating,
                args_sha256=hashes.get(call_id),
            )

    def _note_switch(self, switch: ModeSwitch | None) -> None:
        """Remember a switch to tell the model. Leaving a Plan Mode it was never told it
        had entered leaves it where it was: nothing to tell."""
        if switch == "left" and self.untold_switch == "entered":
            self.untold_switch = None
        elif switch is not None:
            self.untold_switch = switch

    def take_untold_switch(self) -> ModeSwitch | None:
        """The switch to tell the model at this step, forgotten once taken."""
        switch, self.untold_switch = self.untold_switch, None
        return switch

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
        self.ignored[call_id] = IgnoredReply(
            reason=exc.reason, reply=reply, code=exc.reason_code.value
        )

    def reply_result(self, call_id: str) -> dict[str, Any] | None:
        """What a human reply to ``call_id`` came to: the canonical result of an applied
        reply, the refusal of an ignored one, or None while it is not resolved yet."""
        resolution = self.resolutions.get(call_id)
        if resolution is not None:
            return resolution.result
        ignored = self.ignored.get(call_id)
        return ignored.refusal().to_result() if ignored is not None else None


def _answered_id(transition: Transition) -> str | None:
    decision = transition.decision
    return decision.call_id if decision is not None else None


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
    data = cast("dict[str, Any]", data)
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
    contradiction = contradicts_itself(state, plan_selection=plan_selection)
    if contradiction is not None:
        raise CorruptPlanState(contradiction)
    return state


def contradicts_itself(state: PlanSessionState, *, plan_selection: str | None) -> str | None:
    """Why ``state``, valid field by field, is still not one this code writes, or None."""
    # `record: null` is how "no plan yet" is written (an applied Agent selection, an
    # ignored reply, a reset), so it is only corrupt where it contradicts the rest:
    # applying a Plan Mode selection always creates a record, and nothing ever removes
    # one, so a null record under an applied Plan Mode selection was not written here.
    if state.record is None and plan_selection is not None and state.selection == plan_selection:
        return "Plan Mode is applied but there is no plan record"
    return None


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
    data = cast("dict[str, Any]", data)
    state = PlanSessionState(
        selection=selection,
        resolutions=_readable(data.get("resolutions"), Resolution),
        ignored=_readable(data.get("ignored"), IgnoredReply),
    )
    record: Any = data.get("record")
    pending: Any = (
        cast("dict[str, Any]", record).get("pending") if isinstance(record, dict) else None
    )
    requests = cast("list[Any]", pending) if isinstance(pending, list) else []
    for request in requests:
        call_id: Any = (
            cast("dict[str, Any]", request).get("callId") if isinstance(request, dict) else None
        )
        if isinstance(call_id, str) and call_id and call_id not in state.resolutions:
            state.resolutions[call_id] = Resolution(result=dict(_WITHDRAWN))
    return state


def _readable(entries: object, model: type[_Entry]) -> dict[str, _Entry]:
    """The entries of a by-call-id map that still validate."""
    readable: dict[str, _Entry] = {}
    items = cast("dict[object, object]", entries).items() if isinstance(entries, dict) else ()
    for call_id, entry in items:
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
