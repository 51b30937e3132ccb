"""Protocol actions: the names the phase machines govern, and how tool names map onto them.

A tool is governed under its *action* name. Most tools are their own action; the few
whose action lives in a dotted namespace are listed in ``TOOL_ACTION_ALIASES``, which
is data so a host can extend it without touching any branch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "DATA_ACTION_NAMES",
    "EVIDENCE_BIND_ACTION",
    "GENERAL_ANSWER_COMMIT_ACTION",
    "HANDOFF_ACTION",
    "HANDOFF_TOOL",
    "QUERY_PLAN_ACTION",
    "REQUIREMENTS_COMMIT_ACTION",
    "REQUIREMENTS_COMMIT_TOOL",
    "RESULT_VALIDATE_ACTION",
    "RUNTIME_ACTION_NAMES",
    "TOOL_ACTION_ALIASES",
    "action_for_tool",
    "is_data_action",
    "tool_for_action",
]

HANDOFF_TOOL = "protocol_handoff"
REQUIREMENTS_COMMIT_TOOL = "analysis_requirements_commit"

HANDOFF_ACTION = "protocol.handoff.propose"
REQUIREMENTS_COMMIT_ACTION = "analysis.requirements.commit"
GENERAL_ANSWER_COMMIT_ACTION = "general.answer.commit"
QUERY_PLAN_ACTION = "data.query.plan"
RESULT_VALIDATE_ACTION = "analysis.result.validate"
EVIDENCE_BIND_ACTION = "analysis.evidence.bind"

DATA_ACTION_NAMES: frozenset[str] = frozenset(
    {
        "list_data_sources",
        "inspect_schema",
        "lookup_values",
        "preview_table",
        "run_sql_readonly",
        QUERY_PLAN_ACTION,
        RESULT_VALIDATE_ACTION,
        EVIDENCE_BIND_ACTION,
    }
)
"""Actions that touch the data sources or the analysis chain built on them."""

RUNTIME_ACTION_NAMES: frozenset[str] = frozenset(
    {HANDOFF_ACTION, REQUIREMENTS_COMMIT_ACTION, GENERAL_ANSWER_COMMIT_ACTION}
)
"""Actions the protocol runtime itself owns; never part of a caller's "common" set."""

TOOL_ACTION_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        HANDOFF_TOOL: HANDOFF_ACTION,
        REQUIREMENTS_COMMIT_TOOL: REQUIREMENTS_COMMIT_ACTION,
        "plan_query": QUERY_PLAN_ACTION,
        "validate_result": RESULT_VALIDATE_ACTION,
        "bind_evidence": EVIDENCE_BIND_ACTION,
    }
)
"""Model-facing tool name → governed action name, for tools not named after their action."""


def action_for_tool(tool_name: str, aliases: Mapping[str, str] = TOOL_ACTION_ALIASES) -> str:
    """The action a tool call is governed as; a tool without an alias is its own action."""
    return aliases.get(tool_name, tool_name)


def tool_for_action(action: str, aliases: Mapping[str, str] = TOOL_ACTION_ALIASES) -> str:
    """The tool name the model calls to perform ``action`` (the inverse of the alias map)."""
    for tool_name, aliased in aliases.items():
        if aliased == action:
            return tool_name
    return action


def is_data_action(action: str) -> bool:
    return action in DATA_ACTION_NAMES
