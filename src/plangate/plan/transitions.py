"""Pure plan transitions: a record (or none) and an input in, a new record and events out.

Nothing here reads a clock, a database or ADK: callers pass ``now`` and ids, persist the
returned record with compare-and-set, and journal the returned events in the same
transaction.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from plangate.errors import CodedError, ErrorCode
from plangate.journal.events import JournalEvent
from plangate.plan.record import (
    ApprovalEvent,
    Decision,
    DecisionKind,
    PendingRequest,
    PlanQuestion,
    PlanRecord,
    PlanStatus,
    Revision,
)
from plangate.plan.replies import (
    KEEP_PLANNING_NOTE,
    REPLY_HINTS,
    ReplyErrorCode,
    reply_shape_problem,
)
from plangate.plan.scope import Scope, ScopeError, parse_permission, parse_scope, plan_sha256

__all__ = [
    "ModeSwitch",
    "PlanError",
    "ReplyIgnored",
    "Transition",
    "answer_question",
    "apply_reply",
    "ask_question",
    "cancel",
    "close",
    "finish",
    "force_enter",
    "number_in_call_order",
    "plan_steps",
    "request_enter",
    "request_exit",
    "update_content",
]

PREVIEW_CHARS = 2000

ModeSwitch = Literal["entered", "left"]
"""How a user's mode switch changed Plan Mode: entered it, or left it."""


class PlanError(CodedError):
    """A request the state machine refuses; returned to the model as a tool error."""

    def __init__(
        self,
        code: Literal[ErrorCode.INVALID_ARGS, ErrorCode.INVALID_STATE, ErrorCode.AMENDMENT_LIMIT],
        message: str,
        hint: str | None = None,
    ) -> None:
        if hint is None:
            hint = _PLAN_HINTS[code]
        super().__init__(code, message, hint)


_PLAN_HINTS = {
    ErrorCode.INVALID_ARGS: "fix the argument and call the tool again",
    ErrorCode.INVALID_STATE: "read the plan status in the error and take the step it allows",
    ErrorCode.AMENDMENT_LIMIT: "stop asking for amendments; tell the user what the scope lacks",
}


class ReplyIgnored(CodedError):
    """A human reply that changes nothing (stale, duplicate, foreign or malformed).

    Its result keeps the seed's ``HITL_REPLY_IGNORED`` code; ``reason_code`` says why.
    """

    def __init__(self, reason: str, code: ReplyErrorCode = ReplyErrorCode.INVALID_REPLY) -> None:
        super().__init__(
            ErrorCode.HITL_REPLY_IGNORED,
            reason,
            REPLY_HINTS[code],
            status="ignored",
            reason_code=code.value,
        )
        self.reason = reason
        self.reason_code = code


@dataclass(frozen=True)
class Transition:
    record: PlanRecord
    result: dict[str, Any]
    """What the model sees as the tool result (or the canonical HITL result)."""
    events: list[JournalEvent]
    archived: PlanRecord | None = None
    """A finished plan that a new planning cycle replaced; kept readable, never lost."""
    decision: ApprovalEvent | None = None
    """The human decision this transition applied, if any (drives ``on_approval``)."""
    resolutions: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    """Canonical results for function-call ids this transition resolved."""
    narrate: ModeSwitch | None = None
    """A switch of mode by the user that no result tells the model of (none of its calls
    was answered by it): the model is told at its next step."""


def _new_id() -> str:
    return uuid.uuid4().hex


def _event(
    record: PlanRecord,
    before: PlanStatus | None,
    *,
    actor: str,
    now: float,
    kind: str = "plan.transition",
    **detail: Any,
) -> JournalEvent:
    return JournalEvent(
        kind=kind,
        subject=record.id,
        from_state=before.value if before else None,
        to_state=record.status.value,
        actor=actor,
        at=now,
        revision=record.content_revisions,
        sha256=record.sha256,
        detail={k: v for k, v in detail.items() if v is not None},
    )


def _require_text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PlanError(ErrorCode.INVALID_ARGS, f"'{name}' must be a non-empty string")
    return value


def _new_record(
    *,
    status: PlanStatus,
    objective: str,
    branch: str,
    entry: Literal["model", "selection"],
    now: float,
    plan_id: str | None,
) -> PlanRecord:
    return PlanRecord(
        id=plan_id or _new_id(),
        status=status,
        objective=objective.strip()[:500] or "Current task",
        branch=branch,
        entry=entry,
        started_at=now,
        updated_at=now,
    )


def request_enter(
    current: PlanRecord | None,
    *,
    objective: str,
    call_id: str,
    now: float,
    branch: str = "",
    plan_id: str | None = None,
    approval_id: str | None = None,
) -> Transition:
    """The model asks to enter Plan Mode; the run pauses for the user's confirmation."""
    objective = _require_text(objective, "objective")
    if current is not None and current.is_gate_active():
        if current.status is PlanStatus.PENDING_ENTER:
            raise PlanError(
                ErrorCode.INVALID_STATE, "an entry request is already waiting for the user"
            )
        raise PlanError(
            ErrorCode.INVALID_STATE,
            f"already in Plan Mode (status={current.status.value}); keep planning and "
            "submit the plan with exit_plan_mode",
        )
    record = _new_record(
        status=PlanStatus.PENDING_ENTER,
        objective=objective,
        branch=branch,
        entry="model",
        now=now,
        plan_id=plan_id,
    )
    approval_id = approval_id or _new_id()
    payload = {
        "status": "pending_enter",
        "message": "Waiting for the user to confirm entering Plan Mode.",
        "objective": record.objective,
        "plan_id": record.id,
        "approval_id": approval_id,
        "timestamp": now,
    }
    record.pending = [
        PendingRequest(
            kind="enter",
            call_id=call_id,
            approval_id=approval_id,
            tool_name="enter_plan_mode",
            payload=payload,
            created_at=now,
        )
    ]
    if current is not None and current.is_being_implemented():
        # Only the user ends a grant: if they decline, the approved plan comes back.
        record.held = current.model_copy(deep=True)
    before = current.status if current else None
    return Transition(
        record=record,
        result=payload,
        events=[_event(record, before, actor="model", now=now, replaces=current and current.id)],
        archived=current,
    )


def force_enter(
    current: PlanRecord | None,
    *,
    objective: str,
    now: float,
    actor: str = "user",
    branch: str = "",
    plan_id: str | None = None,
) -> Transition | None:
    """The user selected Plan Mode: start exploring without the entry confirmation.

    A pending entry request is resolved by the selection (it was the same question).
    Returns None when a plan is already being made.
    """
    if current is not None and current.is_gate_active():
        if current.status is not PlanStatus.PENDING_ENTER:
            return None
        record = current.model_copy(deep=True)
        record.status = PlanStatus.EXPLORING
        record.entry = "selection"
        record.updated_at = now
        answered, record.pending = record.pending, []
        for pending in answered:
            record.approvals.append(
                _decision(
                    record,
                    pending,
                    "approved",
                    actor=actor,
                    now=now,
                    note="entered by selecting Plan Mode",
                )
            )
        plan = record.dump()
        resolutions = {
            pending.call_id: {
                "status": "approved",
                "message": "The user selected Plan Mode. Explore with read-only tools, "
                "then draft the plan with update_plan_content.",
                "plan": plan,
            }
            for pending in answered
        }
        return Transition(
            record=record,
            result={"status": "exploring", "plan": record.dump()},
            events=[_event(record, current.status, actor=actor, now=now, via="selection")],
            resolutions=resolutions,
        )
    record = _new_record(
        status=PlanStatus.EXPLORING,
        objective=objective,
        branch=branch,
        entry="selection",
        now=now,
        plan_id=plan_id,
    )
    before = current.status if current else None
    events = [
        _event(
            record, before, actor=actor, now=now, via="selection", replaces=current and current.id
        )
    ]
    archived = current
    if current is not None and current.is_being_implemented():
        # Selecting Plan Mode is the user's own step: it closes the plan whose grant held.
        archived = _closed(current, now=now, actor=actor)
        events.insert(0, _closed_event(archived, actor=actor, now=now, reason="new plan"))
    return Transition(
        record=record,
        result={"status": "exploring", "plan": record.dump()},
        events=events,
        archived=archived,
        narrate="entered",
    )


def update_content(
    record: PlanRecord | None,
    *,
    content: Any,
    mode: Any = "append",
    now: float,
    scope: Any = None,
) -> Transition:
    """Append to or replace the plan body and/or set its scope; the revision moves only
    on a real change. ``scope`` (validated here) replaces the plan's scope when given."""
    if mode not in ("append", "replace"):
        raise PlanError(ErrorCode.INVALID_ARGS, f"mode must be 'append' or 'replace', got {mode!r}")
    try:
        new_scope = parse_scope(scope)
    except ScopeError as exc:
        raise PlanError(ErrorCode.INVALID_ARGS, str(exc)) from None
    if new_scope is None or content not in (None, ""):
        content = _require_text(content, "content")
    _require_status(record, {PlanStatus.EXPLORING, PlanStatus.DRAFTING}, "update the plan")
    assert record is not None
    if not content:
        new_content = record.content
    elif mode == "replace" or not record.content:
        new_content = content
    else:
        separator = "" if record.content.endswith("\n") else "\n"
        new_content = record.content + separator + content
    updated = record.model_copy(deep=True)
    updated.status = PlanStatus.DRAFTING
    updated.updated_at = now
    if new_scope is not None:
        updated.scope = new_scope
    changed = new_content != record.content or updated.scope != record.scope
    if changed:
        updated.content = new_content
        _add_revision(updated, author="model", now=now)
    kind = "plan.transition" if record.status != updated.status else "plan.revised"
    detail_scope = (
        updated.scope.canonical() if updated.scope != record.scope and updated.scope else None
    )
    events = [
        _event(
            updated, record.status, actor="model", now=now, kind=kind, mode=mode, scope=detail_scope
        )
    ]
    if not changed and kind == "plan.revised":
        events = []
    message = f"Plan content updated ({mode})." if changed else "Plan content unchanged."
    if new_scope is not None:
        message += " Scope: " + new_scope.summary()
    return Transition(
        record=updated, result={"message": message, "plan": updated.dump()}, events=events
    )


def _add_revision(record: PlanRecord, *, author: Literal["model", "reviewer"], now: float) -> None:
    record.revisions.append(
        Revision(
            number=len(record.revisions) + 1,
            content=record.content,
            sha256=plan_sha256(record.content, record.scope),
            author=author,
            created_at=now,
            scope=record.scope,
        )
    )


def request_exit(
    record: PlanRecord | None,
    *,
    summary: str | None,
    call_id: str,
    now: float,
    approval_id: str | None = None,
) -> Transition:
    """Submit the plan for approval; the run pauses until the reviewer decides."""
    _require_status(record, {PlanStatus.EXPLORING, PlanStatus.DRAFTING}, "submit the plan")
    assert record is not None
    if not record.content.strip():
        raise PlanError(
            ErrorCode.INVALID_STATE, "the plan is empty; write it with update_plan_content first"
        )
    if summary is not None and not isinstance(summary, str):  # pyright: ignore[reportUnnecessaryIsInstance] -- models send any JSON
        raise PlanError(ErrorCode.INVALID_ARGS, "'summary' must be a string")
    updated = record.model_copy(deep=True)
    updated.status = PlanStatus.PENDING_APPROVAL
    updated.updated_at = now
    approval_id = approval_id or _new_id()
    payload = {
        "status": "pending_approval",
        "message": (summary or "").strip() or "Plan submitted for approval.",
        "plan_id": updated.id,
        "objective": updated.objective,
        "content": updated.content,
        "preview": updated.content[:PREVIEW_CHARS],
        "approval_id": approval_id,
        "revision": updated.content_revisions,
        "sha256": updated.sha256,
        "scope": updated.scope.model_dump(mode="json") if updated.scope else None,
        "scope_summary": _scope_line(updated.scope),
        "permission_options": ["auto", "ask_each_edit"],
        "timestamp": now,
    }
    # Questions asked in the same step stay open: each is answered on its own.
    updated.pending = [
        *(p for p in updated.pending if p.kind == "question"),
        PendingRequest(
            kind="exit",
            call_id=call_id,
            approval_id=approval_id,
            tool_name="exit_plan_mode",
            payload=payload,
            revision=updated.content_revisions,
            sha256=updated.sha256,
            created_at=now,
        ),
    ]
    return Transition(
        record=updated,
        result=payload,
        events=[_event(updated, record.status, actor="model", now=now, approval_id=approval_id)],
    )


def ask_question(
    record: PlanRecord | None,
    *,
    question: Any,
    options: Any = None,
    call_id: str,
    now: float,
    approval_id: str | None = None,
) -> Transition:
    """Ask the user a clarifying question while planning; the run pauses for the answer."""
    question = _require_text(question, "question")
    if options is not None and (
        not isinstance(options, list)
        or not all(isinstance(o, str) and o.strip() for o in cast("list[object]", options))
    ):
        raise PlanError(ErrorCode.INVALID_ARGS, "'options' must be a list of non-empty strings")
    options = cast("list[str] | None", options)
    _require_status(
        record,
        {PlanStatus.EXPLORING, PlanStatus.DRAFTING, PlanStatus.PENDING_APPROVAL},
        "ask the user a question",
    )
    assert record is not None
    updated = record.model_copy(deep=True)
    updated.updated_at = now
    question_id = len(updated.asked_questions) + 1
    approval_id = approval_id or _new_id()
    updated.asked_questions.append(
        PlanQuestion(
            id=question_id, question=question, options=options, call_id=call_id, asked_at=now
        )
    )
    payload = {
        "status": "pending_question",
        "message": question,
        "question_id": question_id,
        "options": options,
        "approval_id": approval_id,
        "timestamp": now,
    }
    updated.pending.append(
        PendingRequest(
            kind="question",
            call_id=call_id,
            approval_id=approval_id,
            tool_name="ask_user_question",
            payload=payload,
            question_id=question_id,
            created_at=now,
        )
    )
    event = _event(
        updated,
        record.status,
        actor="model",
        now=now,
        kind="plan.question",
        id=question_id,
        call_id=call_id,
    )
    return Transition(record=updated, result=payload, events=[event])


def number_in_call_order(record: PlanRecord, invocation_id: str | None, call_at: float) -> None:
    """Number the open questions of one model step in the order the model asked them.

    Parallel calls of a step commit in any order; ids are reassigned (in place, before
    the step pauses and anyone answers) so question 1 is the first one asked.
    """
    step = [
        p
        for p in record.pending
        if p.kind == "question" and p.invocation_id == invocation_id and p.call_at == call_at
    ]
    ids = sorted(p.question_id for p in step if p.question_id is not None)
    if len(ids) < 2:
        return
    by_call = {p.call_id: p for p in step}
    questions = {q.call_id: q for q in record.asked_questions if q.call_id in by_call}
    for question_id, request in zip(ids, sorted(step, key=lambda p: p.call_index), strict=True):
        request.question_id = question_id
        request.payload = {**request.payload, "question_id": question_id}
        if request.call_id in questions:
            questions[request.call_id].id = question_id
    record.asked_questions.sort(key=lambda q: q.id)


def cancel(
    record: PlanRecord | None, *, now: float, actor: str = "user", reason: str = "user exit"
) -> Transition | None:
    """The user leaves Plan Mode: the plan is cancelled and the gate lifts.

    Pending requests are withdrawn. Returns None when nothing was active.
    """
    if record is None or not record.is_gate_active():
        return None
    updated = record.model_copy(deep=True)
    updated.status = PlanStatus.CANCELLED
    updated.updated_at = now
    withdrawn = {
        "status": "cancelled",
        "message": "The user left Plan Mode; this request was withdrawn. Do not act on the "
        "plan unless the user asks again.",
    }
    resolutions = {p.call_id: dict(withdrawn) for p in updated.pending}
    for pending in updated.pending:
        updated.approvals.append(
            _decision(
                updated, pending, "cancelled", actor=actor, now=now, note=reason, kind="exit_mode"
            )
        )
    updated.pending = []
    return Transition(
        record=updated,
        result={"status": "cancelled", "message": "Plan Mode left; the plan was cancelled."},
        events=[_event(updated, record.status, actor=actor, now=now, reason=reason)],
        resolutions=resolutions,
        # A withdrawn request's result already says the user left.
        narrate=None if resolutions else "left",
    )


def apply_reply(
    record: PlanRecord | None,
    *,
    call_id: str,
    tool_name: str | None,
    response: Any,
    now: float,
    actor: str = "user",
) -> Transition:
    """Apply a human reply to the pending request it answers, exactly once.

    Raises ReplyIgnored for a reply that answers nothing pending (stale, duplicate or
    foreign), echoes our own payload, or is malformed; nothing changes then.
    """
    pending = record.pending_for(call_id) if record is not None else None
    if record is None or pending is None:
        raise ReplyIgnored(
            f"no pending request has call id {call_id!r}; the reply is stale, a duplicate, "
            "or answers another request",
            ReplyErrorCode.UNKNOWN_REQUEST,
        )
    if tool_name and tool_name != pending.tool_name:
        raise ReplyIgnored(f"call id {call_id!r} belongs to {pending.tool_name}, not {tool_name}")
    if not isinstance(response, dict):
        raise ReplyIgnored("the reply must be a JSON object")
    response = cast("dict[str, Any]", response)
    status = response.get("status")
    if isinstance(status, str) and status.startswith("pending_"):
        raise ReplyIgnored("the reply echoes the pending request instead of deciding it")
    problem = reply_shape_problem(pending.kind, response, pending.payload)
    if problem is not None:
        raise ReplyIgnored(problem, ReplyErrorCode.INVALID_REPLY)
    if pending.kind == "question":
        return _answer(record, pending, response, now=now, actor=actor)
    if status not in ("approved", "rejected"):
        raise ReplyIgnored(f"status must be 'approved' or 'rejected', got {status!r}")
    _check_binding(pending, response)
    if pending.kind == "exit" and status == "rejected" and _note(pending, response) is None:
        # A plan is rejected only by a reviewer who said so in words: an empty rejection
        # (or the request's own payload echoed back) decides nothing.
        raise ReplyIgnored(
            "a rejection of the plan needs a note ('reviewer_note') saying what should "
            f"change, or {KEEP_PLANNING_NOTE!r}; nothing was decided",
            ReplyErrorCode.INVALID_REPLY,
        )
    if pending.kind == "enter":
        return _resolve_enter(record, pending, response, now=now, actor=actor)
    if pending.kind in ("amendment", "edit", "tool"):
        from plangate.plan.amendments import resolve_amendment

        return resolve_amendment(record, pending, response, now=now, actor=actor)
    return _resolve_exit(record, pending, response, now=now, actor=actor)


def answer_question(
    record: PlanRecord | None, *, call_id: str, response: Any, now: float, actor: str = "user"
) -> Transition:
    return apply_reply(
        record,
        call_id=call_id,
        tool_name="ask_user_question",
        response=response,
        now=now,
        actor=actor,
    )


def finish(
    record: PlanRecord | None, *, now: float, reason: str, actor: str = "agent"
) -> Transition | None:
    """The agent completed the approved plan's todos: the approved-plan note stops and
    Plan Mode is offered again. The grant stays: only a human closes the plan
    (:func:`close`), so an agent cannot end its own limits by ticking its todos.

    Returns None unless ``record`` is being implemented and not finished yet.
    """
    if record is None or not record.is_unfinished():
        return None
    updated = record.model_copy(deep=True)
    updated.finished_at = now
    updated.updated_at = now
    return Transition(
        record=updated,
        result={
            "status": "finished",
            "message": f"The approved plan's work is done ({reason}); its grant holds "
            "until the user closes the plan.",
        },
        events=[
            _event(
                updated,
                record.status,
                actor=actor,
                now=now,
                kind="plan.todos_done",
                reason=reason,
                grant="kept",
            )
        ],
    )


def close(
    record: PlanRecord | None, *, now: float, actor: str = "user", reason: str = "accepted"
) -> Transition | None:
    """A human closes the approved plan: its grant (scope, permission, the sandbox's
    scoped binds) ends, and requests still open under it are withdrawn.

    Returns None when no approved plan holds a grant.
    """
    if record is None or not record.is_being_implemented():
        return None
    updated = _closed(record, now=now, actor=actor)
    withdrawn = _withdraw_open(updated, actor=actor, now=now, why="The user closed the plan")
    return Transition(
        record=updated,
        result={
            "status": "closed",
            "message": "The user closed the approved plan; its scope and permission no "
            "longer apply.",
        },
        events=[_closed_event(updated, actor=actor, now=now, reason=reason, withdrawn=withdrawn)],
        resolutions=withdrawn,
    )


def _closed(record: PlanRecord, *, now: float, actor: str) -> PlanRecord:
    updated = record.model_copy(deep=True)
    updated.closed_at = now
    updated.closed_by = actor
    updated.updated_at = now
    return updated


def _closed_event(
    record: PlanRecord,
    *,
    actor: str,
    now: float,
    reason: str,
    withdrawn: dict[str, dict[str, Any]] | None = None,
) -> JournalEvent:
    return _event(
        record,
        record.status,
        actor=actor,
        now=now,
        kind="plan.closed",
        reason=reason,
        withdrawn=sorted(withdrawn) if withdrawn else None,
    )


def plan_steps(content: str, limit: int = 20) -> list[str]:
    """Implementation steps named by a plan: numbered or bulleted items, else ## headings."""
    items = [m.group(1).strip() for m in _STEP_LINE.finditer(content)]
    if not items:
        items = [m.group(1).strip() for m in _HEADING_LINE.finditer(content)]
        items = [i for i in items if i.lower() not in _NON_STEP_HEADINGS]
    return [i for i in items if i][:limit]


_STEP_LINE = re.compile(r"^\s{0,3}(?:\d+[.)]|[-*+])\s+(?:\[[ xX]\]\s+)?(.+)$", re.MULTILINE)
_HEADING_LINE = re.compile(r"^##+\s+(.+)$", re.MULTILINE)
_NON_STEP_HEADINGS = {"context", "verification", "summary", "risks", "files"}


# -- internals ---------------------------------------------------------------------------


def _require_status(record: PlanRecord | None, allowed: set[PlanStatus], action: str) -> None:
    if record is not None and record.status in allowed:
        return
    if record is None or not record.is_gate_active():
        raise PlanError(
            ErrorCode.INVALID_STATE, f"cannot {action}: no active plan; call enter_plan_mode"
        )
    if record.status is PlanStatus.PENDING_APPROVAL:
        raise PlanError(
            ErrorCode.INVALID_STATE,
            f"cannot {action}: the plan is locked while it waits for approval; "
            "end your turn and wait for the reviewer",
        )
    if record.status is PlanStatus.PENDING_ENTER:
        raise PlanError(
            ErrorCode.INVALID_STATE, f"cannot {action}: the user has not confirmed Plan Mode yet"
        )
    raise PlanError(ErrorCode.INVALID_STATE, f"cannot {action} in status {record.status.value}")


def _check_binding(pending: PendingRequest, response: dict[str, Any]) -> None:
    """An approval applies only to what the reviewer saw: same request, revision, hash."""
    given_id = response.get("approval_id")
    if given_id is not None and given_id != pending.approval_id:
        raise ReplyIgnored(
            f"approval_id {given_id!r} does not match the pending request {pending.approval_id!r}",
            ReplyErrorCode.STALE_REPLY,
        )
    given_rev = response.get("revision")
    if given_rev is not None and pending.revision is not None and given_rev != pending.revision:
        raise ReplyIgnored(
            f"the reply reviewed revision {given_rev}, but revision {pending.revision} is pending",
            ReplyErrorCode.STALE_REPLY,
        )
    given_hash = response.get("sha256")
    if given_hash is not None and pending.sha256 is not None and given_hash != pending.sha256:
        raise ReplyIgnored(
            "the reply reviewed different plan content (sha256 mismatch)",
            ReplyErrorCode.STALE_REPLY,
        )


def _note(pending: PendingRequest, response: dict[str, Any]) -> str | None:
    note = response.get("reviewer_note")
    if note is None:
        note = response.get("message")
        # A host that echoes the pending payload back must not turn the model's own
        # summary into the reviewer's note.
        if note == pending.payload.get("message"):
            note = None
    if note is not None and not isinstance(note, str):
        raise ReplyIgnored("'reviewer_note' must be a string")
    return note.strip() if note and note.strip() else None


def _edited_content(pending: PendingRequest, response: dict[str, Any]) -> str | None:
    content = response.get("content")
    if content is None:
        return None
    if not isinstance(content, str):
        raise ReplyIgnored("'content' must be a string")
    return content if content.strip() else None


def _edited_scope(response: dict[str, Any]) -> Scope | None:
    try:
        return parse_scope(response.get("scope"))
    except ScopeError as exc:
        raise ReplyIgnored(str(exc)) from None


def _permission(response: dict[str, Any]) -> Any:
    value = response.get("permission", "auto")
    try:
        return parse_permission(value)
    except ScopeError as exc:
        raise ReplyIgnored(str(exc)) from None


def _scope_line(scope: Scope | None) -> str:
    if scope is None:
        return "No scope: once approved, the plan may write anywhere in the workspace."
    return scope.summary()


def _decision(
    record: PlanRecord,
    pending: PendingRequest,
    decision: Decision,
    *,
    actor: str,
    now: float,
    note: str | None,
    kind: DecisionKind | None = None,
) -> ApprovalEvent:
    return ApprovalEvent(
        approval_id=pending.approval_id,
        kind=kind or pending.kind,
        decision=decision,
        actor=actor,
        decided_at=now,
        call_id=pending.call_id,
        revision=record.content_revisions,
        sha256=record.sha256,
        note=note,
        scope=record.scope,
        plan_id=record.id,
    )


def _consume(record: PlanRecord, pending: PendingRequest, now: float) -> PlanRecord:
    """A copy of the record with ``pending`` answered (removed from the open requests)."""
    updated = record.model_copy(deep=True)
    updated.pending = [p for p in updated.pending if p.call_id != pending.call_id]
    updated.updated_at = now
    return updated


def _resolve_enter(
    record: PlanRecord,
    pending: PendingRequest,
    response: dict[str, Any],
    *,
    now: float,
    actor: str,
) -> Transition:
    note = _note(pending, response)
    updated = _consume(record, pending, now)
    if response["status"] == "approved":
        updated.status = PlanStatus.EXPLORING
        message = (
            "User confirmed Plan Mode. Explore with read-only tools, then draft the plan "
            "with update_plan_content and submit it with exit_plan_mode."
        )
    else:
        updated.status = PlanStatus.CANCELLED
        message = (
            note or "The user declined Plan Mode. Continue without a plan, or ask how to proceed."
        )
    updated.reviewer_note = note
    result = {"status": response["status"], "message": message}
    withdrawn = {}
    if updated.status is PlanStatus.CANCELLED:
        withdrawn = _withdraw_open(updated, actor=actor, now=now, why="The user declined Plan Mode")
    held, updated.held = updated.held, None
    if held is not None and updated.status is PlanStatus.CANCELLED:
        result["message"] += " The approved plan stays in force, with its scope."
    decided = _decided(
        record,
        updated,
        pending,
        result,
        decision=response["status"],
        actor=actor,
        now=now,
        note=note,
        withdrawn=withdrawn,
        approval_id=pending.approval_id,
    )
    if held is None:
        return decided
    if updated.status is PlanStatus.EXPLORING:
        # The user confirmed the new plan: that closes the old one, as the user.
        closed = _closed(held, now=now, actor=actor)
        event = _closed_event(closed, actor=actor, now=now, reason="new plan")
        return replace(decided, events=[event, *decided.events], archived=closed)
    # Declined: the approved plan is the current one again; the declined entry is history.
    restored = held.model_copy(update={"updated_at": now})
    event = _event(restored, PlanStatus.CANCELLED, actor=actor, now=now, kind="plan.restored")
    result["plan"] = restored.dump()
    return replace(decided, record=restored, events=[*decided.events, event], archived=updated)


def _resolve_exit(
    record: PlanRecord,
    pending: PendingRequest,
    response: dict[str, Any],
    *,
    now: float,
    actor: str,
) -> Transition:
    note = _note(pending, response)
    edited = _edited_content(pending, response)
    edited_scope = _edited_scope(response)
    permission = _permission(response)
    updated = _consume(record, pending, now)
    if response["status"] == "approved":
        content_changed = edited is not None and edited != updated.content
        scope_changed = edited_scope is not None and edited_scope != updated.scope
        if edited is not None and content_changed:
            updated.content = edited
        if scope_changed:
            updated.scope = edited_scope
        if content_changed or scope_changed:
            _add_revision(updated, author="reviewer", now=now)
        updated.permission = permission
        updated.status = PlanStatus.APPROVED
        updated.reviewer_note = note
        updated.suggested_content = None
        edited = updated.sha256 != record.sha256
        edited_note = " with the reviewer's edits" if edited else ""
        message = (
            f"The user approved the plan (revision {updated.content_revisions}){edited_note}. "
            "Write tools are unlocked: implement the approved plan now."
        )
        if updated.scope is not None:
            message += f" {updated.scope.summary()} Anything else pauses for the user's amendment."
        if updated.permission == "ask_each_edit":
            message += " The user reviews each file write before it is made."
        if note:
            message += f" Reviewer note: {note}"
        steps = plan_steps(updated.content)
        result: dict[str, Any] = {"status": "approved", "message": message, "edited": edited}
        if steps:
            result["message"] += " Track the steps with todo_write."
            result["suggested_todos"] = [{"content": s, "status": "pending"} for s in steps]
        withdrawn = _withdraw_open(updated, actor=actor, now=now, why="The user approved the plan")
    else:
        withdrawn = {}
        updated.status = PlanStatus.DRAFTING
        updated.reviewer_note = note
        updated.suggested_content = edited if edited != updated.content else None
        message = "The user rejected the plan and asked for changes."
        if note:
            message += f" Reviewer note: {note}"
        if updated.suggested_content:
            message += " The reviewer sent an edited draft (suggested_content); consider it."
        message += " Revise with update_plan_content, then submit again with exit_plan_mode."
        result = {"status": "rejected", "message": message, "reviewer_note": note}
        if updated.suggested_content:
            result["suggested_content"] = updated.suggested_content
    return _decided(
        record,
        updated,
        pending,
        result,
        decision=response["status"],
        actor=actor,
        now=now,
        note=note,
        withdrawn=withdrawn,
        approval_id=pending.approval_id,
        edited=updated.sha256 != record.sha256 or None,
        scope=updated.scope.canonical() if updated.scope else None,
        permission=updated.permission if response["status"] == "approved" else None,
    )


def _answer(
    record: PlanRecord,
    pending: PendingRequest,
    response: dict[str, Any],
    *,
    now: float,
    actor: str,
) -> Transition:
    status = response.get("status", "answered")
    if status != "answered":
        raise ReplyIgnored(f"status must be 'answered' for a question, got {status!r}")
    question_id = response.get("question_id", pending.question_id)
    if isinstance(question_id, str) and question_id.strip().isdigit():
        question_id = int(question_id)
    if question_id != pending.question_id:
        raise ReplyIgnored(
            f"question_id {response.get('question_id')!r} does not match the pending "
            f"question {pending.question_id}",
            ReplyErrorCode.STALE_REPLY,
        )
    answer = response.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ReplyIgnored("'answer' must be a non-empty string")
    updated = _consume(record, pending, now)
    for question in updated.asked_questions:
        if question.id == pending.question_id:
            question.answer = answer.strip()
            question.answered_at = now
    result = {
        "status": "answered",
        "question_id": pending.question_id,
        "answer": answer.strip(),
        "message": f"The user answered: {answer.strip()}",
    }
    return _decided(
        record,
        updated,
        pending,
        result,
        decision="answered",
        actor=actor,
        now=now,
        note=answer.strip(),
        with_plan=False,
        kind="plan.answered",
        id=pending.question_id,
    )


def _decided(
    record: PlanRecord,
    updated: PlanRecord,
    pending: PendingRequest,
    result: dict[str, Any],
    *,
    decision: Decision,
    actor: str,
    now: float,
    note: str | None,
    with_plan: bool = True,
    kind: str = "plan.transition",
    withdrawn: dict[str, dict[str, Any]] | None = None,
    **detail: Any,
) -> Transition:
    """Record a human decision on ``updated`` and package it as a transition whose result
    is also the canonical answer to the request's call id (and to the requests the
    decision withdrew)."""
    approval = _decision(updated, pending, decision, actor=actor, now=now, note=note)
    updated.approvals.append(approval)
    if with_plan:
        result["plan"] = updated.dump()
    event = _event(
        updated,
        record.status,
        actor=actor,
        now=now,
        kind=kind,
        note=note,
        withdrawn=sorted(withdrawn) if withdrawn else None,
        **detail,
    )
    return Transition(
        record=updated,
        result=result,
        events=[event],
        # on_approval sees the plan exactly as it was decided.
        decision=approval.model_copy(update={"plan": updated.model_copy(deep=True)}),
        resolutions={pending.call_id: result, **(withdrawn or {})},
    )


def _withdraw_open(
    updated: PlanRecord, *, actor: str, now: float, why: str
) -> dict[str, dict[str, Any]]:
    """Withdraw every request still open on ``updated``; their canonical results."""
    results: dict[str, dict[str, Any]] = {}
    for other in updated.pending:
        results[other.call_id] = {
            "status": "withdrawn",
            "message": f"{why} before this {_request_noun(other)} was answered, so it was "
            "withdrawn. Do not wait for an answer; ask again only if it still matters.",
        }
        updated.approvals.append(
            _decision(updated, other, "withdrawn", actor=actor, now=now, note=why)
        )
    updated.pending = []
    return results


def _request_noun(request: PendingRequest) -> str:
    return {
        "question": "question",
        "enter": "entry request",
        "exit": "approval request",
        "amendment": "amendment request",
        "edit": "edit review",
        "tool": "tool call review",
    }[request.kind]


# Shared with plangate.plan.amendments, which resolves its requests the same way.
add_revision = _add_revision
consume = _consume
decided = _decided
edited_scope = _edited_scope
journal_event = _event
reviewer_note = _note
