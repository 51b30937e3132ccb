"""Handoff evaluation: checks from server-side state, journal events, segment states
and the intent revision to write."""

from __future__ import annotations

from plangate.protocol.definitions import (
    DATA_ANALYSIS,
    DATA_ANALYSIS_REF,
    GENERAL_TASK,
    GENERAL_TASK_REF,
    ActionOutcome,
    LedgerEntry,
    ProtocolRef,
    ProtocolState,
    record_action,
    register_protocols,
    segment_id_for,
    start_segment,
)
from plangate.protocol.handoff import evaluate_handoff
from plangate.protocol.intent import SessionIntent

BOTH = (GENERAL_TASK_REF, DATA_ANALYSIS_REF)
INTENT = SessionIntent(
    intent_id="i1", revision_id="rev1", protocol=GENERAL_TASK_REF, text="find why sales fell"
)


def segment(ref: ProtocolRef) -> ProtocolState:
    return start_segment(ref, segment_id_for("run-7"))


def kinds(decision):
    return [event.kind for event in decision.events]


def test_atomically_ends_the_current_segment_and_starts_the_target_segment():
    state = record_action(segment(GENERAL_TASK_REF), "read_file", ActionOutcome())
    decision = evaluate_handoff(
        state,
        DATA_ANALYSIS_REF,
        authorized=BOTH,
        intent=INTENT,
        task_relation="continue",
        target_requirements=["by-region"],
    )
    assert decision.accepted and decision.transition_kind == "handoff"
    assert decision.source_state.status == "handed_off"
    assert decision.source_state.revision == state.revision + 1
    assert decision.source_state.ledger[-1].action == "protocol.handoff.propose"
    assert decision.source_state.ledger[-1].status == "succeeded"
    target = decision.target_state
    assert target is not None
    assert target.segment_id == "run-7:segment:2"
    assert (target.protocol, target.phase, target.revision) == (DATA_ANALYSIS_REF, "scope", 0)
    assert target.domain.pending_requirements() == ("by-region",)
    assert kinds(decision) == [
        "protocol.handoff.proposed",
        "protocol.segment.ended",
        "protocol.handoff.accepted",
        "protocol.segment.started",
    ]
    assert decision.events[1].detail == {"status": "handed_off", "transitionKind": "handoff"}
    assert decision.events[2].detail["previousSegmentId"] == "run-7:segment:1"
    assert decision.events[3].detail["phase"] == "scope"
    transition = decision.intent_transition
    assert transition is not None
    assert (transition.kind, transition.intent_id, transition.text) == (
        "handoff",
        "i1",
        "find why sales fell",
    )
    assert transition.protocol == DATA_ANALYSIS_REF
    assert transition.previous_revision_id == "rev1"


def test_derives_unresolved_strict_goals_from_protocol_state():
    state = segment(DATA_ANALYSIS_REF)
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH)
    assert not decision.accepted
    assert decision.reason_code == "PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS"
    assert decision.unresolved_goals[0] == "SCHEMA_GROUNDING_REQUIRED"
    # The signature has no way to pass the model's own claim of "nothing left".


def test_rejects_a_handoff_to_the_active_protocol_without_replacing_its_segment_state():
    state = segment(DATA_ANALYSIS_REF)
    decision = evaluate_handoff(state, DATA_ANALYSIS_REF, authorized=BOTH)
    assert not decision.accepted
    assert decision.reason_code == "PROTOCOL_HANDOFF_SAME_PROTOCOL"
    assert decision.target_state is None
    assert decision.source_state.status == "active"
    assert decision.source_state.phase == "scope"
    assert kinds(decision) == ["protocol.handoff.proposed", "protocol.handoff.rejected"]
    assert decision.events[1].detail["reasonCode"] == "PROTOCOL_HANDOFF_SAME_PROTOCOL"


def test_rejects_a_handoff_to_an_unauthorized_protocol():
    decision = evaluate_handoff(
        segment(GENERAL_TASK_REF), DATA_ANALYSIS_REF, authorized=(GENERAL_TASK_REF,)
    )
    assert decision.reason_code == "PROTOCOL_HANDOFF_NOT_AUTHORIZED"


def test_rejects_an_unregistered_target():
    decision = evaluate_handoff(
        segment(GENERAL_TASK_REF), ProtocolRef(id="nope", version=1), authorized=BOTH
    )
    assert decision.reason_code == "PROTOCOL_HANDOFF_TARGET_UNAVAILABLE"


def test_aborts_an_untouched_misrouted_strict_segment_during_a_route_correction():
    state = segment(DATA_ANALYSIS_REF)
    state = record_action(state, "read_file", ActionOutcome())
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH, correction_requested=True)
    assert decision.accepted
    assert decision.transition_kind == "route-correction"
    assert decision.source_state.status == "aborted"
    assert decision.events[1].detail == {
        "status": "aborted",
        "transitionKind": "route-correction",
        "reasonCode": "PROTOCOL_ROUTE_CORRECTED",
    }
    assert decision.events[2].detail["reasonCodes"] == ["PROTOCOL_ROUTE_CORRECTED"]
    assert decision.target_state is not None
    assert decision.target_state.phase == "understand"


def test_a_side_chat_or_intent_less_run_turns_its_message_into_the_task():
    for intent, relation in ((None, None), (INTENT, "side-chat")):
        decision = evaluate_handoff(
            segment(GENERAL_TASK_REF),
            DATA_ANALYSIS_REF,
            authorized=BOTH,
            intent=intent,
            task_relation=relation,
            user_input="  chart monthly revenue  ",
        )
        transition = decision.intent_transition
        assert transition is not None
        assert transition.intent_id is None
        assert transition.text == "chart monthly revenue"
        assert transition.task_relation == "replace"
    empty = evaluate_handoff(segment(GENERAL_TASK_REF), DATA_ANALYSIS_REF, authorized=BOTH)
    assert empty.accepted and empty.intent_transition is None
    assert empty.warnings == ("SESSION_INTENT_TEXT_REQUIRED",)


def test_a_completed_strict_segment_may_hand_off():
    state = segment(DATA_ANALYSIS_REF)
    for action in (
        "inspect_schema",
        "lookup_values",
        "data.query.plan",
        "run_sql_readonly",
        "analysis.result.validate",
        "analysis.evidence.bind",
    ):
        state = record_action(state, action, ActionOutcome())
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH)
    assert decision.accepted and decision.unresolved_goals == ()


# --------------------------------------------------------------------------- §8 fixes


def test_fix_8_1_any_route_source_can_be_corrected_before_data_work():
    # A keyword hit ("分析这首诗") routed deterministically to data-analysis: correction
    # depends only on the absence of data effects, not on who routed the run.
    state = record_action(
        segment(DATA_ANALYSIS_REF),
        "list_data_sources",
        ActionOutcome(status="rejected", reason_code="PROTOCOL_GUARD_REJECTED"),
    )
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH, correction_requested=True)
    assert decision.accepted and decision.transition_kind == "route-correction"


def test_fix_8_1_no_correction_after_a_data_action_succeeded_anywhere_in_the_run():
    state = record_action(segment(DATA_ANALYSIS_REF), "list_data_sources", ActionOutcome())
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH, correction_requested=True)
    assert decision.reason_code == "PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED"
    # An earlier segment of the same run counts too.
    fresh = segment(GENERAL_TASK_REF)
    earlier = [LedgerEntry(action="inspect_schema", status="succeeded")]
    decision = evaluate_handoff(
        fresh,
        DATA_ANALYSIS_REF,
        authorized=BOTH,
        correction_requested=True,
        earlier_ledger=earlier,
    )
    assert decision.reason_code == "PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED"


def test_fix_8_9_a_version_upgrade_is_a_handoff_but_not_a_downgrade():
    v2 = DATA_ANALYSIS.model_copy(update={"ref": ProtocolRef(id="data-analysis", version=2)})
    registry = register_protocols(GENERAL_TASK, DATA_ANALYSIS, v2)
    up = evaluate_handoff(
        segment(DATA_ANALYSIS_REF),
        v2.ref,
        authorized=(*BOTH, v2.ref),
        registered=registry,
    )
    assert up.accepted
    assert up.target_state is not None and up.target_state.protocol == v2.ref
    down = evaluate_handoff(
        start_segment(v2.ref, "r:segment:1", definitions=registry),
        DATA_ANALYSIS_REF,
        authorized=(*BOTH, v2.ref),
        registered=registry,
    )
    assert down.reason_code == "PROTOCOL_HANDOFF_VERSION_DOWNGRADE"


def test_fix_8_9_a_rejected_proposal_is_recorded_as_rejected():
    state = segment(DATA_ANALYSIS_REF)
    decision = evaluate_handoff(state, GENERAL_TASK_REF, authorized=BOTH)
    entry = decision.source_state.ledger[-1]
    assert (entry.action, entry.tool, entry.status, entry.reason_code) == (
        "protocol.handoff.propose",
        "protocol_handoff",
        "rejected",
        "PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS",
    )
    assert decision.source_state.revision == 1


def test_fix_8_9_a_proposal_from_an_ended_segment_is_journaled():
    ended = segment(GENERAL_TASK_REF).model_copy(update={"status": "handed_off"})
    decision = evaluate_handoff(ended, DATA_ANALYSIS_REF, authorized=BOTH)
    assert decision.reason_code == "PROTOCOL_HANDOFF_SOURCE_NOT_ACTIVE"
    assert kinds(decision) == ["protocol.handoff.proposed", "protocol.handoff.rejected"]
    assert decision.source_state == ended
