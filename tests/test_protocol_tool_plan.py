"""Tool plan assembly, per-phase availability and the instruction rendering."""

from __future__ import annotations

from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    GENERAL_TASK_REF,
    ActionOutcome,
    Rejected,
    authorize_action,
    record_action,
    start_segment,
)
from plangate.protocol.handoff import evaluate_handoff
from plangate.protocol.tool_plan import (
    HandoffRecovery,
    SkillPolicy,
    build_tool_plan,
    render_tool_plan_for_instructions,
    resolve_availability,
)

DATA = ("list_data_sources", "inspect_schema", "run_sql_readonly", "plan_query")
FILES = ("read_file", "write_file")
GROUPS = {"data": DATA, "files": FILES, "skill": ("skill", "skill_read")}


def reasons(plan, name):
    return plan.entry(name).reasons


def test_keeps_everything_exposed_with_reasons_when_no_skill_policy_narrows_the_set():
    plan = build_tool_plan(GROUPS)
    assert all(entry.exposed for entry in plan.entries)
    assert reasons(plan, "read_file") == ("source:files", "skill-policy:open")
    assert [e.name for e in plan.entries][-2:] == [
        "analysis_requirements_commit",
        "protocol_handoff",
    ]
    assert reasons(plan, "protocol_handoff") == ("source:protocol", "protocol-runtime")
    assert plan.entry("plan_query").action == "data.query.plan"
    assert plan.entry("plan_query").kind == "data"
    assert plan.entry("protocol_handoff").kind == "protocol"


def test_applies_deny_before_allow_and_records_the_losing_reason():
    policy = SkillPolicy(
        allowed_tools=frozenset({"write_file"}), denied_tools=frozenset({"write_file"})
    )
    plan = build_tool_plan(GROUPS, skill_policy=policy)
    entry = plan.entry("write_file")
    assert not entry.exposed
    assert entry.reasons == (
        "source:files",
        "skill-policy:allowed:overridden-by-deny",
        "skill-policy:denied",
    )


def test_exempts_always_allow_and_skill_meta_tools_from_a_narrowing_allow_list():
    policy = SkillPolicy(allowed_tools=frozenset({"read_file"}))
    plan = build_tool_plan(GROUPS, always_allow=DATA, skill_policy=policy)
    assert plan.entry("inspect_schema").exposed
    assert reasons(plan, "inspect_schema") == ("source:data", "always-allow")
    assert reasons(plan, "skill") == ("source:skill", "skill-meta")
    assert reasons(plan, "read_file") == ("source:files", "skill-policy:allowed")


def test_drops_tools_outside_a_narrowing_allow_list_with_an_explicit_reason():
    plan = build_tool_plan(GROUPS, skill_policy=SkillPolicy(allowed_tools=frozenset()))
    entry = plan.entry("write_file")
    assert not entry.exposed
    assert entry.reasons[-1] == "skill-policy:not-allowed"
    assert "write_file" not in plan.common_actions()


def test_merges_mcp_tools_after_the_skill_policy_and_labels_their_own_policy_layer():
    plan = build_tool_plan(GROUPS, mcp_tools=("jira_search",))
    names = [e.name for e in plan.entries]
    assert names.index("jira_search") > names.index("skill_read")
    assert reasons(plan, "jira_search") == (
        "source:mcp",
        "mcp-policy:server-allowlist",
        "skill-policy:open",
    )
    assert plan.entry("jira_search").source == "mcp"


def test_lets_later_groups_override_earlier_names_with_one_entry():
    plan = build_tool_plan({"files": FILES, "workspace": ("read_file",)}, mcp_tools=("read_file",))
    matching = [e for e in plan.entries if e.name == "read_file"]
    assert len(matching) == 1
    assert matching[0].source == "mcp"
    assert matching[0].reasons[:3] == (
        "source:mcp",
        "mcp-policy:server-allowlist",
        "overrides:workspace",
    )


def test_marks_static_data_tools_protocol_disabled_and_supplies_a_handoff_recovery():
    plan = build_tool_plan(GROUPS)
    state = start_segment(GENERAL_TASK_REF, "run:segment:1")
    resolved = resolve_availability(plan, state)
    entry = resolved.entry("inspect_schema")
    assert entry.availability == "protocol-disabled"
    assert entry.recovery == HandoffRecovery(
        target_protocol_id="data-analysis", target_protocol_version=1
    )
    assert entry.reasons[-1] == "protocol:general-task@1:understand:disabled"
    commit = resolved.entry("analysis_requirements_commit")
    assert commit.availability == "protocol-disabled"
    assert commit.recovery is not None
    assert resolved.entry("read_file").availability == "available"
    assert resolved.entry("protocol_handoff").availability == "available"
    # No recovery target the user may not use.
    limited = resolve_availability(plan, state, authorized=(GENERAL_TASK_REF,))
    assert limited.entry("inspect_schema").recovery is None


def test_availability_is_recomputed_per_phase_and_replaces_older_protocol_reasons():
    plan = build_tool_plan(GROUPS)
    state = start_segment(DATA_ANALYSIS_REF, "run:segment:1")
    scope = resolve_availability(plan, state)
    assert scope.entry("inspect_schema").availability == "available"
    assert scope.entry("run_sql_readonly").availability == "protocol-disabled"
    assert scope.entry("run_sql_readonly").recovery is None
    for action in ("inspect_schema", "lookup_values", "data.query.plan"):
        state = record_action(state, action, ActionOutcome())
    execution = resolve_availability(scope, state)
    entry = execution.entry("run_sql_readonly")
    assert entry.availability == "available"
    assert [r for r in entry.reasons if r.startswith("protocol:")] == [
        "protocol:data-analysis@1:execution:allowed"
    ]


def test_switches_availability_after_a_handoff_is_accepted():
    plan = build_tool_plan({"data": ("inspect_schema",)})
    decision = evaluate_handoff(
        start_segment(GENERAL_TASK_REF, "run:segment:1"),
        DATA_ANALYSIS_REF,
        authorized=(GENERAL_TASK_REF, DATA_ANALYSIS_REF),
        user_input="analyse sales",
    )
    assert decision.target_state is not None
    resolved = resolve_availability(plan, decision.target_state)
    assert resolved.available_tools() == ("inspect_schema", "protocol_handoff")
    assert resolved.protocol_disabled_tools() == ("analysis_requirements_commit",)


def test_hidden_tools_are_copied_unchanged_and_never_common():
    plan = build_tool_plan(GROUPS, skill_policy=SkillPolicy(denied_tools=frozenset({"write_file"})))
    resolved = resolve_availability(plan, start_segment(GENERAL_TASK_REF, "r:segment:1"))
    assert resolved.entry("write_file") == plan.entry("write_file")
    state = start_segment(GENERAL_TASK_REF, "r:segment:1")
    decision = authorize_action(state, "write_file", common_actions=plan.common_actions())
    assert isinstance(decision, Rejected)


def test_renders_a_short_instruction_block():
    plan = build_tool_plan(GROUPS)
    resolved = resolve_availability(plan, start_segment(GENERAL_TASK_REF, "r:segment:1"))
    text = render_tool_plan_for_instructions(resolved.entries)
    lines = text.splitlines()
    assert lines[0].startswith("Tools available now: read_file, write_file, skill, skill_read")
    assert "inspect_schema" in lines[1] and "rejected" in lines[1]
    assert lines[2].startswith("If the task needs list_data_sources, inspect_schema")
    assert lines[2].endswith("call protocol_handoff with target data-analysis@1 first.")


# --------------------------------------------------------------------------- §8.11


def test_fix_8_11_mcp_tools_pass_through_the_skill_policy():
    policy = SkillPolicy(
        allowed_tools=frozenset({"read_file"}), denied_tools=frozenset({"jira_delete"})
    )
    plan = build_tool_plan(GROUPS, mcp_tools=("jira_search", "jira_delete"), skill_policy=policy)
    assert not plan.entry("jira_search").exposed
    assert plan.entry("jira_search").reasons[-1] == "skill-policy:not-allowed"
    assert not plan.entry("jira_delete").exposed
    assert plan.entry("jira_delete").reasons[-1] == "skill-policy:denied"


def test_fix_8_11_mcp_data_tools_are_gated_like_data_tools():
    plan = build_tool_plan(
        GROUPS, mcp_tools=("datalink_explore",), data_tools=("datalink_explore",)
    )
    assert plan.entry("datalink_explore").kind == "data"
    assert "datalink_explore" not in plan.common_actions()
    general = start_segment(GENERAL_TASK_REF, "r:segment:1")
    assert resolve_availability(plan, general).entry("datalink_explore").availability == (
        "protocol-disabled"
    )
    decision = authorize_action(general, "datalink_explore", common_actions=plan.common_actions())
    assert isinstance(decision, Rejected)


def test_fix_8_11_deny_beats_always_allow_and_says_so():
    policy = SkillPolicy(denied_tools=frozenset({"run_sql_readonly"}))
    plan = build_tool_plan(GROUPS, always_allow=DATA, skill_policy=policy)
    entry = plan.entry("run_sql_readonly")
    assert not entry.exposed
    assert entry.reasons == (
        "source:data",
        "always-allow:overridden-by-deny",
        "skill-policy:denied",
    )


def test_fix_8_11_colliding_names_yield_one_entry_with_the_reason():
    plan = build_tool_plan({"a": ("tool",), "b": ("tool",)})
    assert [e.name for e in plan.entries].count("tool") == 1
    assert plan.entry("tool").reasons == ("source:b", "overrides:a", "skill-policy:open")
