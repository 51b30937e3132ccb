"""The plan gate: one pure decision per tool call, default-deny while a plan is being made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast

from pydantic import BaseModel, ConfigDict

from plangate.errors import ErrorCode, error_result
from plangate.plan.record import GATE_ACTIVE_STATUSES, PlanRecord, PlanStatus
from plangate.policy.effects import Effect

__all__ = [
    "DEFAULT_READONLY_SUBAGENT_TYPES",
    "DEFAULT_READONLY_TOOL_NAMES",
    "DEFAULT_WRITE_TOOL_NAMES",
    "PLAN_TOOL_NAMES",
    "GateDecision",
    "GatePolicy",
    "ToolCall",
    "decide",
]

PLAN_TOOL_NAMES = frozenset(
    {"enter_plan_mode", "update_plan_content", "exit_plan_mode", "ask_user_question"}
)
DEFAULT_WRITE_TOOL_NAMES = frozenset(
    {
        "Write",
        "Edit",
        "Bash",
        "todo_write",
        "task_create",
        "task_update",
        "create_goal",
        "update_goal",
    }
)
DEFAULT_READONLY_TOOL_NAMES = frozenset({"Read", "Grep", "Glob", "webfetch", "websearch"})
DEFAULT_READONLY_SUBAGENT_TYPES = frozenset({"Explore", "Plan"})


class GatePolicy(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Literal["default_deny", "denylist"] = "default_deny"
    """``default_deny`` runs only tools known to be read-only; ``denylist`` reproduces the
    plain name list of the original design (block ``write_tool_names``, allow the rest)."""
    write_tool_names: frozenset[str] = DEFAULT_WRITE_TOOL_NAMES
    readonly_tool_names: frozenset[str] = DEFAULT_READONLY_TOOL_NAMES
    readonly_subagent_types: frozenset[str] = DEFAULT_READONLY_SUBAGENT_TYPES


class ToolCall(NamedTuple):
    """One tool call as the gate judges it; a tuple because one is built per call."""

    name: str
    args: Mapping[str, Any]
    effect: Effect | None = None
    contained: bool = False
    """The tool runs its commands in an available OS sandbox whose profile follows the
    plan state, so a read-only filesystem holds what the shell parser cannot prove."""
    own: bool = False
    """The tool is an object plangate mounted (a plan, sub-agent or protocol tool), as
    the host knows by identity. Only then does its name give it a plan tool's rights: a
    namesake is judged like any other tool."""


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str
    message: str = ""
    hint: str = ""
    """What the model can do instead (a refusal only)."""
    tool: str = ""
    plan_status: str = ""

    def to_result(self, note: str = "") -> dict[str, Any]:
        """The refusal as a tool result; ``note`` is a sentence the host adds."""
        message = f"{self.message} {note}" if note else self.message
        return error_result(
            ErrorCode.PLAN_MODE_GATE,
            message,
            self.hint,
            tool=self.tool,
            plan_status=self.plan_status,
        )


_ALLOW_NO_PLAN = GateDecision(True, "no active plan")

# What a corrupt state is judged as: a plan being made, so exactly the read-only calls run.
_CORRUPT_STAND_IN = PlanRecord(
    id="", status=PlanStatus.EXPLORING, objective="", started_at=0.0, updated_at=0.0
)


def _decide_corrupt(call: ToolCall, policy: GatePolicy, reason: str) -> GateDecision:
    """A corrupt stored state gates like a plan being made, with the way out in the refusal.

    The plan tools are refused too: there is no readable plan to update, submit or record
    a question in (``ask_user_question`` stores it in the plan), so the model is told to
    ask in plain text instead.
    """
    if _is_plan_tool(call):
        why = "there is no readable plan to update, submit or record a question in"
        alternative = "ask in plain text and end your turn"
    else:
        verdict = decide(call, _CORRUPT_STAND_IN, policy)
        if verdict.allowed:
            return verdict
        why, alternative = verdict.reason, "use read-only tools only"
    message = (
        f"tool '{call.name}' is blocked because the stored plan state is corrupt ({reason}) "
        f"and {why}. Only read-only tools run until the user resets it."
    )
    hint = (
        f"{alternative}, and ask the user to leave Plan Mode (/plan off, the Agent toggle or "
        "the editor's default mode), which archives the corrupt state and resets it"
    )
    return GateDecision(False, f"corrupt plan state: {why}", message, hint, call.name, "corrupt")


def decide(
    call: ToolCall,
    record: PlanRecord | None,
    policy: GatePolicy,
    *,
    unreadable: str | None = None,
    corrupt: bool = False,
    selection_active: bool = False,
) -> GateDecision:
    """Decide whether ``call`` may run given the plan record.

    ``unreadable`` carries the reason when the stored plan could not be read: the gate
    then fails closed. With ``corrupt`` the database answered but the stored state is not
    one plangate writes: only what is read-only runs, as while planning. Otherwise (the
    database is unreachable) nothing but the plan tools passes. ``selection_active`` says
    the user selected Plan Mode, which changes how an ``enter_plan_mode`` call is answered.
    """
    if unreadable is not None:
        if corrupt:
            return _decide_corrupt(call, policy, unreadable)
        if _is_plan_tool(call):
            return GateDecision(True, "plan tool")
        return _deny(
            call,
            "unreadable",
            f"the stored plan state could not be read ({unreadable}), so nothing with "
            "side effects runs",
            "ask the user to leave Plan Mode (/plan off) or restore the plan",
        )
    if record is None or record.status not in GATE_ACTIVE_STATUSES:
        return _ALLOW_NO_PLAN
    name = call.name
    if not call.own:
        return _decide_by_effect(call, record, policy)
    if name in PLAN_TOOL_NAMES:
        if name != "enter_plan_mode":
            return _ALLOW_PLAN_TOOL
        if selection_active:
            why = "the user selected Plan Mode in the UI, so entry is automatic"
            hint = (
                "start exploring with read-only tools or an Explore sub-agent, or ask_user_question"
            )
        else:
            why = "Plan Mode is already active"
            hint = _hint(record.status)
        return _deny(call, record.status.value, why, hint)
    if name == "spawn_subagent":
        kind = call.args.get("subagent_type")
        if isinstance(kind, str) and kind in policy.readonly_subagent_types:
            return GateDecision(True, f"read-only sub-agent {kind}")
        allowed = ", ".join(sorted(policy.readonly_subagent_types)) or "none"
        return _deny(
            call,
            record.status.value,
            f"sub-agent type {kind!r} may write; only read-only archetypes run while planning",
            f"spawn one of: {allowed}",
        )
    if name == "dynamic_subagent":
        tools = call.args.get("tools")
        if (
            isinstance(tools, list)
            and tools
            and all(
                isinstance(t, str) and t in policy.readonly_tool_names
                for t in cast("list[object]", tools)
            )
        ):
            return GateDecision(True, "read-only dynamic sub-agent")
        allowed = ", ".join(sorted(policy.readonly_tool_names))
        return _deny(
            call,
            record.status.value,
            "a dynamic sub-agent needs an explicit, non-empty list of read-only tools",
            f"pass tools chosen from: {allowed}",
        )
    return _decide_by_effect(call, record, policy)


def _is_plan_tool(call: ToolCall) -> bool:
    return call.own and call.name in PLAN_TOOL_NAMES


def _decide_by_effect(call: ToolCall, record: PlanRecord, policy: GatePolicy) -> GateDecision:
    """Every tool but plangate's plan and sub-agent tools: judged by what it declares (or,
    in ``denylist`` mode, by the write list); a plan tool's name gives a namesake nothing."""
    name, effect = call.name, call.effect
    if policy.mode == "denylist":
        if name in policy.write_tool_names:
            return _refusal(name, record.status, "it is a write tool")
        return _ALLOW_NOT_LISTED
    if effect is _READ:
        return _ALLOW_DECLARED_READ
    # A name on the read-only list never outranks a declaration: a tool named "Read" that
    # declares writes is a write tool.
    if effect is None and name in policy.readonly_tool_names:
        return _ALLOW_LISTED_READ
    if effect is _SHELL:
        return _decide_shell(call, record.status)
    why = "it has side effects" if effect is not None else "it is not declared read-only"
    return _refusal(name, record.status, why)


# Members read once: an enum member lookup through its class costs more than the rest
# of a decision.
_READ, _SHELL = Effect.READ, Effect.SHELL
_ALLOW_PLAN_TOOL = GateDecision(True, "plan tool")
_ALLOW_NOT_LISTED = GateDecision(True, "not on the write list")
_ALLOW_DECLARED_READ = GateDecision(True, "declared read-only")
_ALLOW_LISTED_READ = GateDecision(True, "listed read-only")

# A refusal depends only on the tool's name, the plan status and why; the gate runs
# before every tool call, so each is built once.
_refusals: dict[tuple[str, PlanStatus, str], GateDecision] = {}
_MAX_REFUSALS = 4096


def _refusal(name: str, status: PlanStatus, why: str) -> GateDecision:
    key = (name, status, why)
    refusal = _refusals.get(key)
    if refusal is None:
        refusal = _deny(ToolCall(name, {}), status.value, why, _hint(status))
        if len(_refusals) < _MAX_REFUSALS:
            _refusals[key] = refusal
    return refusal


def _decide_shell(call: ToolCall, status: PlanStatus) -> GateDecision:
    """Three verdicts: proven read-only runs; unproven runs only inside the read-only
    sandbox; an explicit write is refused, naming the part that writes."""
    from plangate.policy.shell import ShellKind, classify_command

    command = call.args.get("command")
    if not isinstance(command, str):
        return _deny(call, status.value, "the shell command is missing", _hint(status))
    verdict = classify_command(command)
    if verdict.kind is ShellKind.READ_ONLY:
        return GateDecision(True, "shell command proven read-only")
    if verdict.kind is ShellKind.UNPROVEN and call.contained:
        return GateDecision(True, "shell command contained by the read-only sandbox")
    if verdict.kind is ShellKind.WRITES:
        why = f"the shell command has side effects: {verdict.reason}"
    else:
        why = (
            f"the shell command is not provably read-only ({verdict.reason}) and no "
            "sandbox contains it on this machine"
        )
    instead = verdict.hint or "use a read-only command (ls, cat, grep, git status/log/diff, ...)"
    return _deny(call, status.value, why, f"{instead}; or {_hint(status)}")


def _hint(status: PlanStatus) -> str:
    if status is PlanStatus.PENDING_APPROVAL:
        return "end your turn; the plan is waiting for the user's approval"
    if status is PlanStatus.PENDING_ENTER:
        return "wait for the user to confirm Plan Mode"
    return (
        "explore with read-only tools, write the plan with update_plan_content and submit "
        "it with exit_plan_mode"
    )


def _deny(call: ToolCall, status: str, why: str, hint: str) -> GateDecision:
    message = (
        f"tool '{call.name}' is blocked while the plan is '{status}' ({why}). Only read-only "
        "tools run until the user approves the plan."
    )
    return GateDecision(False, why, message, hint, call.name, status)
