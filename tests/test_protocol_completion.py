"""The run completion gate."""

from __future__ import annotations

from plangate.protocol.completion import completion_gate
from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    GENERAL_TASK_REF,
    ActionOutcome,
    CompletionDecision,
    LedgerEntry,
    authorize_action,
    evaluate_completion,
    record_action,
    start_segment,
)
from plangate.protocol.handoff import evaluate_handoff

COMPLETED = CompletionDecision(status="completed")


def rejected(action, code="ACTION_NOT_ALLOWED_IN_PHASE", tool=None):
    return LedgerEntry(action=action, tool=tool, status="rejected", reason_code=code)


def test_fails_a_run_whose_data_actions_were_rejected_by_the_protocol():
    state = start_segment(GENERAL_TASK_REF, "r:segment:1")
    for action in ("list_data_sources", "inspect_schema", "list_data_sources"):
        state = record_action(
            state, action, authorize_action(state, action, common_actions={"read_file"})
        )
    state = record_action(state, "general.answer.commit", ActionOutcome(answer_message_id="m"))
    assert evaluate_completion(state).status == "completed"
    outcome = completion_gate(state.ledger, evaluate_completion(state))
    assert outcome.status == "failed"
    assert outcome.reason_codes == ("DATA_ACTIONS_REJECTED_BY_PROTOCOL",)
    assert outcome.message == (
        "DATA_ACTIONS_REJECTED_BY_PROTOCOL: 3 data tool call(s) (inspect_schema, "
        "list_data_sources) were rejected by the protocol and never ran"
    )
    assert outcome.rejected_data_tools == ("inspect_schema", "list_data_sources")


def test_names_the_tools_the_model_called():
    outcome = completion_gate([rejected("data.query.plan", tool="plan_query")], COMPLETED)
    assert outcome.rejected_data_tools == ("plan_query",)


def test_keeps_completing_runs_whose_rejected_actions_are_not_data_actions():
    outcome = completion_gate([rejected("write_file")], COMPLETED)
    assert outcome.status == "completed"


def test_non_protocol_failures_of_data_tools_do_not_trip_the_gate():
    # A data tool that ran and failed (bad SQL) is the tool's error, not a refusal.
    outcome = completion_gate([rejected("run_sql_readonly", code="SQL_SYNTAX_ERROR")], COMPLETED)
    assert outcome.status == "completed"


def test_maps_the_final_decision_onto_the_run_outcome():
    assert completion_gate([], CompletionDecision(status="continue")).status == "partial"
    assert completion_gate([], CompletionDecision(status="degraded")).status == "degraded"
    assert completion_gate([], CompletionDecision(status="failed")).status == "failed"
    missing = completion_gate([], None)
    assert missing.status == "failed"
    assert missing.reason_codes == ("PROTOCOL_TERMINAL_DECISION_REQUIRED",)


def test_a_rejection_recovered_by_a_handoff_does_not_fail_the_run():
    general = start_segment(GENERAL_TASK_REF, "r:segment:1")
    general = record_action(general, "inspect_schema", authorize_action(general, "inspect_schema"))
    handoff = evaluate_handoff(
        general,
        DATA_ANALYSIS_REF,
        authorized=(GENERAL_TASK_REF, DATA_ANALYSIS_REF),
        user_input="analyse revenue",
    )
    analysis = handoff.target_state
    assert analysis is not None
    for action in (
        "inspect_schema",
        "lookup_values",
        "data.query.plan",
        "run_sql_readonly",
        "analysis.result.validate",
        "analysis.evidence.bind",
    ):
        analysis = record_action(analysis, action, ActionOutcome())
    run_ledger = [*handoff.source_state.ledger, *analysis.ledger]
    outcome = completion_gate(run_ledger, evaluate_completion(analysis, force_terminal=True))
    assert outcome.status == "completed"


# --------------------------------------------------------------------------- §8.10


def test_fix_8_10_rejections_in_any_segment_and_of_any_kind_fail_the_run():
    first_segment = [rejected("preview_table", code="PROTOCOL_ACTION_BUDGET_EXHAUSTED")]
    second_segment = [
        rejected("run_sql_readonly", code="PROTOCOL_GUARD_REJECTED"),
        LedgerEntry(action="read_file", status="succeeded"),
    ]
    outcome = completion_gate([*first_segment, *second_segment], COMPLETED)
    assert outcome.status == "failed"
    assert outcome.rejected_data_tools == ("preview_table", "run_sql_readonly")


def test_fix_8_10_data_analysis_runs_are_gated_too():
    state = start_segment(DATA_ANALYSIS_REF, "r:segment:1")
    state = record_action(state, "run_sql_readonly", authorize_action(state, "run_sql_readonly"))
    outcome = completion_gate(state.ledger, CompletionDecision(status="completed"))
    assert outcome.status == "failed"
    assert "run_sql_readonly" in (outcome.message or "")
