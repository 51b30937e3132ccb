"""The tool plan: which tools the model is shown, why, and which the protocol allows now.

The plan is advisory (instructions, diagnostics, handoff observations); the runtime
still authorizes every call with ``authorize_action``. It is also where a host learns
the explicit *common* action set that ``authorize_action`` needs: exposed tools that
are neither data nor runtime actions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

from plangate.protocol.actions import (
    HANDOFF_TOOL,
    REQUIREMENTS_COMMIT_TOOL,
    RUNTIME_ACTION_NAMES,
    TOOL_ACTION_ALIASES,
    action_for_tool,
    is_data_action,
)
from plangate.protocol.definitions import (
    DEFINITIONS,
    ProtocolDefinition,
    ProtocolRef,
    ProtocolState,
    allowed_actions,
    protocols_allowing,
)
from plangate.protocol.wire_model import WireModel

__all__ = [
    "PROTOCOL_TOOL_NAMES",
    "SKILL_META_TOOLS",
    "HandoffRecovery",
    "SkillPolicy",
    "ToolPlan",
    "ToolPlanEntry",
    "build_tool_plan",
    "render_tool_plan_for_instructions",
    "resolve_availability",
]

SKILL_META_TOOLS = frozenset({"skill", "skill_search", "skill_read"})
PROTOCOL_TOOL_NAMES = (REQUIREMENTS_COMMIT_TOOL, HANDOFF_TOOL)


class SkillPolicy(WireModel):
    allowed_tools: frozenset[str] | None = None
    """``None`` leaves the set open; a set narrows it to these tools."""
    denied_tools: frozenset[str] = frozenset()


class HandoffRecovery(WireModel):
    action: Literal["protocol-handoff"] = "protocol-handoff"
    target_protocol_id: str
    target_protocol_version: int


class ToolPlanEntry(WireModel):
    name: str
    source: str
    """The group that supplied the tool, ``mcp``, or ``protocol`` for runtime tools."""
    action: str
    kind: Literal["data", "common", "protocol"]
    exposed: bool
    availability: Literal["available", "protocol-disabled"] = "available"
    recovery: HandoffRecovery | None = None
    reasons: tuple[str, ...]


class ToolPlan(WireModel):
    entries: tuple[ToolPlanEntry, ...]

    def entry(self, name: str) -> ToolPlanEntry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def common_actions(self) -> frozenset[str]:
        """Actions of exposed non-data, non-runtime tools: the set to pass as common."""
        return frozenset(e.action for e in self.entries if e.exposed and e.kind == "common")

    def available_tools(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries if e.exposed and e.availability == "available")

    def protocol_disabled_tools(self) -> tuple[str, ...]:
        return tuple(
            e.name for e in self.entries if e.exposed and e.availability == "protocol-disabled"
        )


def _skill_policy_reasons(
    name: str, policy: SkillPolicy, always_allow: Collection[str]
) -> tuple[bool, list[str]]:
    """Exposed?, and the reason trail including any rule that lost."""
    listed = policy.allowed_tools is not None and name in policy.allowed_tools
    if name in policy.denied_tools:
        lost: list[str] = []
        if name in always_allow:
            lost.append("always-allow:overridden-by-deny")
        if listed:
            lost.append("skill-policy:allowed:overridden-by-deny")
        return False, [*lost, "skill-policy:denied"]
    if name in always_allow:
        return True, ["always-allow"]
    if policy.allowed_tools is None:
        return True, ["skill-policy:open"]
    if listed:
        return True, ["skill-policy:allowed"]
    if name in SKILL_META_TOOLS:
        return True, ["skill-meta"]
    return False, ["skill-policy:not-allowed"]


def build_tool_plan(
    groups: Mapping[str, Sequence[str]],
    mcp_tools: Sequence[str] = (),
    always_allow: Collection[str] = (),
    skill_policy: SkillPolicy | None = None,
    *,
    data_tools: Collection[str] = (),
    protocol_tools: Sequence[str] = PROTOCOL_TOOL_NAMES,
    aliases: Mapping[str, str] = TOOL_ACTION_ALIASES,
    is_data_action: Callable[[str], bool] = is_data_action,
) -> ToolPlan:
    """Assemble the static plan: groups in order, then MCP tools, then runtime tools.

    A later tool with an earlier tool's name replaces it in place (one entry, with an
    ``overrides:<source>`` reason). MCP tools pass through the same skill policy as any
    other tool. ``data_tools`` names further tools (typically MCP tools of data servers)
    that must be governed as data even though no phase names them.
    """
    policy = skill_policy or SkillPolicy()
    sourced: dict[str, tuple[str, list[str]]] = {}

    def add(name: str, source: str, reasons: list[str]) -> None:
        if name in sourced:
            reasons = [*reasons, f"overrides:{sourced[name][0]}"]
        sourced[name] = (source, reasons)

    for group, names in groups.items():
        for name in names:
            add(name, group, [f"source:{group}"])
    for name in mcp_tools:
        add(name, "mcp", ["source:mcp", "mcp-policy:server-allowlist"])
    for name in protocol_tools:
        add(name, "protocol", ["source:protocol", "protocol-runtime"])

    entries: list[ToolPlanEntry] = []
    for name, (source, reasons) in sourced.items():
        action = action_for_tool(name, aliases)
        if source == "protocol":
            exposed, trail = True, reasons
        else:
            exposed, policy_reasons = _skill_policy_reasons(name, policy, always_allow)
            trail = [*reasons, *policy_reasons]
        if action in RUNTIME_ACTION_NAMES:
            kind: Literal["data", "common", "protocol"] = "protocol"
        elif is_data_action(action) or name in data_tools:
            kind = "data"
        else:
            kind = "common"
        entries.append(
            ToolPlanEntry(
                name=name,
                source=source,
                action=action,
                kind=kind,
                exposed=exposed,
                reasons=tuple(trail),
            )
        )
    return ToolPlan(entries=tuple(entries))


def resolve_availability(
    plan: ToolPlan,
    state: ProtocolState,
    *,
    authorized: Collection[ProtocolRef] | None = None,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> ToolPlan:
    """The plan as seen from ``state``'s phase: each exposed tool available or disabled.

    Uses exactly the allowed set ``authorize_action`` enforces for the plan's common
    actions. A disabled tool that another (authorized) protocol allows gets a handoff
    recovery. Hidden tools are copied unchanged.
    """
    allowed = set(allowed_actions(state, plan.common_actions(), definitions=definitions))
    tag = f"protocol:{state.protocol}:{state.phase}"
    resolved: list[ToolPlanEntry] = []
    for entry in plan.entries:
        if not entry.exposed:
            resolved.append(entry)
            continue
        # Data tools no phase names (e.g. declared MCP data tools) are never in the
        # allowed set: common actions exclude data, so they stay disabled everywhere.
        available = entry.action in allowed
        recovery = None
        if not available:
            targets = [
                ref
                for ref in protocols_allowing(
                    entry.action, exclude=state.protocol, definitions=definitions
                )
                if authorized is None or ref in authorized
            ]
            if targets:
                recovery = HandoffRecovery(
                    target_protocol_id=targets[0].id, target_protocol_version=targets[0].version
                )
        reasons = tuple(r for r in entry.reasons if not r.startswith("protocol:"))
        resolved.append(
            entry.model_copy(
                update={
                    "availability": "available" if available else "protocol-disabled",
                    "recovery": recovery,
                    "reasons": (*reasons, f"{tag}:{'allowed' if available else 'disabled'}"),
                }
            )
        )
    return ToolPlan(entries=tuple(resolved))


def render_tool_plan_for_instructions(entries: Sequence[ToolPlanEntry]) -> str:
    """A few lines telling the model what it can call now and how to unlock the rest."""
    exposed = [e for e in entries if e.exposed]
    available = [e.name for e in exposed if e.availability == "available"]
    disabled = [e for e in exposed if e.availability == "protocol-disabled"]
    lines = [f"Tools available now: {', '.join(available) or '(none)'}."]
    if disabled:
        lines.append(
            "Disabled in the current protocol phase (calls are rejected before they run): "
            + ", ".join(e.name for e in disabled)
            + "."
        )
        by_target: dict[str, list[str]] = {}
        for entry in disabled:
            if entry.recovery is not None:
                target = (
                    f"{entry.recovery.target_protocol_id}@{entry.recovery.target_protocol_version}"
                )
                by_target.setdefault(target, []).append(entry.name)
        for target, names in by_target.items():
            lines.append(
                f"If the task needs {', '.join(names)}, call {HANDOFF_TOOL} with target "
                f"{target} first."
            )
    return "\n".join(lines)
