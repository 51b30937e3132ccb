"""The pure plan core: transitions, reply binding and the gate, without ADK or a database."""

from __future__ import annotations

import pytest

from plangate.errors import ErrorCode
from plangate.plan import (
    DEFAULT_WRITE_TOOL_NAMES,
    GatePolicy,
    PlanError,
    PlanRecord,
    PlanStatus,
    ReplyIgnored,
    ToolCall,
    decide,
)
from plangate.plan import transitions as t
from plangate.plan.record import content_sha256
from plangate.policy.effects import Effect

NOW = 1000.0


def exploring() -> PlanRecord:
    return t.force_enter(None, objective="Build a dashboard", now=NOW, branch="b").record


def drafting(content: str = "1. step one\n2. step two") -> PlanRecord:
    return t.update_content(exploring(), content=content, mode="replace", now=NOW).record


def pending_approval(content: str = "1. step one") -> tuple[PlanRecord, str]:
    tr = t.request_exit(drafting(content), summary="ready", call_id="x1", now=NOW)
    return tr.record, tr.result["approval_id"]


def test_record_roundtrips_through_json() -> None:
    record, _ = pending_approval()
    again = PlanRecord.model_validate(record.dump())
    assert again == record
    assert again.status is PlanStatus.PENDING_APPROVAL
    assert record.dump()["contentRevisions"] == 1


def test_enter_request_approve_and_reject() -> None:
    tr = t.request_enter(None, objective="refactor auth", call_id="c1", now=NOW)
    assert tr.record.status is PlanStatus.PENDING_ENTER
    assert tr.result["status"] == "pending_enter"
    assert {"message", "objective", "plan_id", "approval_id"} <= tr.result.keys()
    approved = t.apply_reply(
        tr.record,
        call_id="c1",
        tool_name="enter_plan_mode",
        response={"status": "approved"},
        now=NOW,
    )
    assert approved.record.status is PlanStatus.EXPLORING
    assert approved.result["status"] == "approved"
    rejected = t.apply_reply(
        tr.record,
        call_id="c1",
        tool_name="enter_plan_mode",
        response={"status": "rejected", "reviewer_note": "not now"},
        now=NOW,
    )
    assert rejected.record.status is PlanStatus.CANCELLED
    assert rejected.result["message"] == "not now"


def test_state_machine_enter_update_exit_approve() -> None:
    record, approval_id = pending_approval()
    assert record.status is PlanStatus.PENDING_APPROVAL
    tr = t.apply_reply(
        record, call_id="x1", tool_name="exit_plan_mode", response={"status": "approved"}, now=NOW
    )
    assert tr.record.status is PlanStatus.APPROVED
    assert tr.decision is not None and tr.decision.approval_id == approval_id
    assert not tr.record.is_gate_active()


def test_update_rules() -> None:
    with pytest.raises(PlanError, match="INVALID_ARGS"):
        t.update_content(exploring(), content="x", mode="prepend", now=NOW)
    with pytest.raises(PlanError, match="INVALID_ARGS"):
        t.update_content(exploring(), content="   ", now=NOW)
    with pytest.raises(PlanError, match="no active plan"):
        t.update_content(None, content="x", now=NOW)
    record, _ = pending_approval()
    with pytest.raises(PlanError, match="locked while it waits"):
        t.update_content(record, content="x", now=NOW)
    appended = t.update_content(drafting("a"), content="b", now=NOW).record
    assert appended.content == "a\nb"
    assert [r.number for r in appended.revisions] == [1, 2]


def test_revision_moves_only_on_real_change() -> None:
    record = drafting("same")
    again = t.update_content(record, content="same", mode="replace", now=NOW)
    assert again.record.content_revisions == 1
    assert again.events == []
    pending, _ = pending_approval("same")
    approved = t.apply_reply(
        pending,
        call_id="x1",
        tool_name="exit_plan_mode",
        response={"status": "approved", "content": "same"},
        now=NOW,
    )
    assert approved.record.content_revisions == 1


def test_every_revision_keeps_text_and_hash() -> None:
    record = t.update_content(drafting("v1"), content="v2", mode="replace", now=NOW).record
    assert [(r.content, r.sha256) for r in record.revisions] == [
        ("v1", content_sha256("v1")),
        ("v2", content_sha256("v2")),
    ]


def test_exit_requires_content_and_state() -> None:
    with pytest.raises(PlanError, match="plan is empty"):
        t.request_exit(exploring(), summary=None, call_id="x", now=NOW)
    with pytest.raises(PlanError, match="no active plan"):
        t.request_exit(None, summary=None, call_id="x", now=NOW)


def test_rejection_keeps_note_and_edited_draft() -> None:
    record, _ = pending_approval("1. old")
    tr = t.apply_reply(
        record,
        call_id="x1",
        tool_name="exit_plan_mode",
        response={"status": "rejected", "reviewer_note": "add error handling", "content": "1. new"},
        now=NOW,
    )
    assert tr.record.status is PlanStatus.DRAFTING
    assert tr.record.reviewer_note == "add error handling"
    assert tr.record.suggested_content == "1. new"
    assert tr.record.content == "1. old"
    assert tr.result["suggested_content"] == "1. new"


def test_echoed_payload_does_not_make_summary_the_note() -> None:
    """The request's own message echoed back is no note, and a rejection needs one."""
    record, _ = pending_approval()
    echoed = dict(record.pending[0].payload, status="rejected")
    with pytest.raises(ReplyIgnored, match="needs a note") as caught:
        t.apply_reply(record, call_id="x1", tool_name="exit_plan_mode", response=echoed, now=NOW)
    assert caught.value.reason_code == ErrorCode.INVALID_REPLY
    noted = dict(echoed, reviewer_note="Split step 2")
    tr = t.apply_reply(record, call_id="x1", tool_name="exit_plan_mode", response=noted, now=NOW)
    assert tr.record.reviewer_note == "Split step 2"
    assert tr.record.suggested_content is None


def test_a_plan_rejection_without_a_note_decides_nothing() -> None:
    record, _ = pending_approval()
    shown = record.pending[0]
    for response in (
        {"status": "rejected", "approval_id": shown.approval_id},
        {"status": "rejected", "approval_id": shown.approval_id, "reviewer_note": "  "},
    ):
        with pytest.raises(ReplyIgnored, match="reviewer_note"):
            t.apply_reply(
                record, call_id="x1", tool_name="exit_plan_mode", response=response, now=NOW
            )


def test_echoed_pending_payload_is_ignored() -> None:
    record, _ = pending_approval()
    with pytest.raises(ReplyIgnored, match="echoes"):
        t.apply_reply(
            record,
            call_id="x1",
            tool_name="exit_plan_mode",
            response=record.pending[0].payload,
            now=NOW,
        )


@pytest.mark.parametrize(
    ("response", "match"),
    [
        ({"status": "approved", "approval_id": "other"}, "does not match"),
        ({"status": "approved", "revision": 7}, "revision 7"),
        ({"status": "approved", "sha256": "0" * 64}, "sha256"),
        ({"status": "maybe"}, "status must be"),
        ("approved", "JSON object"),
    ],
)
def test_approval_is_bound_to_what_was_reviewed(response: object, match: str) -> None:
    record, _ = pending_approval()
    with pytest.raises(ReplyIgnored, match=match):
        t.apply_reply(record, call_id="x1", tool_name="exit_plan_mode", response=response, now=NOW)


def test_stale_and_foreign_replies_are_ignored() -> None:
    record, _ = pending_approval()
    with pytest.raises(ReplyIgnored, match="no pending request"):
        t.apply_reply(
            record,
            call_id="old",
            tool_name="exit_plan_mode",
            response={"status": "approved"},
            now=NOW,
        )
    with pytest.raises(ReplyIgnored, match="belongs to exit_plan_mode"):
        t.apply_reply(
            record,
            call_id="x1",
            tool_name="enter_plan_mode",
            response={"status": "approved"},
            now=NOW,
        )


def test_question_accepts_documented_and_demo_payloads() -> None:
    asked = t.ask_question(
        drafting(), question="Which DB?", options=["PostgreSQL", "SQLite"], call_id="q", now=NOW
    )
    assert asked.result["question_id"] == 1
    for response in (
        {"status": "answered", "question_id": 1, "answer": "PostgreSQL"},
        {"question_id": "1", "answer": "PostgreSQL"},
    ):
        tr = t.apply_reply(
            asked.record, call_id="q", tool_name="ask_user_question", response=response, now=NOW
        )
        assert tr.record.asked_questions[0].answer == "PostgreSQL"
        assert tr.result == {
            "status": "answered",
            "question_id": 1,
            "answer": "PostgreSQL",
            "message": "The user answered: PostgreSQL",
        }
    with pytest.raises(ReplyIgnored, match="question_id"):
        t.apply_reply(
            asked.record,
            call_id="q",
            tool_name="ask_user_question",
            response={"question_id": 2, "answer": "x"},
            now=NOW,
        )


def test_question_validation() -> None:
    with pytest.raises(PlanError, match="options"):
        t.ask_question(drafting(), question="q", options="a,b", call_id="q", now=NOW)
    with pytest.raises(PlanError, match="no active plan"):
        t.ask_question(None, question="q", call_id="q", now=NOW)


def test_user_exit_cancels_and_withdraws_pending() -> None:
    record, _ = pending_approval()
    tr = t.cancel(record, now=NOW)
    assert tr is not None and tr.record.status is PlanStatus.CANCELLED
    assert tr.resolutions["x1"]["status"] == "cancelled"
    assert not tr.record.pending
    assert t.cancel(tr.record, now=NOW) is None


def test_new_cycle_archives_the_approved_plan() -> None:
    record, _ = pending_approval()
    approved = t.apply_reply(
        record, call_id="x1", tool_name="exit_plan_mode", response={"status": "approved"}, now=NOW
    ).record
    again = t.request_enter(approved, objective="next", call_id="c2", now=NOW)
    assert again.archived is approved
    assert again.record.id != approved.id
    forced = t.force_enter(approved, objective="next", now=NOW)
    # Selecting Plan Mode is the user's step: it closes the approved plan it archives.
    assert forced is not None and forced.archived is not None
    assert forced.archived.id == approved.id and forced.archived.closed_by == "user"
    assert (forced.events[0].kind, forced.events[0].actor) == ("plan.closed", "user")


def test_forced_entry_resolves_a_pending_entry() -> None:
    pending = t.request_enter(None, objective="x", call_id="c1", now=NOW).record
    tr = t.force_enter(pending, objective="x", now=NOW)
    assert tr is not None and tr.record.status is PlanStatus.EXPLORING
    assert tr.resolutions["c1"]["status"] == "approved"
    assert t.force_enter(tr.record, objective="x", now=NOW) is None


def test_plan_steps() -> None:
    assert t.plan_steps("## Setup\ntext\n## Implement\n") == ["Setup", "Implement"]
    assert t.plan_steps("# Plan\n1. Fix reserve\n2. Run tests\n") == ["Fix reserve", "Run tests"]
    assert t.plan_steps("- [ ] a\n- [x] b") == ["a", "b"]


# -- gate ----------------------------------------------------------------------------------

POLICY = GatePolicy()


def gate(
    name: str,
    record: PlanRecord | None,
    effect: Effect | None = None,
    policy: GatePolicy = POLICY,
    own: bool = False,
    **args: object,
):
    return decide(ToolCall(name, args, effect, own=own), record, policy)


def test_gate_is_open_without_active_plan() -> None:
    assert gate("Write", None, Effect.WRITE).allowed
    record, _ = pending_approval()
    approved = t.apply_reply(
        record, call_id="x1", tool_name="exit_plan_mode", response={"status": "approved"}, now=NOW
    ).record
    assert gate("Write", approved, Effect.WRITE).allowed


@pytest.mark.parametrize(
    "status_record", ["pending_enter", "exploring", "drafting", "pending_approval"]
)
def test_gate_blocks_writes_in_every_active_status(status_record: str) -> None:
    record = {
        "pending_enter": lambda: t.request_enter(None, objective="o", call_id="c", now=NOW).record,
        "exploring": exploring,
        "drafting": drafting,
        "pending_approval": lambda: pending_approval()[0],
    }[status_record]()
    decision = gate("Write", record, Effect.WRITE)
    assert not decision.allowed
    result = decision.to_result()
    assert result["error"].startswith("PLAN_MODE_GATE: tool 'Write'")
    assert result["code"] == "PLAN_MODE_GATE" and result["hint"] == decision.hint != ""
    assert f"'{status_record}'" in decision.message


@pytest.mark.parametrize(
    "name", ["write_file", "NotebookEdit", "MultiEdit", "apply_patch", "mcp__fs__write"]
)
def test_default_deny_blocks_unknown_and_renamed_tools(name: str) -> None:
    decision = gate(name, exploring())
    assert not decision.allowed
    assert "not declared read-only" in decision.message


def test_read_only_by_effect_not_by_name() -> None:
    assert gate("anything_at_all", exploring(), Effect.READ).allowed
    assert gate("Read", exploring()).allowed  # listed in readonly_tool_names
    assert not gate(
        "Read", exploring(), Effect.WRITE, policy=GatePolicy(readonly_tool_names=frozenset())
    ).allowed


def test_denylist_mode_reproduces_the_plain_list() -> None:
    policy = GatePolicy(mode="denylist")
    for name in DEFAULT_WRITE_TOOL_NAMES:
        assert not gate(name, exploring(), policy=policy).allowed
    assert gate("write_file", exploring(), policy=policy).allowed


def test_subagent_rules() -> None:
    record = exploring()
    assert gate("spawn_subagent", record, own=True, subagent_type="Explore").allowed
    assert gate("spawn_subagent", record, own=True, subagent_type="Plan").allowed
    for bad in ("default", "general-purpose", None):
        decision = gate("spawn_subagent", record, own=True, subagent_type=bad)
        assert not decision.allowed and "Explore, Plan" in decision.hint
    assert gate("dynamic_subagent", record, own=True, tools=["Read", "Grep"]).allowed
    assert not gate("dynamic_subagent", record, own=True, tools=["Read", "Write"]).allowed
    assert not gate("dynamic_subagent", record, own=True, tools=[]).allowed
    assert not gate("dynamic_subagent", record, own=True).allowed


def test_plan_tools_allowed_and_enter_refused_while_active() -> None:
    record = exploring()
    for name in ("update_plan_content", "exit_plan_mode", "ask_user_question"):
        assert gate(name, record, own=True).allowed
    decision = gate("enter_plan_mode", record, own=True)
    assert not decision.allowed and "already active" in decision.message
    forced = decide(
        ToolCall("enter_plan_mode", {}, own=True), record, POLICY, selection_active=True
    )
    assert "selected Plan Mode in the UI" in forced.message


def test_namesakes_of_plangate_tools_get_no_plan_tool_rights() -> None:
    record = exploring()
    for name in ("update_plan_content", "exit_plan_mode", "ask_user_question"):
        decision = gate(name, record)
        assert not decision.allowed and "not declared read-only" in decision.message
    # An archetype name in the arguments makes no namesake a read-only sub-agent.
    assert not gate("spawn_subagent", record, subagent_type="Explore").allowed
    assert not gate("dynamic_subagent", record, tools=["Read"]).allowed
    # Unreadable state: only plangate's own plan tools pass.
    assert not decide(ToolCall("exit_plan_mode", {}), None, POLICY, unreadable="x").allowed


def test_unreadable_state_fails_closed() -> None:
    decision = decide(ToolCall("Read", {}, Effect.READ), None, POLICY, unreadable="corrupt record")
    assert not decision.allowed and "could not be read" in decision.message
    update = ToolCall("update_plan_content", {}, own=True)
    assert decide(update, None, POLICY, unreadable="x").allowed


def test_plan_core_imports_no_adk() -> None:
    import subprocess
    import sys

    code = "import sys, plangate.plan, plangate.journal; print(any(m.startswith('google') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
