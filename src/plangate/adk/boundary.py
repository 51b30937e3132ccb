"""The single authorization boundary every tool call of every governed agent passes.

Plan Mode and protocol governance each add a check; the checks run in order and the
first refusal wins (deny first). The boundary is installed once, first in
``before_tool_callback`` of an agent and all its sub-agents, so an allow-callback of the
user's can never run before it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent

from plangate.adk.contract import signed_once

__all__ = ["Boundary", "Check", "boundary_of", "install_boundary"]

Check = Callable[[Any, dict[str, Any], Any], Awaitable[dict[str, Any] | None]]


class Boundary:
    def __init__(self) -> None:
        self.checks: list[tuple[int, Check]] = []

    def add(self, check: Check, *, order: int) -> None:
        """Add a check; lower ``order`` runs first (Plan Mode uses 0, protocols 100)."""
        self.checks.append((order, check))
        self.checks.sort(key=lambda item: item[0])

    async def __call__(
        self, tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        for _, check in self.checks:
            refusal = await check(tool, args, tool_context)
            if refusal is not None:
                return refusal
        return None


def boundary_of(agent: LlmAgent) -> Boundary | None:
    callbacks = agent.before_tool_callback
    for callback in callbacks if isinstance(callbacks, list) else [callbacks]:
        if isinstance(callback, Boundary):
            return callback
    return None


def install_boundary(agent: LlmAgent) -> Boundary:
    """The agent's boundary, installed first on it and every sub-agent if not yet there."""
    boundary = boundary_of(agent) or signed_once(Boundary())
    for governed in _llm_agents(agent):
        if boundary_of(governed) is not boundary:
            existing = governed.before_tool_callback
            others = existing if isinstance(existing, list) else ([existing] if existing else [])
            governed.before_tool_callback = [boundary, *others]
    return boundary


def _llm_agents(agent: BaseAgent) -> Iterator[LlmAgent]:
    if isinstance(agent, LlmAgent):
        yield agent
    for child in agent.sub_agents:
        yield from _llm_agents(child)
