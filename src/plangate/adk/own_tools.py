"""plangate's own tools, known by the objects it mounted, and the names they reserve.

ADK finds the tool a model calls by its name, and a later tool of the same name replaces
an earlier one. A host, policy-file or MCP tool named ``exit_plan_mode`` or
``spawn_subagent`` would therefore take the place of plangate's tool and, judged by its
name, run while a plan is being made. So the gate never trusts a name:

* every tool object plangate creates is marked here (``mark_own``) and the gate asks
  ``is_own(tool)`` -- the object, not its name, says "plangate's plan tool";
* the names are reserved: a namesake is refused when the agent is built
  (``refuse_namesakes``, ``refuse_reserved_rules``) or an MCP server is attached
  (``reserved_name_error``), and again at call time (``reserved_refusal``), because a
  toolset resolves its tools lazily and an MCP server may change its list later.

The marks are kept per object, not per runtime: the sub-agent tools are created before
``setup_plan`` makes a runtime, and a marked object is plangate's wherever it is mounted.
Held weakly, so a dropped agent's tools are not kept alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any, TypeVar

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.tools import BaseTool

from plangate.adk.boundary import Boundary
from plangate.errors import CodedError, ErrorCode, error_result
from plangate.plan.gate import PLAN_TOOL_NAMES
from plangate.policy.policy_file import PolicyFile
from plangate.protocol.actions import HANDOFF_TOOL, REQUIREMENTS_COMMIT_TOOL

__all__ = [
    "RESERVED_TOOL_NAMES",
    "ToolNameReserved",
    "guard_names",
    "is_own",
    "mark_own",
    "refuse_namesakes",
    "refuse_reserved_rules",
    "reserved_name_error",
    "reserved_refusal",
]

# What each reserved name is, for the error. ``todo_write`` is not reserved: it is the
# reference agent's tool, not part of the library, and the gate gives its name no rights.
RESERVED_TOOL_NAMES: dict[str, str] = {
    **{name: "plan tool" for name in sorted(PLAN_TOOL_NAMES)},
    "spawn_subagent": "sub-agent tool",
    "dynamic_subagent": "sub-agent tool",
    HANDOFF_TOOL: "protocol tool",
    REQUIREMENTS_COMMIT_TOOL: "protocol tool",
}

_T = TypeVar("_T", bound=BaseTool)
_own: weakref.WeakSet[BaseTool] = weakref.WeakSet()


class ToolNameReserved(CodedError):
    """A tool, policy rule or MCP tool carries the name of one of plangate's tools."""


def mark_own(tool: _T) -> _T:
    """Record ``tool`` as one plangate created; returns it."""
    _own.add(tool)
    return tool


def is_own(tool: object) -> bool:
    """``tool`` is an object plangate created (its name then says which tool it is).

    A call for one of plangate's tools that is not offered this step (``enter_plan_mode``
    while a plan is being made) reaches the gate as ADK's stand-in for a tool not found,
    a bare ``BaseTool`` that never runs: with the names reserved, it can only mean
    plangate's tool, and the gate answers it as such.
    """
    if type(tool) is BaseTool:
        return tool.name in RESERVED_TOOL_NAMES
    try:
        return tool in _own
    except TypeError:  # not weak-referenceable: not one of ours
        return False


def reserved_name_error(name: str, what: str) -> ToolNameReserved:
    """The refusal of ``what`` (e.g. "MCP tool 'subagent' of server 'spawn'"), which
    is exposed as ``name``, a name of plangate's."""
    kind = RESERVED_TOOL_NAMES[name]
    return ToolNameReserved(
        ErrorCode.TOOL_NAME_RESERVED,
        f"{what} is named '{name}', the name of plangate's {kind} '{name}'; plangate's "
        "tool names are reserved, so it was not mounted",
        f"rename {what}",
        tool=name,
        reserved_by=f"plangate {kind}",
    )


def reserved_refusal(tool: Any) -> dict[str, Any] | None:
    """The call-time check: a namesake that reached the model anyway is refused."""
    name = getattr(tool, "name", "")
    if name not in RESERVED_TOOL_NAMES or is_own(tool):
        return None
    error = reserved_name_error(name, f"tool '{name}' ({type(tool).__name__})")
    return error_result(
        error.code,
        error.message.replace("it was not mounted", "the call was refused and did not run"),
        error.hint,
        **error.fields,
    )


def guard_names(boundary: Boundary) -> None:
    """Put the call-time check first in ``boundary`` (once): a namesake is refused before
    any gate judges it."""
    if all(check is not _refuse_namesake for _, check in boundary.checks):
        boundary.add(_refuse_namesake, order=-100)


async def _refuse_namesake(
    tool: Any, args: dict[str, Any], tool_context: Any
) -> dict[str, Any] | None:
    return reserved_refusal(tool)


def refuse_namesakes(agent: BaseAgent) -> None:
    """Raise ``ToolNameReserved`` for a tool of ``agent`` or an agent below it that carries
    a reserved name. Toolsets are resolved later, per step; ``reserved_refusal`` covers
    them."""
    for governed in _llm_agents(agent):
        for tool in governed.tools:
            name = _tool_name(tool)
            if name in RESERVED_TOOL_NAMES and not is_own(tool):
                raise reserved_name_error(name, _describe(tool, governed.name))


def refuse_reserved_rules(policy: PolicyFile | None, source: str) -> None:
    """Raise ``ToolNameReserved`` for a policy rule that names one of plangate's tools:
    the gate governs those, and a rule could only describe a namesake."""
    for rule in policy.tool if policy is not None else ():
        if rule.name in RESERVED_TOOL_NAMES:
            raise reserved_name_error(rule.name, f"the tool rule '{rule.name}' of {source}")


def _tool_name(tool: Any) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    # A plain function becomes a FunctionTool of the same name.
    return getattr(tool, "__name__", "") if callable(tool) else ""


def _describe(tool: Any, agent_name: str) -> str:
    origin = getattr(tool, "func", tool)
    module = getattr(origin, "__module__", None) or type(tool).__module__
    return f"the tool '{_tool_name(tool)}' of agent '{agent_name}' ({module})"


def _llm_agents(agent: BaseAgent) -> Iterator[LlmAgent]:
    if isinstance(agent, LlmAgent):
        yield agent
    for child in agent.sub_agents:
        yield from _llm_agents(child)
