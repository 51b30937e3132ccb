"""A tool result in a few words, for the surfaces that show one (terminal, editor).

One place, so the terminal and the editor say the same thing about the same result. A
refusal or failure is read from its fields (``code``, ``message``, ``hint``, the detail
fields), never from the ``error`` text: see ``plangate.errors``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from plangate.errors import ErrorCode, error_code

__all__ = ["Outcome", "describe_result", "summarize_result"]

Kind = Literal["ok", "error", "refused", "ignored"]

_REFUSALS = {
    ErrorCode.PLAN_MODE_GATE: "plan gate",
    ErrorCode.POLICY_DENIED: "tool policy",
    ErrorCode.OUTSIDE_SCOPE: "plan scope",
    ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE: "protocol phase",
    ErrorCode.PROTOCOL_ACTION_BUDGET_EXHAUSTED: "protocol",
    ErrorCode.PROTOCOL_GUARD_REJECTED: "protocol",
    ErrorCode.PROTOCOL_SEGMENT_NOT_ACTIVE: "protocol",
    ErrorCode.PROTOCOL_RUN_NOT_STARTED: "protocol",
}
"""Codes that mean a boundary refused the call before it ran, and who refused it."""


@dataclass(frozen=True)
class Outcome:
    """How a surface shows one result: its kind, a line, and what to do next."""

    kind: Kind
    text: str
    hint: str = ""
    code: ErrorCode | None = None
    refused_by: str = ""
    """For a refusal: the boundary that refused (``plan gate``, ``protocol phase``...)."""


def describe_result(name: str, result: dict[str, Any]) -> Outcome:
    if not result.get("error"):
        return Outcome("ok", summarize_result(name, result))
    code = error_code(result)
    message = str(result.get("message") or result["error"])
    hint = str(result.get("hint") or "")
    if code is ErrorCode.HITL_REPLY_IGNORED:
        return Outcome("ignored", message, hint, code)
    if code is ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE:
        allowed = [str(a) for a in result.get("allowed_actions") or []]
        message = f"{result.get('tool') or name} is not allowed in phase {result.get('phase')}"
        if allowed:
            message += f" (allowed: {', '.join(allowed)})"
        targets = [str(t) for t in result.get("handoff_targets") or []]
        if targets:
            message += f"; it needs {' or '.join(targets)} (a handoff)"
    if code is not None and code in _REFUSALS:
        return Outcome("refused", message, hint, code, _REFUSALS[code])
    return Outcome("error", message, hint, code)


def summarize_result(name: str, result: dict[str, Any]) -> str:
    """One line about a successful result (an error's line is ``describe_result``'s)."""
    if result.get("error"):
        return describe_result(name, result).text
    if name == "Read":
        return f"read {result.get('path')} ({result.get('total_lines')} lines)"
    if name == "Glob":
        paths = result.get("paths") or []
        return f"{len(paths)} paths: " + ", ".join(paths[:4]) + (" …" if len(paths) > 4 else "")
    if name == "Grep":
        return f"{len(result.get('matches') or [])} matches"
    if name == "Bash":
        out = (result.get("stdout") or result.get("stderr") or "").strip().splitlines()
        tail = out[-1] if out else ""
        return f"exit {result.get('exit_code')} · {tail}"
    if name in ("Edit", "Write"):
        return f"changed {result.get('path')}"
    if name == "update_plan_content":
        plan = result.get("plan") or {}
        return f"plan {plan.get('status')} · revision {plan.get('contentRevisions')}"
    if name == "todo_write":
        return str(result.get("message", "todos updated"))
    if name == "ask_user_question" and result.get("answer") is not None:
        return f"Answer: {result['answer']}"
    decided = _DECISIONS.get(name, {}).get(str(result.get("status")))
    if decided is not None:
        note = result.get("reviewer_note")
        return f"{decided}: {note}" if note else f"{decided}."
    if name == "list_data_sources":
        return ", ".join(str(s.get("name")) for s in result.get("sources") or []) or "no sources"
    if name == "inspect_schema":
        tables = result.get("tables") or [result]
        return "; ".join(f"{t.get('name')} ({len(t.get('columns') or [])} columns)" for t in tables)
    if name == "lookup_values":
        values = result.get("values") or []
        return f"{len(values)} values: " + ", ".join(str(v.get("value")) for v in values[:5])
    if name == "plan_query":
        return f"query {result.get('query_id')} valid on {', '.join(result.get('tables') or [])}"
    if name == "run_sql_readonly":
        truncated = " (truncated)" if result.get("truncated") else ""
        return f"{result.get('row_count')} rows{truncated}"
    if name == "validate_result":
        return "valid" if result.get("valid") else f"issues: {result.get('issues')}"
    if name == "bind_evidence":
        return f"evidence {result.get('evidence_id')}"
    if name == "protocol_handoff":
        return f"handoff {result.get('status')} → {result.get('active_protocol')}"
    if "message" in result:
        return str(result["message"])
    text = json.dumps(result, ensure_ascii=False, default=str)
    return text if len(text) < 160 else text[:159] + "…"


_DECISIONS = {
    "exit_plan_mode": {"approved": "Approved", "rejected": "Kept planning"},
    "enter_plan_mode": {"approved": "Entered Plan Mode", "rejected": "Declined Plan Mode"},
}
