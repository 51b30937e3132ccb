"""Sub-agents for the reference coding agent: ``spawn_subagent`` and ``dynamic_subagent``.

``spawn_subagent`` starts one of three archetypes -- ``Explore`` and ``Plan`` (read-only)
and ``general-purpose`` (every tool of the parent except the spawn tools) --
``dynamic_subagent`` starts a child with exactly the parent tools it names. The child
is an ``LlmAgent`` on the parent's model, run by a nested ``Runner`` in a fresh
in-memory session, and only its final text comes back to the parent.

The child runs under the parent's gate: the parent's authorization boundary (the very
same object) is first in the child's ``before_tool_callback``, and while the child runs
``governing_scope`` names the parent's plan scope, so every child tool call is judged
against the parent's plan although the child has a session of its own. The child has no
plan tools and cannot change that plan.

A read-only archetype is trusted by the effects its tools declare, not by its name:
``Explore`` refuses to start if a tool it would get is not declared ``Effect.READ``.

Both tools declare ``Effect.SPAWN``; the plan gate decides from their arguments whether
a spawn may run while a plan is being made. Bad input and a failing child come back as
``{"error": "..."}``, never as an exception.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import BaseTool, ToolContext
from google.genai import types

from plangate.adk.boundary import Boundary, boundary_of
from plangate.adk.contract import DeclaredOnceFunctionTool, StreamingMode
from plangate.adk.own_tools import RESERVED_TOOL_NAMES, is_own, mark_own
from plangate.adk.scope import governing_scope, scope_of
from plangate.adk.setup import plan_runtime
from plangate.adk.tools import PlanToolSet
from plangate.errors import ErrorCode, error_result
from plangate.policy.effects import Effect, declare_effect, effect_of

__all__ = ["ARCHETYPES", "SPAWN_TOOL_NAMES", "Archetype", "subagent_tools"]

SPAWN_TOOL_NAMES = frozenset({"spawn_subagent", "dynamic_subagent"})

_READ_ONLY_RULES = """This is a READ-ONLY task. You must not create, modify, move or delete
any file, and must not run anything that changes state: you only look. Your tools are
read-only; if something needs changing, say so in your report instead."""

EXPLORE_INSTRUCTION = f"""You are Explore, a sub-agent that searches a code base for
another agent.
{_READ_ONLY_RULES}

Find the files that matter for the request (Glob for names, Grep for contents), read the
relevant code, and report your findings. Cite every finding with its file path and line
numbers (path:line). Be thorough but concise; end with a short summary of what you found
and what remains unclear. Only your final message is passed back."""

PLAN_INSTRUCTION = f"""You are Plan, a sub-agent that designs an implementation plan for
another agent.
{_READ_ONLY_RULES}

Explore the code the request touches, then write a step-by-step implementation plan: the
order of the steps, which functions and files each step changes, risks and trade-offs,
and how to verify the result. Cite code with path:line. Only your final message is passed
back, and it must end with this section:

### Critical files for implementation
- path/to/file.py - why it matters
(list the 3-5 files most critical for implementing the plan)"""

GENERAL_INSTRUCTION = """You are a sub-agent doing one task for another agent. Use your
tools to complete the task, then reply with a concise report of what you did and found,
citing file paths and line numbers where useful. Only your final message is passed back."""


@dataclass(frozen=True)
class Archetype:
    name: str
    instruction: str
    tool_names: tuple[str, ...] | None
    """The parent tools it gets; ``None`` means all of them (except the spawn tools)."""
    optional_tool_names: tuple[str, ...] = ()
    """Added when the parent has them."""
    read_only: bool = False
    """Every tool it gets must be declared ``Effect.READ``, or it refuses to start."""


ARCHETYPES: dict[str, Archetype] = {
    "Explore": Archetype(
        "Explore",
        EXPLORE_INSTRUCTION,
        ("Read", "Glob", "Grep"),
        optional_tool_names=("webfetch",),
        read_only=True,
    ),
    "Plan": Archetype("Plan", PLAN_INSTRUCTION, ("Read", "Glob", "Grep"), read_only=True),
    "general-purpose": Archetype("general-purpose", GENERAL_INSTRUCTION, None),
}
_ALIASES = {"default": "general-purpose"}


def subagent_tools(parent_tools: list[BaseTool]) -> list[BaseTool]:
    """``spawn_subagent`` and ``dynamic_subagent`` over a snapshot of ``parent_tools``.

    The snapshot is taken now, so spawn tools appended to the same list later are never
    handed to a child, and plan tools are dropped: a child cannot recurse or plan.
    """
    inheritable = [t for t in parent_tools if not _excluded(t)]
    by_name: dict[str, Any] = {}
    for tool in inheritable:
        name = _tool_name(tool)
        if name:
            by_name.setdefault(name, tool)
    choices = ", ".join([*ARCHETYPES, *_ALIASES])

    async def spawn_subagent(
        subagent_type: str, prompt: str, tool_context: ToolContext
    ) -> dict[str, Any]:
        """Start a sub-agent for a self-contained task; only its final text comes back.

        Args:
          subagent_type: "Explore" (read-only: find files, read code, report findings with
            paths and line numbers), "Plan" (read-only: design an implementation plan
            ending with the critical files) or "general-purpose" (alias "default": every
            tool you have except spawning; may change files once a plan is approved).
          prompt: The complete task for the sub-agent; it sees nothing else of this
            conversation, so include all the context it needs.

        Returns:
          {"subagent_type", "text", "tool_calls"} or {"error": "..."}.
        """
        if not isinstance(subagent_type, str) or not subagent_type.strip():
            return _invalid(f"'subagent_type' must be one of {choices}")
        archetype = ARCHETYPES.get(_ALIASES.get(subagent_type.strip(), subagent_type.strip()))
        if archetype is None:
            return _invalid(f"unknown subagent_type {subagent_type!r}; choose one of {choices}")
        if not _is_text(prompt):
            return _invalid("'prompt' must be a non-empty string describing the task")
        if archetype.tool_names is None:
            tools = list(inheritable)
        else:
            names = [n for n in archetype.tool_names if n in by_name]
            names += [n for n in archetype.optional_tool_names if n in by_name]
            tools = [by_name[n] for n in names]
        if not tools:
            return error_result(
                ErrorCode.SUBAGENT_UNAVAILABLE,
                f"the parent has none of the tools the {archetype.name} sub-agent needs "
                f"({', '.join(archetype.tool_names or ())})",
                "do the task with your own tools, or use a general-purpose sub-agent",
            )
        if archetype.read_only:
            untrusted = [t for t in tools if effect_of(t) is not Effect.READ]
            if untrusted:
                detail = ", ".join(
                    f"'{_tool_name(t)}' (declared {_effect_text(t)})" for t in untrusted
                )
                return error_result(
                    ErrorCode.SUBAGENT_UNTRUSTED,
                    f"the {archetype.name} sub-agent is read-only but would get tools not "
                    f"declared read-only: {detail}; it was not started",
                    "use read-only tools or a general-purpose sub-agent",
                )
        return await _run_child(
            archetype.name, tools, archetype.instruction, prompt.strip(), tool_context
        )

    async def dynamic_subagent(
        tools: list[str], prompt: str, tool_context: ToolContext
    ) -> dict[str, Any]:
        """Start a sub-agent with exactly the tools you name; only its final text comes back.

        Args:
          tools: Names of your tools the sub-agent gets, e.g. ["Read", "Grep"]. While a
            plan is being made only read-only tools may be named.
          prompt: The complete task for the sub-agent; it sees nothing else of this
            conversation, so include all the context it needs.

        Returns:
          {"subagent_type": "dynamic", "text", "tool_calls"} or {"error": "..."}.
        """
        available = ", ".join(sorted(by_name)) or "none"
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            return _invalid(f"'tools' must be a list of tool names chosen from: {available}")
        names = list(dict.fromkeys(t.strip() for t in tools))
        if not names:
            return _invalid(f"'tools' must name at least one tool, chosen from: {available}")
        unknown = [n for n in names if n not in by_name]
        if unknown:
            return _invalid(
                f"unknown tool(s) {', '.join(map(repr, unknown))}; available: {available}"
            )
        if not _is_text(prompt):
            return _invalid("'prompt' must be a non-empty string describing the task")
        instruction = GENERAL_INSTRUCTION + "\nYour tools: " + ", ".join(names) + "."
        return await _run_child(
            "dynamic", [by_name[n] for n in names], instruction, prompt.strip(), tool_context
        )

    return [_spawn_tool(spawn_subagent), _spawn_tool(dynamic_subagent)]


async def _run_child(
    kind: str,
    tools: Sequence[Any],
    instruction: str,
    prompt: str,
    tool_context: ToolContext,
) -> dict[str, Any]:
    """Run one child to completion under the parent's boundary and plan scope."""
    invocation = tool_context.get_invocation_context()
    lineage = list(_lineage(invocation.agent))
    parent = next((a for a in lineage if isinstance(a, LlmAgent)), None)
    if parent is None:
        return _failed("no LLM agent to take the model from")
    boundary = _nearest(lineage, boundary_of)
    runtime = _nearest(lineage, plan_runtime)
    try:
        child = _child_agent(kind, parent, tools, instruction, boundary)
    except Exception as exc:  # e.g. a model name that cannot be resolved
        return _failed(f"{type(exc).__name__}: {exc}")

    # The child has its own session; the contextvar keeps its calls on the parent's plan.
    token = governing_scope.set(scope_of(tool_context, runtime.branch)) if runtime else None
    try:
        return await _drive(kind, child, prompt, invocation, tool_context)
    except Exception as exc:  # a failing child is a tool result, not a crashed parent run
        return _failed(f"{type(exc).__name__}: {exc}")
    finally:
        if token is not None:
            governing_scope.reset(token)


def _child_agent(
    kind: str,
    parent: LlmAgent,
    tools: Sequence[Any],
    instruction: str,
    boundary: Boundary | None,
) -> LlmAgent:
    child = LlmAgent(
        name="subagent_" + kind.replace("-", "_").lower(),
        model=parent.canonical_model,
        instruction=instruction,
        tools=list(tools),
        description=f"{kind} sub-agent of {parent.name}",
    )
    if boundary is not None:
        # The parent's boundary object itself, so a check added to it later governs the
        # child too; the child has no callbacks of its own that could run before it.
        child.before_tool_callback = [boundary]
    return child


async def _drive(
    kind: str, child: LlmAgent, prompt: str, invocation: Any, tool_context: ToolContext
) -> dict[str, Any]:
    plugins = list(invocation.plugin_manager.plugins)
    runner = Runner(
        app=App(name=invocation.app_name, root_agent=child, plugins=plugins),
        session_service=InMemorySessionService(),
    )
    # The parent's runner owns its plugins; they see the child's calls but stay open.
    runner.plugin_manager.set_skip_closing_plugins(True)
    try:
        session = await runner.session_service.create_session(
            app_name=invocation.app_name,
            user_id=invocation.user_id,
            state=_inherited_state(tool_context),
            session_id=f"{kind}-{uuid.uuid4().hex}",
        )
        tool_calls = 0
        final = ""
        error = ""
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        async with contextlib.aclosing(
            runner.run_async(
                user_id=session.user_id,
                session_id=session.id,
                new_message=message,
                run_config=_nested_run_config(invocation.run_config),
            )
        ) as events:
            async for event in events:
                tool_calls += len(event.get_function_calls())
                if event.error_message:
                    error = event.error_message
                parts = (event.content.parts if event.content else None) or []
                text = "".join(p.text for p in parts if p.text and not p.thought)
                if text and event.author == child.name:
                    final = text
    finally:
        await runner.close()
    if not final and error:
        return _failed(error)
    return {"subagent_type": kind, "text": final, "tool_calls": tool_calls}


def _inherited_state(tool_context: ToolContext) -> dict[str, Any]:
    """A snapshot of the parent's session state, so checks reading state see the same
    values; changes the child makes stay in its own session."""
    state = tool_context.state.to_dict()
    return {k: v for k, v in state.items() if not k.startswith(("_adk", "temp:"))}


def _nested_run_config(run_config: Any) -> Any:
    if run_config is None:
        return None
    # The child's events are not streamed to anyone and it runs no live model.
    return run_config.model_copy(
        update={"streaming_mode": StreamingMode.NONE, "support_cfc": False}
    )


def _lineage(agent: object) -> Iterator[BaseAgent]:
    # ADK 2 types an invocation's agent as BaseAgent | BaseNode; only agents have parents.
    while isinstance(agent, BaseAgent):
        yield agent
        agent = agent.parent_agent


def _nearest(lineage: list[BaseAgent], lookup: Any) -> Any:
    for agent in lineage:
        if isinstance(agent, LlmAgent):
            found = lookup(agent)
            if found is not None:
                return found
    return None


def _spawn_tool(func: Any) -> BaseTool:
    declare_effect(func, Effect.SPAWN)
    return mark_own(declare_effect(DeclaredOnceFunctionTool(func), Effect.SPAWN))


def _excluded(tool: Any) -> bool:
    # plangate's own tools by identity; a namesake too, so none reaches a child.
    return isinstance(tool, PlanToolSet) or is_own(tool) or _tool_name(tool) in RESERVED_TOOL_NAMES


def _tool_name(tool: Any) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    return getattr(tool, "__name__", "") if callable(tool) else ""


def _effect_text(tool: Any) -> str:
    effect = effect_of(tool)
    return effect.value if effect is not None else "no effect"


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _invalid(message: str) -> dict[str, Any]:
    return error_result(ErrorCode.INVALID_ARGS, message, "fix the argument and call again")


def _failed(message: str) -> dict[str, Any]:
    return error_result(
        ErrorCode.SUBAGENT_FAILED, message, "do the task yourself or try a smaller one"
    )
