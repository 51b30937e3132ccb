"""Human replies: which pending request a reply answers, and why one is refused.

A reply is a function response ``(id, name, response)``. It answers the pending request
whose call id it carries. Two seed-compatible leniencies, and nothing else:

- a reply **without an id** answers the single open request of its tool name; none or
  several open requests of that name is an error (``NO_MATCHING_REQUEST`` /
  ``AMBIGUOUS_REPLY``), never a guess;
- a reply whose id is known but whose **name is wrong or empty** is renamed to the tool
  the call id belongs to (the id is the binding; the name is only a label).

Pure: no clock, no I/O, no ADK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plangate.errors import CodedError, ErrorCode, error_result
from plangate.plan.record import PlanRecord

__all__ = [
    "KEEP_PLANNING_NOTE",
    "REPLY_FIELDS",
    "REPLY_HINTS",
    "MatchedReply",
    "ReplyError",
    "ReplyErrorCode",
    "match_reply",
    "reply_shape_problem",
]


KEEP_PLANNING_NOTE = "Keep planning"
"""The note a surface sends when the reviewer rejects a plan by choosing to keep planning
without saying what should change (ACP's "Keep planning"): a rejection is always an
explicit decision with a note, never an empty reply."""

ReplyErrorCode = ErrorCode
"""The human-reply codes are members of the one ``ErrorCode`` enum: ``UNKNOWN_REQUEST``,
``ALREADY_ANSWERED``, ``NO_MATCHING_REQUEST``, ``AMBIGUOUS_REPLY``, ``STALE_REPLY``,
``INVALID_REPLY``."""

REPLY_HINTS: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_REQUEST: "read the open requests again and answer one of them",
    ErrorCode.ALREADY_ANSWERED: "nothing to do: the first answer stands",
    ErrorCode.NO_MATCHING_REQUEST: "read the open requests again; none of this kind is open",
    ErrorCode.AMBIGUOUS_REPLY: "send the reply with the call id of the request it answers",
    ErrorCode.STALE_REPLY: "read the pending request again and answer what it shows now",
    ErrorCode.INVALID_REPLY: "use one of the documented reply shapes",
}


class ReplyError(CodedError):
    """A human reply that was refused; nothing was recorded.

    Raised by ``PlanSession.submit`` and, over the wire, by the runner when a reply
    cannot be matched to a request (ADK wraps plugin errors in a ``RuntimeError`` whose
    ``__cause__`` is this error).
    """

    def __init__(self, code: ErrorCode, message: str, *, call_id: str | None = None) -> None:
        super().__init__(code, message, REPLY_HINTS.get(code, ""))
        self.call_id = call_id

    def to_result(self) -> dict[str, Any]:
        """What the model is shown in place of a reply that changed nothing: the seed's
        ``HITL_REPLY_IGNORED``, with the reason's code beside it."""
        return error_result(
            ErrorCode.HITL_REPLY_IGNORED,
            self.message,
            self.hint,
            status="ignored",
            reason_code=self.code.value,
        )


@dataclass(frozen=True)
class MatchedReply:
    call_id: str
    tool_name: str
    response: Any
    renamed: bool = False
    """The reply's id or name was filled in or corrected."""


def match_reply(
    record: PlanRecord | None,
    resolved: dict[str, str | None],
    *,
    call_id: str | None,
    tool_name: str | None,
    response: Any,
) -> MatchedReply | None:
    """The request a reply answers, with its id and tool name made canonical.

    ``resolved`` maps the call ids already decided to their tool names. Returns None for
    a reply with an unknown id (the caller decides whether that is an error), raises
    ``ReplyError`` for a reply without an id that matches no open request or several.
    """
    pending = list(record.pending) if record is not None else []
    if call_id:
        request = next((p for p in pending if p.call_id == call_id), None)
        if request is not None:
            name = request.tool_name
        elif call_id in resolved:
            name = resolved[call_id] or tool_name or ""
        else:
            return None
        return MatchedReply(call_id, name, response, renamed=name != tool_name)
    candidates = [p for p in pending if p.tool_name == tool_name]
    if not candidates:
        raise ReplyError(
            ReplyErrorCode.NO_MATCHING_REQUEST,
            f"the reply to {tool_name or '(no tool name)'} has no call id and no such "
            "request is open",
        )
    if len(candidates) > 1:
        ids = ", ".join(p.call_id for p in candidates)
        raise ReplyError(
            ReplyErrorCode.AMBIGUOUS_REPLY,
            f"the reply to {tool_name} has no call id and {len(candidates)} such requests "
            f"are open ({ids})",
        )
    request = candidates[0]
    return MatchedReply(request.call_id, request.tool_name, response, renamed=True)


_DECIDING = frozenset({"status", "approval_id", "revision", "sha256", "reviewer_note", "message"})
REPLY_FIELDS: dict[str, frozenset[str]] = {
    "enter": _DECIDING,
    "exit": _DECIDING | {"content", "scope", "permission"},
    "amendment": _DECIDING | {"scope"},
    "edit": _DECIDING,
    "tool": _DECIDING,
    "question": frozenset({"status", "question_id", "answer", "approval_id"}),
}
"""The fields a reply to each kind of request may carry. ``message`` is the seed's name
for the note; ``scope`` and ``permission`` are checked where they are applied."""

_TEXT_FIELDS = ("status", "approval_id", "sha256", "reviewer_note", "message", "content", "answer")


def reply_shape_problem(
    kind: str, response: dict[str, Any], shown: dict[str, Any] | None = None
) -> str | None:
    """Why ``response`` is not a reply to a ``kind`` request, naming the field; None when
    its fields are known and of the right type. A reply that is not exactly a documented
    shape decides nothing: an unknown field may be a typo of one that binds it
    (``sha265``), and ``revision: true`` must not read as revision 1.

    ``shown`` is the request's payload: a host that echoes it back with its decision
    (the seed's clients do) may repeat its fields unchanged; that adds nothing.
    """
    allowed = REPLY_FIELDS.get(kind, _DECIDING)
    echoed = shown or {}
    unknown = sorted(
        str(k)
        for k, v in response.items()
        if k not in allowed and not (k in echoed and echoed[k] == v)
    )
    if unknown:
        return f"unknown field {unknown[0]!r} in a reply to a {kind} request; it takes " + (
            ", ".join(sorted(allowed))
        )
    for name in _TEXT_FIELDS:
        value = response.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name!r} must be a string, got {_json_type(value)}"
    revision = response.get("revision")
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
        return f"'revision' must be an integer, got {_json_type(revision)}"
    question_id = response.get("question_id")
    if question_id is not None and not _is_question_id(question_id):
        return f"'question_id' must be an integer, got {_json_type(question_id)}"
    return None


def _is_question_id(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().isdigit()  # the seed sends it as text
    return isinstance(value, int) and not isinstance(value, bool)


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
