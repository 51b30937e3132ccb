"""Amendments: an approved plan's call that needs more than the scope waits for a human.

Two request kinds, both bound to the paused call's id and to the plan revision and hash
in force when it paused:

- ``amendment`` -- the call writes a path, runs a command or uses the network the scope
  does not name. Approving records a new revision whose scope adds exactly that -- a
  command as the whole command shown, never a prefix (or the scope the reviewer sent
  back, where they may write a prefix) -- and the call runs; refusing leaves everything
  as it was and tells the model why. A model step may ask for at most
  ``MAX_AMENDMENTS_PER_STEP`` amendments and a plan for ``MAX_AMENDMENTS_PER_PLAN``:
  past that the call is refused (``AMENDMENT_LIMIT``) instead of asking again.
- ``edit`` -- under the ``ask_each_edit`` permission every file write waits, with its
  diff. Approving lets that one write run; the scope does not change.
- ``tool`` -- a call the policy file says to ask for; approving lets that one call run.

Every request is bound to the paused call's arguments (:func:`call_sha256`): the
approval lets that call run once, with those arguments, and nothing else.

Pure, like :mod:`plangate.plan.transitions`.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from plangate.errors import ErrorCode, error_result
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.scope import Scope
from plangate.plan.transitions import (
    PlanError,
    ReplyIgnored,
    Transition,
    add_revision,
    consume,
    decided,
    edited_scope,
    journal_event,
    reviewer_note,
)

__all__ = [
    "AMENDMENT_REFUSED",
    "EDIT_REFUSED",
    "MAX_AMENDMENTS_PER_PLAN",
    "MAX_AMENDMENTS_PER_STEP",
    "TOOL_REFUSED",
    "WAITING_STATUSES",
    "call_sha256",
    "request_amendment",
    "resolve_amendment",
]

AMENDMENT_REFUSED = ErrorCode.SCOPE_AMENDMENT_REFUSED
EDIT_REFUSED = ErrorCode.EDIT_REFUSED
TOOL_REFUSED = ErrorCode.TOOL_CALL_REFUSED
MAX_DIFF_CHARS = 20_000
WAITING_STATUSES = frozenset({"pending_amendment", "pending_edit", "pending_tool"})
"""The status of a paused call's result while its request waits for the human."""
MAX_AMENDMENTS_PER_STEP = 4
"""Amendment requests one model step may open: a plan that needs more was not planned."""
MAX_AMENDMENTS_PER_PLAN = 20
"""Amendment requests one approved plan may ask, answered or open: past that the model
asks the user for a new plan instead of wearing the reviewer down one card at a time."""


def call_sha256(args: Mapping[str, Any]) -> str:
    """The hash an approval binds a call's arguments with: canonical JSON (sorted keys,
    no spaces), so the same arguments always hash the same and any change shows."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_amendment_caps(
    record: PlanRecord, invocation_id: str | None, call_at: float | None
) -> None:
    """Refuse one more amendment request past the per-step or per-plan cap."""
    asked = [p for p in record.pending if p.kind == "amendment"]
    in_step = [
        p
        for p in asked
        if call_at is not None and p.call_at == call_at and p.invocation_id == invocation_id
    ]
    if len(in_step) >= MAX_AMENDMENTS_PER_STEP:
        raise PlanError(
            ErrorCode.AMENDMENT_LIMIT,
            f"this step already asks for {len(in_step)} scope amendments, the most one step "
            "may ask; this call did not run",
            "wait for the user's answers, then ask in one call for what is still missing",
        )
    decided = sum(1 for a in record.approvals if a.kind == "amendment")
    if decided + len(asked) >= MAX_AMENDMENTS_PER_PLAN:
        raise PlanError(
            ErrorCode.AMENDMENT_LIMIT,
            f"this plan has asked for {decided + len(asked)} scope amendments, the most one "
            "plan may ask; this call did not run",
            "stop and tell the user what the approved scope lacks, so they can approve a "
            "new plan with a scope that fits the work",
        )


def request_amendment(
    record: PlanRecord | None,
    *,
    kind: Literal["amendment", "edit", "tool"],
    call_id: str,
    tool_name: str,
    wants: Scope,
    now: float,
    target: str = "",
    diff: str | None = None,
    change: dict[str, Any] | None = None,
    reason: str = "",
    approval_id: str | None = None,
    args_sha256: str | None = None,
    invocation_id: str | None = None,
    call_at: float | None = None,
    call_index: int = 0,
) -> Transition:
    """Open an amendment (or edit review) for the call ``call_id``; the run pauses.

    ``wants`` is what the call needs beyond the scope (for ``edit``: the file it writes);
    ``target`` names the call for a human (``Write inventory/stock.py``); ``change`` is
    the file before and after a write (``path``, ``old_text``, ``new_text``), when short.
    ``args_sha256`` binds the request to the call's arguments (:func:`call_sha256`);
    ``invocation_id`` and ``call_at`` name the model step the call was made in.
    """
    if record is None or (kind != "tool" and not record.is_being_implemented()):
        raise PlanError(ErrorCode.INVALID_STATE, "amendments apply to an approved plan only")
    if record.pending_for(call_id) is not None:
        raise PlanError(
            ErrorCode.INVALID_STATE, f"call {call_id!r} is already waiting for the user"
        )
    if kind == "amendment":
        _check_amendment_caps(record, invocation_id, call_at)
    updated = record.model_copy(deep=True)
    updated.updated_at = now
    approval_id = approval_id or uuid.uuid4().hex
    if kind == "amendment":
        title = "Amend the plan's scope?"
        message = f"The agent also wants to {wants.asks()} ({target or tool_name})."
        status = "pending_amendment"
    elif kind == "edit":
        title = "Review this edit?"
        message = f"The agent wants to {wants.asks()} ({target or tool_name})."
        status = "pending_edit"
    else:
        title = "Allow this tool call?"
        message = f"The agent wants to call `{tool_name}`: {reason or 'the policy asks'}."
        status = "pending_tool"
    if kind != "tool" and reason:
        # The policy file asks for this call too; this one request answers both.
        message += f" The tool policy asks too: {reason}."
    payload: dict[str, Any] = {
        "status": status,
        "title": title,
        "message": message,
        "plan_id": updated.id,
        "objective": updated.objective,
        "tool": tool_name,
        "target": target,
        "wants": wants.model_dump(mode="json"),
        "scope": updated.scope.model_dump(mode="json") if updated.scope else None,
        "scope_summary": updated.scope.summary() if updated.scope else None,
        "approval_id": approval_id,
        "revision": updated.content_revisions,
        "sha256": updated.sha256,
        "timestamp": now,
    }
    if diff is not None:
        payload["diff"] = diff[:MAX_DIFF_CHARS]
        payload["diff_truncated"] = len(diff) > MAX_DIFF_CHARS
    if change is not None:
        payload["change"] = change
    updated.pending.append(
        PendingRequest(
            kind=kind,
            call_id=call_id,
            approval_id=approval_id,
            tool_name=tool_name,
            payload=payload,
            revision=updated.content_revisions,
            sha256=updated.sha256,
            created_at=now,
            invocation_id=invocation_id,
            call_at=call_at,
            call_index=call_index,
            args_sha256=args_sha256,
        )
    )
    event = journal_event(
        updated,
        record.status,
        actor="model",
        now=now,
        kind=f"plan.{kind}.requested",
        call_id=call_id,
        tool=tool_name,
        target=target or None,
        wants=wants.asks(),
        approval_id=approval_id,
    )
    return Transition(record=updated, result=payload, events=[event])


def resolve_amendment(
    record: PlanRecord,
    pending: PendingRequest,
    response: dict[str, Any],
    *,
    now: float,
    actor: str,
) -> Transition:
    """Apply the human's decision on an amendment or edit review (already bound)."""
    note = reviewer_note(pending, response)
    new_scope = edited_scope(response) if pending.kind == "amendment" else None
    if pending.kind == "edit" and response.get("scope") is not None:
        raise ReplyIgnored("an edit review takes no scope; approve or reject the edit")
    wants = Scope.model_validate(pending.payload.get("wants") or {})
    updated = consume(record, pending, now)
    approved = response["status"] == "approved"
    if approved and pending.kind == "amendment":
        base = updated.scope or Scope()
        # The card showed whole commands: approving grants them as such, so the approval
        # of `rm -rf build` does not run `rm -rf build src`. A prefix is granted only
        # where the reviewer wrote one into the scope they sent back.
        widened = new_scope if new_scope is not None else base.union(wants.as_exact())
        if widened != updated.scope:
            updated.scope = widened
            add_revision(updated, author="reviewer", now=now)
    if approved:
        what = {"amendment": "amendment", "edit": "edit", "tool": "tool call"}[pending.kind]
        result: dict[str, Any] = {
            "status": "approved",
            "message": f"The user approved the {what}; the call ran.",
            "request": pending.kind,
        }
        if pending.kind == "amendment" and updated.scope is not None:
            result["scope_summary"] = updated.scope.summary()
    else:
        if pending.kind == "tool":
            code = TOOL_REFUSED
            message = f"the user refused the call to {pending.tool_name}; it did not run"
            hint = "do without it, or explain why you need it and ask the user"
        else:
            code = AMENDMENT_REFUSED if pending.kind == "amendment" else EDIT_REFUSED
            message = f"the user refused to let the plan {wants.asks()}; nothing was changed"
            hint = "stay within the approved scope, or explain why you need it and ask the user"
        if note:
            message += f". Reviewer note: {note}"
        result = error_result(
            code, message, hint, status="rejected", reviewer_note=note, request=pending.kind
        )
    return decided(
        record,
        updated,
        pending,
        result,
        decision=response["status"],
        actor=actor,
        now=now,
        note=note,
        with_plan=False,
        kind=f"plan.{pending.kind}",
        # The status does not move on an amendment: the journal says what was decided.
        outcome=response["status"],
        call_id=pending.call_id,
        tool=pending.tool_name,
        wants=wants.asks(),
        scope=updated.scope.canonical() if updated.scope else None,
        approval_id=pending.approval_id,
    )
