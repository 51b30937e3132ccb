"""``PlanOptions``: the seed's parameters with the seed's defaults, plus durability and gate mode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from plangate.plan.gate import (
    DEFAULT_READONLY_SUBAGENT_TYPES,
    DEFAULT_READONLY_TOOL_NAMES,
    DEFAULT_WRITE_TOOL_NAMES,
    GatePolicy,
)
from plangate.plan.prompts import DEFAULT_PLAN_AWARENESS_PROMPT, DEFAULT_PLAN_MODE_PROMPT
from plangate.plan.record import ApprovalEvent

__all__ = ["ApprovalCallback", "PlanOptions"]

ApprovalCallback = Callable[[ApprovalEvent], Awaitable[None] | None]


@dataclass(frozen=True)
class PlanOptions:
    state_key_prefix: str = "plan"
    """Session-state key prefix; the record is mirrored under ``<prefix>:<branch>``."""
    plan_prompt: str = DEFAULT_PLAN_MODE_PROMPT
    awareness_prompt: str = DEFAULT_PLAN_AWARENESS_PROMPT
    write_tool_names: frozenset[str] = DEFAULT_WRITE_TOOL_NAMES
    """Used by ``gate_mode="denylist"``; in the default mode every undeclared tool is denied."""
    inject_prompt: bool = True
    inject_awareness: bool = True
    force_enter_plan_state_key: str | None = "agent_mode"
    force_enter_plan_state_value: str = "plan"
    on_approval: ApprovalCallback | None = None
    """Called once per applied plan decision (approve or reject), never for ignored replies."""
    readonly_subagent_types: frozenset[str] = DEFAULT_READONLY_SUBAGENT_TYPES
    readonly_tool_names: frozenset[str] = DEFAULT_READONLY_TOOL_NAMES
    # -- additions ----------------------------------------------------------------------
    gate_mode: Literal["default_deny", "denylist"] = "default_deny"
    database_url: str | None = None
    """Where plans and the journal live; default ``PLANGATE_DATABASE_URL`` or an embedded
    SQLite file ``.plangate/plangate.db``."""
    branch: str | None = None
    """Plan branch; defaults to the name of the agent ``setup_plan`` mounts on."""
    agent_state_value: str = "agent"
    """The selection written back after approval, so a still-set ``plan`` cannot clobber
    the approved plan."""
    todos_state_prefix: str | None = "todos"
    """Where the implementation's todo list lives in session state (``<prefix>:<branch>``,
    as ``todo_write`` keeps it). When every todo written after an approval is completed,
    the plan is finished and the agent is offered Plan Mode again; None disables that."""

    policy_file: str | Path | None = None
    """A policy file (``.plangate/policy.toml``) for tools that are not plangate's: their
    effect and allow/ask/deny per mode. Read when Plan Mode is mounted; a missing or bad
    file is an error then (:class:`~plangate.policy.policy_file.PolicyFileError`)."""
    workspace: str | Path | None = None
    """The folder the path arguments of host, policy-file and MCP tools are relative to,
    and that they may not leave (``build_coding_agent`` passes its workspace). Default:
    the project of the policy file (the folder holding its ``.plangate``), else the
    current directory."""

    def __post_init__(self) -> None:
        if not self.state_key_prefix or self.state_key_prefix.startswith("temp:"):
            raise ValueError("state_key_prefix must be non-empty and must not use 'temp:'")
        if self.force_enter_plan_state_value == self.agent_state_value:
            raise ValueError("force_enter_plan_state_value and agent_state_value must differ")

    @property
    def gate_policy(self) -> GatePolicy:
        return GatePolicy(
            mode=self.gate_mode,
            write_tool_names=frozenset(self.write_tool_names),
            readonly_tool_names=frozenset(self.readonly_tool_names),
            readonly_subagent_types=frozenset(self.readonly_subagent_types),
        )

    def state_key(self, branch: str) -> str:
        return f"{self.state_key_prefix}:{branch}" if branch else self.state_key_prefix

    def todos_state_key(self, branch: str) -> str | None:
        if not self.todos_state_prefix:
            return None
        return f"{self.todos_state_prefix}:{branch}" if branch else self.todos_state_prefix
