"""``setup_plan``: mount Plan Mode on an ADK agent with one call."""

from __future__ import annotations

import logging
from typing import Any

from google.adk.agents import LlmAgent

from plangate.adk.app_check import require_plan_app
from plangate.adk.boundary import install_boundary
from plangate.adk.callbacks import make_before_model, make_gate
from plangate.adk.contract import signed_once
from plangate.adk.options import PlanOptions
from plangate.adk.own_tools import guard_names, refuse_namesakes, refuse_reserved_rules
from plangate.adk.runtime import PlanRuntime
from plangate.adk.tools import PlanToolSet, plan_runtime
from plangate.plan.codec import decode_plan
from plangate.plan.record import PlanRecord

__all__ = ["get_plan_record", "plan_runtime", "setup_plan"]

log = logging.getLogger("plangate")


def setup_plan(agent: LlmAgent, options: PlanOptions | None = None) -> LlmAgent:
    """Mount Plan Mode on ``agent`` and return it.

    Adds the plan tools, the step-boundary callback (replies, mode selection, prompts) and
    the gate. The gate goes first in ``before_tool_callback`` -- deny first -- on the agent
    and on every sub-agent below it, so a delegated agent cannot escape it. Calling it a
    second time on the same agent changes nothing.

    A tool of the agent (or of an agent below it) or a rule of the policy file named like
    one of plangate's tools raises ``ToolNameReserved`` (``TOOL_NAME_RESERVED``).

    The agent must run in an App like ``build_app``'s (resumable, with ``PlanPlugin``); in
    any other its first model step raises ``PlanAppError`` (``PLAN_APP_MISCONFIGURED``).
    """
    if plan_runtime(agent) is not None:
        log.warning("setup_plan: Plan Mode is already mounted on %r; ignoring", agent.name)
        return agent
    options = options or PlanOptions()
    # A tool named like one of plangate's would replace it (ADK finds tools by name).
    refuse_namesakes(agent)
    runtime = PlanRuntime(options, options.branch or agent.name)
    refuse_reserved_rules(runtime.tool_policy, str(options.policy_file))
    agent.tools = [*agent.tools, PlanToolSet(runtime)]
    agent.before_model_callback = [
        *_as_list(agent.before_model_callback),
        signed_once(_check_app),
        signed_once(make_before_model(runtime)),
    ]
    boundary = install_boundary(agent)
    guard_names(boundary)
    boundary.add(make_gate(runtime), order=0)
    return agent


async def _check_app(callback_context: Any, llm_request: Any) -> None:
    # Before anything of the step is applied or mirrored: an App without PlanPlugin or
    # resumability would leave a wrong mirror or not pause (plangate.adk.app_check).
    require_plan_app(callback_context.get_invocation_context(), callback_context.agent_name)


def get_plan_record(
    session: Any, branch: str | None = None, prefix: str = "plan"
) -> PlanRecord | None:
    """The plan mirrored in an ADK session's state.

    With no branch, the single ``plan:<branch>`` key is used (there is one per mounted
    agent), so the default finds the plan of a root agent. The value may be the mirrored
    object or its JSON text (``encode_plan``); anything else raises ``PlanDecodeError``.
    """
    state = getattr(session, "state", session) or {}
    if branch is not None:
        key = f"{prefix}:{branch}" if branch else prefix
        value = state.get(key)
    else:
        keys = [k for k in state if k == prefix or k.startswith(prefix + ":")]
        if len(keys) > 1:
            raise ValueError(
                f"several plans in this session ({', '.join(sorted(keys))}); pass branch="
            )
        value = state.get(keys[0]) if keys else None
    # A corrupt value raises (PlanDecodeError) rather than reading as "no plan".
    return decode_plan(value)


def _as_list(callback: Any) -> list[Any]:
    if callback is None:
        return []
    return list(callback) if isinstance(callback, list) else [callback]
