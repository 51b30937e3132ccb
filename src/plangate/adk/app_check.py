"""The App a Plan-Mode agent runs in: it must carry ``PlanPlugin`` and be resumable.

Both are needed for Plan Mode to be right, and neither shows up as an error by itself:
without ``PlanPlugin`` the session-state mirror of a step that drafts and submits a plan
says ``drafting`` while the approval waits, and replies are recorded only at the next
model step; an App that is not resumable does not pause on a batched ``exit_plan_mode``
and calls the model again while the approval waits. ADK's own ``adk web``, ``adk run``
and ``adk api_server`` wrap a bare ``root_agent`` in exactly such an App. So the first
model step of a run in one fails, with a :class:`PlanAppError` that says how to build it.
"""

from __future__ import annotations

from typing import Any

from plangate.adk.plugin import PlanPlugin
from plangate.errors import CodedError, ErrorCode

__all__ = ["PlanAppError", "require_plan_app"]

_HINT = (
    "build the App with plangate.adk.runner.build_app(agent) (it is resumable and carries "
    "PlanPlugin()), or build_runner(agent); for adk web / adk run / adk api_server put "
    "`app = build_app(root_agent)` in agent.py. An App you build yourself needs "
    "plugins=[PlanPlugin(), ...] and resumability_config=ResumabilityConfig(is_resumable=True)."
)


class PlanAppError(CodedError):
    """A Plan-Mode agent runs in an App without ``PlanPlugin`` or resumability."""


def require_plan_app(invocation_context: Any, agent_name: str) -> None:
    """Raise :class:`PlanAppError` unless the invocation's App can run Plan Mode."""
    missing = missing_for_plan_mode(invocation_context)
    if not missing:
        return
    raise PlanAppError(
        ErrorCode.PLAN_APP_MISCONFIGURED,
        f"Plan Mode on agent {agent_name!r} runs in an App that "
        f"{' and '.join(missing)}; build it with build_app(agent), which adds PlanPlugin() "
        "and makes it resumable",
        _HINT,
        missing=missing,
    )


def missing_for_plan_mode(invocation_context: Any) -> list[str]:
    """What the invocation's App lacks for Plan Mode, in words; empty when nothing."""
    missing: list[str] = []
    plugins = invocation_context.plugin_manager.plugins
    if not any(isinstance(plugin, PlanPlugin) for plugin in plugins):
        missing.append("has no PlanPlugin()")
    if not invocation_context.is_resumable:
        missing.append("is not resumable")
    return missing
