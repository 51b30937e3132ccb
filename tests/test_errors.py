"""One error model: every code a result or error carries is an ``ErrorCode`` member, and
no module but ``plangate.errors`` writes an ``error`` text by hand.

The scenarios check the shape of every error they produce (``harness.check_error_shape``
runs inside ``tool_results``); these tests hold the source to the same rule, and show
each surface reading the fields.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rich.console import Console

from plangate.acp.mapping import resolution_update
from plangate.cli.render import render_result
from plangate.data.catalog import DataError
from plangate.data.sql_guard import SqlGuardError, validate_readonly_sql
from plangate.errors import CodedError, ErrorCode, error_code, error_result
from plangate.plan.gate import GatePolicy, ToolCall, decide
from plangate.plan.record import PlanRecord, PlanStatus
from plangate.plan.session_state import IgnoredReply, PlanSessionState
from plangate.policy.effects import Effect
from plangate.result_text import describe_result

SRC = Path(__file__).resolve().parents[1] / "src" / "plangate"

# Where an "error" key means something else: an HTTP body, a JSON-RPC error object.
NOT_TOOL_RESULTS = {"web/server.py", "acp/stdio.py"}


def _sources() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(SRC)), path.read_text())
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "errors.py"  # the enum itself
    ]


def _hand_written_errors(name: str, text: str) -> list[str]:
    """Dict displays whose ``"error"`` value is a string written in place (docstrings that
    describe the shape do not count: only code is parsed)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value == "error"
                and isinstance(value, ast.Constant | ast.JoinedStr)
            ):
                found.append(f"{name}:{node.lineno}")
    return found


def test_no_module_writes_an_error_text_by_hand() -> None:
    offenders = [
        spot
        for name, text in _sources()
        if name not in NOT_TOOL_RESULTS
        for spot in _hand_written_errors(name, text)
    ]
    assert offenders == []
    # The scan does see a hand-written one.
    assert _hand_written_errors("x.py", 'r = {"error": f"X_Y: {a}"}') == ["x.py:1"]


def test_every_code_named_in_the_source_is_an_error_code() -> None:
    named = {m.group(1) for _, text in _sources() for m in re.finditer(r"ErrorCode\.(\w+)", text)}
    assert named, "the scan found nothing: the pattern is wrong"
    assert sorted(named - set(ErrorCode.__members__)) == []
    # And the other way: a code no module produces is dead weight in the enum.
    unused = set(ErrorCode.__members__) - named
    produced_elsewhere = {
        code for code in unused if any(f'"{code}"' in text for _, text in _sources())
    }
    assert sorted(unused - produced_elsewhere) == []


def test_string_codes_are_gone_from_raises() -> None:
    """Exceptions of the model take an ErrorCode, never a bare string."""
    raises = re.compile(
        r"(?:DataError|SqlGuardError|PlanError|ProtocolError|ProtocolRoutingError|"
        r"ClassifierOutputError|CodedError)\(\s*f?[\"']"
    )
    offenders = [name for name, text in _sources() if raises.search(text)]
    assert offenders == []


def test_every_exception_of_the_model_derives_from_coded_error() -> None:
    from plangate.agent.tool_errors import WorkspaceError
    from plangate.plan.replies import ReplyError
    from plangate.plan.transitions import PlanError, ReplyIgnored
    from plangate.protocol.definitions import ProtocolError

    for cls in (WorkspaceError, DataError, SqlGuardError, PlanError, ReplyIgnored, ReplyError):
        assert issubclass(cls, CodedError), cls
    assert issubclass(ProtocolError, CodedError) and issubclass(SqlGuardError, DataError)


def test_a_refused_query_is_a_result_with_code_message_and_hint() -> None:
    try:
        validate_readonly_sql("DELETE FROM orders", known_tables=["orders"])
    except SqlGuardError as exc:
        result = exc.to_result()
    else:
        raise AssertionError("the guard let a DELETE through")
    assert error_code(result) is ErrorCode.SQL_NOT_READ_ONLY
    assert result["error"] == f"SQL_NOT_READ_ONLY: {result['message']}"
    assert result["hint"] == "only SELECT (and WITH ... SELECT) runs here"


def _gate_refusal() -> dict[str, object]:
    record = PlanRecord(
        id="p", status=PlanStatus.EXPLORING, objective="o", started_at=0.0, updated_at=0.0
    )
    decision = decide(ToolCall("Write", {"path": "x"}, Effect.WRITE), record, GatePolicy())
    return decision.to_result()


def test_the_gate_refusal_keeps_the_seed_text_and_carries_fields() -> None:
    result = _gate_refusal()
    assert result["error"].startswith("PLAN_MODE_GATE: tool 'Write' is blocked")
    assert result["code"] == "PLAN_MODE_GATE" and result["tool"] == "Write"
    assert result["plan_status"] == "exploring" and "exit_plan_mode" in result["hint"]


def test_terminal_shows_message_and_hint_from_the_fields() -> None:
    console = Console(record=True, width=400, color_system=None)
    # The text differs from the fields on purpose: the surface must read the fields.
    result = error_result(ErrorCode.EDIT_NO_MATCH, "old_string not found", "Read it first")
    result["error"] = "EDIT_NO_MATCH: something else entirely"
    render_result(console, "Edit", result)
    render_result(console, "Write", _gate_refusal())
    shown = console.export_text()
    assert "✗ old_string not found (EDIT_NO_MATCH) — Read it first" in shown
    assert "something else entirely" not in shown
    assert "⛔ refused by plan gate: tool 'Write' is blocked" in shown
    assert "— explore with read-only tools" in shown


def test_editor_shows_message_and_hint_from_the_fields() -> None:
    result = error_result(ErrorCode.NOT_FOUND, "a.py does not exist", "list the folder")
    result["error"] = "NOT_FOUND: something else entirely"
    update = resolution_update("c1", "Read", result)
    assert update.status == "failed" and update.content
    text = update.content[0].content.text  # type: ignore[union-attr]
    assert text == "a.py does not exist (NOT_FOUND)\n\nWhat to do: list the folder"


def test_a_protocol_refusal_is_described_from_phase_and_action_fields() -> None:
    result = error_result(
        ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE,
        "run_sql_readonly is not allowed in phase scope",
        "Continue with one of the actions allowed in phase scope",
        error_category="protocol",
        tool="run_sql_readonly",
        phase="scope",
        allowed_actions=["list_data_sources"],
        handoff_targets=["data-analysis@1"],
    )
    result["error"] = "ACTION_NOT_ALLOWED_IN_PHASE:scope:run_sql_readonly:list_data_sources"
    outcome = describe_result("run_sql_readonly", result)
    assert outcome.kind == "refused" and outcome.refused_by == "protocol phase"
    assert outcome.text == (
        "run_sql_readonly is not allowed in phase scope (allowed: list_data_sources); "
        "it needs data-analysis@1 (a handoff)"
    )


def test_an_ignored_reply_keeps_its_reason_code() -> None:
    state = PlanSessionState(
        ignored={"c1": IgnoredReply(reason="the plan changed", code="STALE_REPLY")}
    )
    result = state.reply_result("c1")
    assert result is not None and result["status"] == "ignored"
    assert result["error"] == "HITL_REPLY_IGNORED: the plan changed"
    assert result["reason_code"] == "STALE_REPLY" and result["hint"]
    assert state.reply_result("unknown") is None
