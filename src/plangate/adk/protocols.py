"""``setup_protocols``: protocol routing governance on an ADK agent with one call.

What it wires (all on the agent it mounts on; the boundary check also on sub-agents):

* ``before_agent_callback`` -- routes the run's message (restored segment → explicit
  selection → deterministic rules → classifier → fallback) and commits, in ONE
  transaction, the run record, its first segment, the route/start journal events and
  the session-intent revision + run binding. A lost intent compare-and-set rolls all of
  it back and ends the run before any model call (``SESSION_INTENT_REVISION_CONFLICT``).
  A run is an ADK invocation; the same invocation id again (a resumed pause) restores
  its segment and requires its intent binding (``RUN_INTENT_BINDING_REQUIRED``).
* a check at order 100 on the single authorization boundary (Plan Mode's gate is 0, so a
  plan deny always wins and approving a plan never lifts a protocol deny). A refused
  call returns ``ACTION_NOT_ALLOWED_IN_PHASE:<phase>:<action>:<allowed,…>`` with
  ``allowed_actions`` and a recovery hint, in the same run.
* ``after_tool_callback`` -- records each authorized call in the segment's ledger (a
  result with an ``error`` key is a failed call) and moves the phase.
* the ``protocol_handoff`` and ``analysis_requirements_commit`` tools.
* ``before_model_callback`` (after the existing ones) -- the protocol, phase, intent and
  tool plan in the instructions.
* ``after_model_callback`` / ``after_agent_callback`` -- the completion gate: a run whose
  data calls were refused by a protocol (in any segment) ends ``failed`` with
  ``DATA_ACTIONS_REJECTED_BY_PROTOCOL``; the model's closing text is replaced.

Everything is mirrored into session state under ``protocol:<agent name>``.

Upgrading: runs paused before store migration 2 ("session intents") have protocol state
but no intent binding. They do not resume; they end with ``RUN_INTENT_BINDING_REQUIRED``
and a message saying so. Finish or cancel paused runs before upgrading.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import BaseTool, ToolContext
from google.adk.tools.base_toolset import BaseToolset
from google.genai import types

from plangate.adk.boundary import install_boundary
from plangate.adk.contract import DeclaredOnceFunctionTool, signed_once
from plangate.adk.own_tools import guard_names, mark_own, refuse_namesakes
from plangate.adk.protocol_runtime import PROTOCOL_MARKER, ProtocolRuntime
from plangate.adk.waits import run_waits
from plangate.policy.effects import Effect, declare_effect
from plangate.protocol.classifier import (
    ClassificationInput,
    Classifier,
    render_classifier_prompt,
)
from plangate.protocol.definitions import (
    DEFINITIONS,
    Guard,
    ProtocolDefinition,
    ProtocolRef,
)
from plangate.protocol.helper_context import HELPER_CONTEXT_MAX_CHARS
from plangate.protocol.requirements import extract_requirements
from plangate.protocol.router import CLASSIFIER_CONFIDENCE_THRESHOLD
from plangate.protocol.tool_plan import SkillPolicy

__all__ = [
    "ProtocolOptions",
    "ProtocolToolSet",
    "get_protocol_state",
    "model_classifier",
    "protocol_runtime",
    "setup_protocols",
]

log = logging.getLogger("plangate")

PROTOCOL_BOUNDARY_ORDER = 100
CLASSIFIER_SYSTEM = (
    "You route user messages to an agent protocol. Answer with exactly one JSON object."
)


@dataclass(frozen=True)
class ProtocolOptions:
    authorized: tuple[ProtocolRef, ...] = ()
    """Protocols this agent may run; empty = every registered one."""
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = field(
        default_factory=lambda: DEFINITIONS
    )
    classifier: Classifier | Literal["model"] | None = "model"
    """``"model"`` asks the agent's own model with the classifier prompt; a callable is
    used as is (tests inject a scripted one); ``None`` disables classification."""
    classifier_threshold: float = CLASSIFIER_CONFIDENCE_THRESHOLD
    selection_state_key: str | None = "protocol_selection"
    """Session-state key holding an explicit protocol choice (``"data-analysis@1"``)."""
    state_key_prefix: str = "protocol"
    database_url: str | None = None
    """Default: the database ``build_runner`` gives Plan Mode on the same agent, else
    ``PLANGATE_DATABASE_URL`` or the embedded SQLite file."""
    skill_policy: SkillPolicy | None = None
    always_allow: Collection[str] = ()
    data_tools: Collection[str] = ()
    """Further tools (e.g. MCP tools of a data server) governed as data actions."""
    guard: Guard | None = None
    requirement_extractor: Callable[[str], Iterable[str]] | None = extract_requirements
    """Analysis requirement ids from the run's effective task text (data-analysis): by
    default metrics, breakdowns, time windows, filters, comparisons and ranking cuts
    (``plangate.protocol.requirements``); ``None`` tracks none."""
    conflict_retries: int = 0
    """Re-route this many times when the intent compare-and-set is lost; 0 fails the run
    with ``SESSION_INTENT_REVISION_CONFLICT`` before any model call."""
    helper_context_max_chars: int = HELPER_CONTEXT_MAX_CHARS
    inject_instructions: bool = True

    def __post_init__(self) -> None:
        if not self.state_key_prefix or self.state_key_prefix.startswith("temp:"):
            raise ValueError("state_key_prefix must be non-empty and must not use 'temp:'")
        if self.conflict_retries < 0:
            raise ValueError("conflict_retries must be >= 0")


# --------------------------------------------------------------------------- classifier


def model_classifier(model: BaseLlm | str) -> Classifier:
    """A classifier that asks ``model`` once (temperature 0, ≤512 tokens) and returns its
    raw text; the router parses it strictly."""

    async def classify(classification_input: ClassificationInput) -> str:
        llm = model
        if isinstance(llm, str):
            from google.adk.models.registry import LLMRegistry

            llm = LLMRegistry.new_llm(llm)
        request = LlmRequest(
            model=llm.model,
            contents=[
                types.Content(
                    role="user",
                    parts=[types.Part(text=render_classifier_prompt(classification_input))],
                )
            ],
            config=types.GenerateContentConfig(
                system_instruction=CLASSIFIER_SYSTEM, temperature=0, max_output_tokens=512
            ),
        )
        texts: list[str] = []
        async for response in llm.generate_content_async(request):
            if response.partial:
                continue
            for part in (response.content.parts if response.content else None) or []:
                if part.text and not part.thought:
                    texts.append(part.text)
        return "".join(texts)

    return classify


# --------------------------------------------------------------------------- tools


class ProtocolToolSet(BaseToolset):
    """``protocol_handoff`` and ``analysis_requirements_commit``; holds the runtime."""

    def __init__(self, runtime: ProtocolRuntime) -> None:
        super().__init__()
        self.runtime = runtime
        self._tools = _protocol_tools(runtime)

    async def get_tools(self, readonly_context: Any = None) -> list[BaseTool]:
        return list(self._tools)


def _protocol_tools(runtime: ProtocolRuntime) -> list[BaseTool]:
    async def protocol_handoff(
        target_protocol: str,
        tool_context: ToolContext,
        reason: str = "",
        route_correction: bool = False,
    ) -> dict[str, Any]:
        """Move this run to another protocol when the task needs it.

        Use it when the tool plan says a tool you need is disabled in the current
        protocol (for example the data tools under general-task: hand off to
        data-analysis@1). The result tells you the new protocol, phase, and which tools
        are available or disabled now. Progress is judged from the server's state, not
        from anything you report.

        Args:
            target_protocol: The protocol to move to, e.g. "data-analysis@1" or
                "general-task@1".
            reason: One sentence on why the task needs the other protocol.
            route_correction: True only to leave a data-analysis run that was routed
                there by mistake before any data work ran (the segment is aborted).
        """
        return await runtime.handoff(
            tool_context, target_protocol, reason=reason, route_correction=route_correction
        )

    async def analysis_requirements_commit(
        requirements: dict[str, str], tool_context: ToolContext
    ) -> dict[str, Any]:
        """Report the status of the analysis requirements of this data-analysis run.

        Args:
            requirements: Requirement id -> "satisfied", "unmet" or "pending".
        """
        return await runtime.commit_requirements(tool_context, requirements)

    tools: list[BaseTool] = [
        DeclaredOnceFunctionTool(protocol_handoff),
        DeclaredOnceFunctionTool(analysis_requirements_commit),
    ]
    # Governance bookkeeping only: nothing outside the conversation changes, so Plan
    # Mode may let them run while a plan is being made.
    for tool in tools:
        declare_effect(tool, Effect.READ)
        mark_own(tool)
    return tools


# --------------------------------------------------------------------------- callbacks


def _as_list(callback: Any) -> list[Any]:
    if callback is None:
        return []
    return list(callback) if isinstance(callback, list) else [callback]


def _llm_agents(agent: BaseAgent) -> Iterator[LlmAgent]:
    if isinstance(agent, LlmAgent):
        yield agent
    for child in agent.sub_agents:
        yield from _llm_agents(child)


def _final_answer_id(context: Any, agent_name: str) -> str | None:
    for event in reversed(context.session.events):
        if event.invocation_id != context.invocation_id:
            continue
        parts = (event.content.parts if event.content else None) or []
        if event.author == agent_name and any(p.text for p in parts):
            return event.id
    return None


def _is_final_text(response: LlmResponse) -> bool:
    parts = (response.content.parts if response.content else None) or []
    return (
        not response.partial
        and any(p.text for p in parts)
        and not any(p.function_call for p in parts)
    )


def _failure_content(message: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=message)])


def _make_callbacks(runtime: ProtocolRuntime, agent: LlmAgent) -> dict[str, Any]:
    async def protocol_before_agent(callback_context: Any) -> types.Content | None:
        result = await runtime.start_run(callback_context)
        if result.failure is None:
            callback_context.state[runtime.state_key] = result.mirror
            return None
        callback_context.state[runtime.state_key] = runtime.failed_mirror(
            callback_context.state.get(runtime.state_key),
            callback_context.invocation_id,
            result.failure,
        )
        return _failure_content(result.failure)

    async def protocol_check(
        tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        return await runtime.authorize(tool, args, tool_context)

    async def protocol_after_tool(
        tool: Any, args: dict[str, Any], tool_context: Any, tool_response: Any
    ) -> None:
        try:
            recorded = await runtime.record_outcome(tool_context, tool_response)
        except Exception:  # recording must never turn a tool result into a crash
            log.exception("could not record the outcome of %s", getattr(tool, "name", tool))
            return None
        if recorded:
            view = await runtime.view(tool_context)
            if view is not None:
                tool_context.state[runtime.state_key] = await runtime.mirror_of(
                    view.scope, view.run, view.segment.value
                )
        return None

    async def protocol_before_model(callback_context: Any, llm_request: LlmRequest) -> None:
        if not runtime.options.inject_instructions:
            runtime.learn_tools(llm_request.tools_dict)
            return None
        system = llm_request.config.system_instruction if llm_request.config else None
        if isinstance(system, str) and PROTOCOL_MARKER in system:
            return None
        text = await runtime.instructions(callback_context, llm_request.tools_dict)
        if text:
            llm_request.append_instructions([text])
        return None

    async def protocol_after_model(
        callback_context: Any, llm_response: LlmResponse
    ) -> LlmResponse | None:
        if not _is_final_text(llm_response):
            return None
        message = await runtime.gate_text(callback_context)
        if message is None:
            return None
        runtime.replaced_answers.add(callback_context.invocation_id)
        return LlmResponse(content=_failure_content(message))

    async def protocol_after_agent(callback_context: Any) -> types.Content | None:
        from plangate.adk.setup import plan_runtime

        if (await run_waits(callback_context, plan_runtime(agent))).paused:
            return None  # the run resumes when the human answers; it has not ended
        invocation = callback_context.invocation_id
        finished = await runtime.finish(
            callback_context, _final_answer_id(callback_context, agent.name)
        )
        replaced = invocation in runtime.replaced_answers
        runtime.replaced_answers.discard(invocation)
        if finished is None:
            return None
        callback_context.state[runtime.state_key] = finished.mirror
        outcome = finished.outcome
        if outcome["status"] == "failed" and not replaced:
            return _failure_content(outcome.get("message") or "PROTOCOL_RUN_FAILED")
        return None

    return {
        "before_agent": protocol_before_agent,
        "check": protocol_check,
        "after_tool": protocol_after_tool,
        "before_model": protocol_before_model,
        "after_model": protocol_after_model,
        "after_agent": protocol_after_agent,
    }


# --------------------------------------------------------------------------- setup


def setup_protocols(agent: LlmAgent, options: ProtocolOptions | None = None) -> LlmAgent:
    """Mount protocol governance on ``agent`` and return it. A second call changes nothing."""
    if protocol_runtime(agent) is not None:
        log.warning("setup_protocols: already mounted on %r; ignoring", agent.name)
        return agent
    options = options or ProtocolOptions()
    # A tool named like one of plangate's would replace it (ADK finds tools by name).
    refuse_namesakes(agent)

    def agent_model_classifier() -> Classifier | None:
        return model_classifier(agent.canonical_model)

    def plan_database_url() -> str | None:
        from plangate.adk.setup import plan_runtime

        plan = plan_runtime(agent)
        return plan.database_url if plan is not None else None

    runtime = ProtocolRuntime(
        options,
        agent.name,
        model_classifier=agent_model_classifier,
        fallback_database_url=plan_database_url,
    )
    callbacks = {name: signed_once(c) for name, c in _make_callbacks(runtime, agent).items()}
    agent.tools = [*agent.tools, ProtocolToolSet(runtime)]
    # Routing must happen before anything else may end the run or call the model.
    agent.before_agent_callback = [
        callbacks["before_agent"],
        *_as_list(agent.before_agent_callback),
    ]
    agent.before_model_callback = [
        *_as_list(agent.before_model_callback),
        callbacks["before_model"],
    ]
    agent.after_model_callback = [callbacks["after_model"], *_as_list(agent.after_model_callback)]
    agent.after_agent_callback = [callbacks["after_agent"], *_as_list(agent.after_agent_callback)]
    for governed in _llm_agents(agent):
        # First, and always returning None, so a user callback cannot hide an outcome.
        governed.after_tool_callback = [
            callbacks["after_tool"],
            *_as_list(governed.after_tool_callback),
        ]
    boundary = install_boundary(agent)
    guard_names(boundary)
    boundary.add(callbacks["check"], order=PROTOCOL_BOUNDARY_ORDER)
    return agent


def protocol_runtime(agent: LlmAgent) -> ProtocolRuntime | None:
    for tool in agent.tools:
        if isinstance(tool, ProtocolToolSet):
            return tool.runtime
    return None


def get_protocol_state(
    session: Any, agent_name: str | None = None, prefix: str = "protocol"
) -> dict[str, Any] | None:
    """The protocol mirror in an ADK session's state (``protocol:<agent name>``).

    Without ``agent_name`` the single ``protocol:*`` key is used.
    """
    state = getattr(session, "state", session) or {}
    if agent_name is not None:
        value = state.get(f"{prefix}:{agent_name}")
    else:
        keys = [k for k in state if k.startswith(prefix + ":")]
        if len(keys) > 1:
            raise ValueError(
                f"several protocol states ({', '.join(sorted(keys))}); pass agent_name"
            )
        value = state.get(keys[0]) if keys else None
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value) if value else None
