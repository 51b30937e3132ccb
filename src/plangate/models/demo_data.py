"""The offline demo's data-analysis script: three messages that show protocol governance.

1. "revenue by region last quarter" -- the demo classifier is unsure, so the router
   falls back to general-task. The demo agent reaches for the data tools anyway; the
   protocol refuses them, and the completion gate fails the run
   (``DATA_ACTIONS_REJECTED_BY_PROTOCOL``) instead of letting a closing sentence pass.
2. "try again" -- a weak continuation: the recorded session intent is inherited without
   a classifier call. The agent hands off to data-analysis@1 and runs the whole chain
   (sources, schema, status values, plan, query, validation, evidence, a report on the
   requirements extracted from the task) on the sample DuckDB data; the handoff moves
   the intent to data-analysis.
3. "break it down by month" -- the classifier sees the intent and answers *refine*; the
   intent gets a new revision and the agent breaks the revenue down by month.

Like the coding demo this is not a language model: it reads the request (the protocol
block of its instructions, tool results) and plays the next scripted step. Every text
it writes starts with ``[demo]``; the classifier answer is the one exception, because
the router parses it as strict JSON (its reason codes say ``DEMO_CLASSIFIER``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from google.adk.models.llm_request import LlmRequest
from google.genai import types

from plangate.errors import ErrorCode, error_code, is_error
from plangate.plan.prompts import HOST_NOTE_PREFIX

__all__ = ["QUARTER", "failure_text", "next_data_step", "quarter_sql"]

DEMO_LABEL = "[demo]"
SOURCE = "sample"
QUARTER = ("2026-07-01", "2026-10-01", "2026-Q3")
"""The last complete quarter of the sample data (orders run to 2026-09-30)."""

_PROTOCOL_MARKER = "## Protocol governance"
_CLASSIFIER_MARKER = "Choose how the agent should run this user message"
_ACTIVE = re.compile(r"Active protocol: (?P<protocol>[\w-]+)@\d+, phase: (?P<phase>\w+)")
_TASK = re.compile(r"^Session task \([^)]*\): (?P<text>.*)$", re.MULTILINE | re.DOTALL)
_RETRY = re.compile(r"^\s*(try again|retry|again|再次尝试|重试)[\s.!。！]*$", re.IGNORECASE)


def quarter_sql(by_month: bool = False) -> str:
    """Completed revenue by region (and month) for the demo quarter."""
    start, end, _ = QUARTER
    month = "strftime(o.order_date, '%Y-%m') AS month, " if by_month else ""
    group = "r.name, month" if by_month else "r.name"
    order = "r.name, month" if by_month else "revenue DESC"
    return (
        f"SELECT r.name AS region, {month}"
        "ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue "
        "FROM orders o "
        "JOIN order_items oi ON oi.order_id = o.order_id "
        "JOIN customers c ON c.customer_id = o.customer_id "
        "JOIN regions r ON r.region_id = c.region_id "
        f"WHERE o.status = 'completed' AND o.order_date >= DATE '{start}' "
        f"AND o.order_date < DATE '{end}' "
        f"GROUP BY {group} ORDER BY {order}"
    )


def failure_text(result: dict[str, Any]) -> str:
    """How the demo words a failed tool result: its message and code fields (a result from
    a tool without a code shows its error text as it is)."""
    code = error_code(result)
    if code is None:
        return str(result.get("error", ""))
    return f"{result.get('message') or code.value} ({code.value})"


def _say(text: str) -> types.Part:
    return types.Part(text=f"{DEMO_LABEL} {text}")


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _system(request: LlmRequest) -> str:
    instruction = request.config.system_instruction if request.config else None
    return instruction if isinstance(instruction, str) else str(instruction or "")


def _texts(request: LlmRequest) -> str:
    return "\n".join(
        part.text for content in request.contents for part in content.parts or [] if part.text
    )


def _turn(request: LlmRequest) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The latest user text and the (tool, result) pairs since then, in order."""
    user_text, done = "", []
    for content in request.contents:
        for part in content.parts or []:
            if part.text and part.text.startswith(HOST_NOTE_PREFIX):
                continue  # plangate's note to the model, not the user's message
            if part.text and content.role == "user":
                user_text, done = part.text, []
            elif part.function_response is not None:
                done.append(
                    (part.function_response.name or "", dict(part.function_response.response or {}))
                )
    return user_text, done


# --------------------------------------------------------------------------- classifier


def _classify(prompt: str) -> list[types.Part]:
    message = prompt.rsplit("User message:", 1)[-1].strip().lower()
    intent = (
        prompt.split("<session_intent", 1)[1].split("</session_intent>", 1)[0]
        if ("<session_intent" in prompt)
        else None
    )
    analytic = re.search(r"\b(revenue|sales|orders?)\b", message) is not None
    if intent is not None and re.search(r"\b(month|week|break it down|breakdown)", message):
        answer = ("data-analysis", 0.92, "refine", "REFINES_RECORDED_ANALYSIS")
    elif intent is not None and analytic and "revenue" not in intent.lower():
        # A new question after unrelated work: a confident misroute to general-task that
        # replaces the task, so the gate and the later handoff still have something to show.
        answer = ("general-task", 0.8, "replace", "NEW_TASK")
    elif intent is not None:
        answer = ("general-task", 0.8, "side-chat", "UNRELATED_TO_TASK")
    else:
        # Unsure on purpose: shows the fallback route and what the gate does with it.
        answer = ("general-task", 0.55, "replace", "AMBIGUOUS_REQUEST")
    protocol, confidence, relation, reason = answer
    return [
        types.Part(
            text=json.dumps(
                {
                    "protocolId": protocol,
                    "protocolVersion": 1,
                    "confidence": confidence,
                    "reasonCodes": [reason, "DEMO_CLASSIFIER"],
                    "taskRelation": relation,
                }
            )
        )
    ]


# --------------------------------------------------------------------------- the agent


def _format(rows: list[dict[str, Any]], by_month: bool) -> str:
    lines = []
    for row in rows:
        label = f"{row['region']} {row['month']}" if by_month else str(row["region"])
        lines.append(f"- {label}: {float(row['revenue']):,.2f}")
    return "\n".join(lines)


def _general_step(user_text: str, done: list[tuple[str, dict[str, Any]]]) -> list[types.Part]:
    if not done:
        if _RETRY.match(user_text):
            return [
                _say("The data tools need the data-analysis protocol; handing off first."),
                _call(
                    "protocol_handoff",
                    target_protocol="data-analysis@1",
                    reason="The task is a revenue analysis over the sales data.",
                ),
            ]
        return [_say("Let me look at the data sources."), _call("list_data_sources")]
    name, result = done[-1]
    if name == "list_data_sources" and error_code(result) is ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE:
        return [_say("The data tools were refused here, but revenue is usually around 380k.")]
    return [_say(f"Nothing scripted after {name} under general-task; stopping.")]


_PENDING = re.compile(r"ANALYSIS_REQUIREMENT_PENDING:(?P<id>[^,;\s]+)")


def _covered(requirement: str, by_month: bool) -> bool:
    """Whether the demo's one query answers a requirement: completed revenue by region
    (and month) in the demo quarter."""
    covered = {
        "metric:revenue",
        "metric:sales",
        "dimension:region",
        "time:last-quarter",
        f"time:{QUARTER[2].lower()}",
        "filter:order=completed",
    }
    return requirement in covered or (by_month and requirement == "dimension:month")


def _analysis_step(
    task: str, done: list[tuple[str, dict[str, Any]]], pending: list[str]
) -> list[types.Part]:
    by_month = "month" in task.lower()
    sql = quarter_sql(by_month)
    last, result = done[-1] if done else ("", {})
    if is_error(result) and last != "protocol_handoff":
        return [_say(f"{last} failed: {failure_text(result)}; stopping so you can look.")]
    if last in ("", "protocol_handoff"):
        return [_call("list_data_sources")]
    if last == "list_data_sources":
        return [_call("inspect_schema", source=SOURCE)]
    if last == "inspect_schema":
        return [_call("lookup_values", source=SOURCE, table="orders", column="status")]
    if last == "lookup_values":
        purpose = "Completed revenue by region" + (" and month" if by_month else "")
        return [_call("plan_query", source=SOURCE, sql=sql, purpose=f"{purpose}, {QUARTER[2]}")]
    if last == "plan_query":
        return [_call("run_sql_readonly", source=SOURCE, sql=sql)]
    if last == "run_sql_readonly":
        rows = len(result.get("rows") or [])
        return [
            _call(
                "validate_result",
                result={k: result.get(k) for k in ("columns", "column_types", "rows", "truncated")},
                expectations={"min_rows": rows or 1, "non_negative": ["revenue"]},
            )
        ]
    query = next(r for n, r in reversed(done) if n == "run_sql_readonly")
    rows = query.get("rows") or []
    if last == "validate_result":
        if not result.get("valid"):
            return [_say(f"The result did not validate: {result.get('issues')}.")]
        top = rows[0]
        claim = f"{top['region']} had {float(top['revenue']):,.2f} completed revenue"
        return [_call("bind_evidence", claim=claim, query_id=query["query_id"], rows=[top])]
    if last == "bind_evidence" and pending:
        # Report each requirement the protocol extracted from the task: met when the one
        # query covers it, unmet (and said so) when it does not.
        report = {r: "satisfied" if _covered(r, by_month) else "unmet" for r in pending}
        return [_call("analysis_requirements_commit", requirements=report)]
    if last in ("bind_evidence", "analysis_requirements_commit"):
        evidence = next(r for n, r in reversed(done) if n == "bind_evidence")
        what = "by region and month" if by_month else "by region"
        unmet = sorted(
            r for r, status in result.get("requirements", {}).items() if status == "unmet"
        )
        missing = f"\nNot covered by this query: {', '.join(unmet)}." if unmet else ""
        return [
            _say(
                f"Completed revenue {what}, {QUARTER[2]} (completed orders only; "
                f"evidence {evidence.get('evidence_id')}):\n{_format(rows, by_month)}{missing}"
            )
        ]
    return [_say(f"Nothing scripted after {last}; stopping.")]


def next_data_step(request: LlmRequest) -> list[types.Part] | None:
    """The demo's next parts for a data-analysis conversation, or ``None`` when the
    request is not one (the coding demo then plays its own script)."""
    texts = _texts(request)
    if _CLASSIFIER_MARKER in texts:
        return _classify(texts)
    system = _system(request)
    if _PROTOCOL_MARKER not in system:
        return None
    active = _ACTIVE.search(system)
    task_match = _TASK.search(system)
    task = task_match["text"].split("\nTools available now")[0] if task_match else ""
    if active is None:
        return None
    user_text, done = _turn(request)
    if active["protocol"] == "data-analysis":
        pending = [m["id"] for m in _PENDING.finditer(system)]
        return _analysis_step(task or user_text, done, pending)
    if "revenue" in (task + user_text).lower():
        return _general_step(user_text, done)
    return None
