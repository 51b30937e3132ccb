"""Phase machines, runtime authorization (rejection messages, budget, guard) and
completion policies of the protocol core."""

from __future__ import annotations

import pytest

from plangate.protocol.actions import (
    DATA_ACTION_NAMES,
    TOOL_ACTION_ALIASES,
    action_for_tool,
    tool_for_action,
)
from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    DEFINITIONS,
    GENERAL_TASK,
    GENERAL_TASK_REF,
    ActionOutcome,
    Allowed,
    ProtocolError,
    ProtocolRef,
    ProtocolState,
    Rejected,
    allowed_actions,
    authorize_action,
    evaluate_completion,
    record_action,
    register_protocols,
    segment_id_for,
    start_segment,
)

COMMON = {"read_file", "search_files", "write_file"}
OK = ActionOutcome()


def general(**kwargs):
    return start_segment(GENERAL_TASK_REF, segment_id_for("run-1"), **kwargs)


def analysis(**kwargs):
    return start_segment(DATA_ANALYSIS_REF, segment_id_for("run-1"), **kwargs)


def run_chain(state, actions):
    for action in actions:
        decision = authorize_action(state, action, common_actions=COMMON)
        assert isinstance(decision, Allowed), decision
        outcome = ActionOutcome(answer_message_id="m1") if action == "general.answer.commit" else OK
        state = record_action(state, action, outcome)
    return state


FULL_CHAIN = (
    "list_data_sources",
    "inspect_schema",
    "lookup_values",
    "data.query.plan",
    "run_sql_readonly",
    "analysis.result.validate",
    "analysis.evidence.bind",
)


# --------------------------------------------------------------------------- actions


def test_tool_aliases_map_model_tools_onto_actions():
    assert action_for_tool("protocol_handoff") == "protocol.handoff.propose"
    assert action_for_tool("analysis_requirements_commit") == "analysis.requirements.commit"
    assert action_for_tool("plan_query") == "data.query.plan"
    assert action_for_tool("validate_result") == "analysis.result.validate"
    assert action_for_tool("bind_evidence") == "analysis.evidence.bind"
    assert action_for_tool("inspect_schema") == "inspect_schema"
    assert action_for_tool("read_file") == "read_file"
    assert tool_for_action("data.query.plan") == "plan_query"
    assert tool_for_action("read_file") == "read_file"


def test_data_actions_cover_the_data_tools_and_the_analysis_chain():
    for tool in (
        "list_data_sources",
        "inspect_schema",
        "lookup_values",
        "preview_table",
        "run_sql_readonly",
        "plan_query",
        "validate_result",
        "bind_evidence",
    ):
        assert action_for_tool(tool) in DATA_ACTION_NAMES
    assert "protocol.handoff.propose" not in DATA_ACTION_NAMES


def test_fix_8_11_aliases_are_data_a_host_can_extend():
    aliases = {**TOOL_ACTION_ALIASES, "sql": "run_sql_readonly"}
    assert action_for_tool("sql", aliases) == "run_sql_readonly"
    assert tool_for_action("run_sql_readonly", aliases) == "sql"


# --------------------------------------------------------------------------- machines


def test_general_task_moves_from_understand_to_gather_then_answer():
    state = general()
    assert state.phase == "understand" and state.revision == 0
    state = record_action(state, "read_file", OK, tool="read_file")
    assert state.phase == "gather"
    state = record_action(state, "general.answer.commit", ActionOutcome(answer_message_id="m1"))
    assert state.phase == "answer"
    assert state.domain.answer_message_id == "m1"
    assert state.revision == 2


def test_general_task_commits_straight_from_understand_to_answer():
    state = record_action(general(), "general.answer.commit", ActionOutcome(answer_message_id="m"))
    assert state.phase == "answer"


def test_committing_a_general_answer_requires_the_message_id():
    with pytest.raises(ProtocolError) as err:
        record_action(general(), "general.answer.commit", OK)
    assert err.value.code == "GENERAL_ANSWER_MESSAGE_MISSING"


def test_record_action_is_pure():
    state = general()
    after = record_action(state, "read_file", OK)
    assert state.phase == "understand" and state.ledger == ()
    assert after is not state and len(after.ledger) == 1


def test_data_analysis_walks_the_whole_chain_to_synthesis():
    state = analysis()
    phases = [state.phase]
    for action in FULL_CHAIN:
        state = run_chain(state, [action])
        phases.append(state.phase)
    assert phases == [
        "scope",
        "scope",
        "semantic_grounding",
        "query_planning",
        "execution",
        "validation",
        "validation",
        "synthesis",
    ]
    assert evaluate_completion(state).status == "completed"


def test_data_analysis_follows_facts_to_a_fixpoint():
    # Values looked up before the schema: inspecting the schema then skips grounding.
    state = run_chain(analysis(), ["lookup_values", "inspect_schema"])
    assert state.phase == "query_planning"


def test_a_replan_invalidates_results_and_returns_to_execution():
    state = run_chain(analysis(), FULL_CHAIN)
    state = run_chain(state, ["data.query.plan"])
    assert state.phase == "execution"
    assert "query_executed" not in state.domain.facts
    assert "result_validated" not in state.domain.facts
    decision = evaluate_completion(state)
    assert decision.status == "continue"
    assert decision.reason_codes == (
        "QUERY_EXECUTION_REQUIRED",
        "RESULT_VALIDATION_REQUIRED",
        "EVIDENCE_BINDING_REQUIRED",
    )
    assert decision.allowed_actions == ("run_sql_readonly",)


def test_common_actions_are_allowed_in_every_phase_of_both_protocols():
    for ref, definition in DEFINITIONS.items():
        for phase in definition.phases:
            state = start_segment(ref, "r:segment:1").model_copy(update={"phase": phase.name})
            assert isinstance(
                authorize_action(state, "read_file", common_actions=COMMON), Allowed
            ), (ref, phase.name)


def test_general_task_never_allows_data_actions_even_when_passed_as_common():
    for phase in GENERAL_TASK.phases:
        state = general().model_copy(update={"phase": phase.name})
        for action in DATA_ACTION_NAMES:
            decision = authorize_action(state, action, common_actions=COMMON | {action})
            assert isinstance(decision, Rejected)
            assert decision.code == "ACTION_NOT_ALLOWED_IN_PHASE"


def test_duplicate_protocol_registrations_are_rejected():
    with pytest.raises(ProtocolError) as err:
        register_protocols(GENERAL_TASK, GENERAL_TASK)
    assert err.value.message == "PROTOCOL_ALREADY_REGISTERED:general-task@1"


def test_protocol_ref_parses_and_prints():
    ref = ProtocolRef.parse("data-analysis@1")
    assert ref == DATA_ANALYSIS_REF and str(ref) == "data-analysis@1"
    with pytest.raises(ValueError):
        ProtocolRef.parse("data-analysis")


# --------------------------------------------------------------------------- runtime guard


def test_rejection_carries_the_allowed_actions_of_the_current_phase():
    decision = authorize_action(analysis(), "run_sql_readonly", common_actions={"read_file"})
    assert isinstance(decision, Rejected)
    assert decision.message == (
        "ACTION_NOT_ALLOWED_IN_PHASE:scope:run_sql_readonly:"
        "list_data_sources,inspect_schema,lookup_values,protocol.handoff.propose,read_file"
    )
    assert decision.allowed_actions == (
        "list_data_sources",
        "inspect_schema",
        "lookup_values",
        "protocol.handoff.propose",
        "read_file",
    )
    assert "Continue with one of the actions allowed in phase scope:" in decision.recovery_hint
    assert "protocol_handoff" in decision.recovery_hint  # tool names, not action names
    assert "Do not repeat run_sql_readonly while the protocol remains in phase scope." in (
        decision.recovery_hint
    )


def test_rejects_an_action_that_is_not_allowed_in_the_current_phase():
    decision = authorize_action(general(), "inspect_schema", common_actions=COMMON)
    assert isinstance(decision, Rejected)
    assert decision.code == "ACTION_NOT_ALLOWED_IN_PHASE"
    assert decision.message.startswith("ACTION_NOT_ALLOWED_IN_PHASE:understand:inspect_schema:")
    assert decision.handoff_targets == (DATA_ANALYSIS_REF,)
    assert "propose a handoff to data-analysis@1 with protocol_handoff" in decision.recovery_hint
    state = record_action(general(), "inspect_schema", decision, tool="inspect_schema")
    assert state.ledger[-1].status == "rejected"
    assert state.ledger[-1].reason_code == "ACTION_NOT_ALLOWED_IN_PHASE"
    assert state.phase == "understand"


def test_recovery_hint_truncates_long_allowed_lists_but_the_message_keeps_them_all():
    common = {f"tool_{i:02d}" for i in range(20)}
    decision = authorize_action(general(), "inspect_schema", common_actions=common)
    assert isinstance(decision, Rejected)
    assert "(+10 more)" in decision.recovery_hint
    assert decision.message.count(",") == 21
    assert len(decision.allowed_actions) == 22


def test_guard_denial():
    def no_sql_on_weekends(state, action):
        return "WEEKEND" if action == "list_data_sources" else None

    decision = authorize_action(analysis(), "list_data_sources", guard=no_sql_on_weekends)
    assert isinstance(decision, Rejected)
    assert decision.code == "PROTOCOL_GUARD_REJECTED"
    assert decision.message == "PROTOCOL_GUARD_REJECTED:WEEKEND:list_data_sources"


def test_action_budget_exhausted_counts_rejected_calls_too():
    state = general()
    for _ in range(99):
        state = record_action(state, "read_file", OK)
    state = record_action(
        state, "inspect_schema", authorize_action(state, "inspect_schema", common_actions=COMMON)
    )
    assert len(state.ledger) == 100
    decision = authorize_action(state, "read_file", common_actions=COMMON)
    assert isinstance(decision, Rejected)
    assert decision.message == "PROTOCOL_ACTION_BUDGET_EXHAUSTED:100"
    assert DEFINITIONS[DATA_ANALYSIS_REF].max_actions == 500


def test_an_ended_segment_refuses_every_action():
    state = general().model_copy(update={"status": "handed_off"})
    decision = authorize_action(state, "read_file", common_actions=COMMON)
    assert isinstance(decision, Rejected) and decision.code == "PROTOCOL_SEGMENT_NOT_ACTIVE"


def test_fix_8_11_mcp_and_unknown_tools_are_governed_like_any_other_tool():
    # Not named by the phase and not in the caller's explicit common set: refused,
    # in both protocols, whatever its origin.
    for state in (general(), analysis()):
        for action in ("datalink_explore", "unknown_tool"):
            decision = authorize_action(state, action, common_actions=COMMON)
            assert isinstance(decision, Rejected)
            assert decision.code == "ACTION_NOT_ALLOWED_IN_PHASE"
    assert allowed_actions(general(), ()) == ("protocol.handoff.propose", "general.answer.commit")


def test_runtime_actions_cannot_be_smuggled_in_as_common():
    decision = authorize_action(
        analysis(), "analysis.requirements.commit", common_actions={"analysis.requirements.commit"}
    )
    assert isinstance(decision, Rejected)


# --------------------------------------------------------------------------- completion


def test_general_task_completes_once_an_answer_is_committed():
    decision = evaluate_completion(general())
    assert decision.status == "continue"
    assert decision.reason_codes == ("GENERAL_ANSWER_NOT_COMMITTED",)
    assert decision.allowed_actions == ("general.answer.commit",)
    done = run_chain(general(), ["general.answer.commit"])
    assert evaluate_completion(done).status == "completed"


def test_data_analysis_lists_missing_rungs_and_offers_the_first():
    decision = evaluate_completion(analysis(requirements=["r1"]))
    assert decision.status == "continue"
    assert decision.reason_codes[0] == "SCHEMA_GROUNDING_REQUIRED"
    assert decision.reason_codes[-1] == "ANALYSIS_REQUIREMENT_PENDING:r1"
    assert decision.allowed_actions == (
        "list_data_sources",
        "inspect_schema",
        "analysis.requirements.commit",
    )


def test_pending_requirements_block_completion_until_reported():
    state = run_chain(analysis(requirements=["r1", "r2"]), FULL_CHAIN)
    assert evaluate_completion(state).reason_codes == (
        "ANALYSIS_REQUIREMENT_PENDING:r1",
        "ANALYSIS_REQUIREMENT_PENDING:r2",
    )
    state = record_action(
        state,
        "analysis.requirements.commit",
        ActionOutcome(requirements={"r1": "satisfied", "r2": "unmet"}),
    )
    decision = evaluate_completion(state)
    assert decision.status == "degraded"
    assert decision.reason_codes == ("ANALYSIS_REQUIREMENT_UNMET:r2",)
    state = record_action(
        state, "analysis.requirements.commit", ActionOutcome(requirements={"r2": "satisfied"})
    )
    assert evaluate_completion(state).status == "completed"


def test_forced_terminal_turns_continue_into_partial():
    assert evaluate_completion(analysis(), force_terminal=True).status == "partial"
    done = run_chain(general(), ["general.answer.commit"])
    assert evaluate_completion(done, force_terminal=True).status == "completed"


def test_protocol_state_round_trips_through_json_for_the_store():
    state = run_chain(analysis(requirements=["r1"]), ["inspect_schema"])
    payload = state.model_dump_json(by_alias=True)
    assert '"segmentId":"run-1:segment:1"' in payload
    assert ProtocolState.model_validate_json(payload) == state
