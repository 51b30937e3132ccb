"""``PlanPlugin``: the runner-level half of Plan Mode.

Installed by ``build_app``/``build_runner``; an App you build yourself must list it in
``plugins`` (and be resumable), or a Plan-Mode agent's first model step raises
``PLAN_APP_MISCONFIGURED`` (``plangate.adk.app_check``). It looks at every message sent
to ``Runner.run_async`` before ADK does:

- a reply **without a call id** (seed 000's documented shape) gets the id of the single
  open request of its tool name; none or several raise
  :class:`~plangate.plan.replies.ReplyError` (``NO_MATCHING_REQUEST`` /
  ``AMBIGUOUS_REPLY``) and nothing is appended -- ADK wraps it in a ``RuntimeError``
  whose ``__cause__`` is that error;
- a reply with a known call id but a **wrong or empty tool name** is renamed to the
  call's tool, so ADK resumes the call instead of running the tool again;
- each reply is recorded in the plan store at once, so a partial answer survives a
  restart and ``PlanSession.pending()`` stops listing it;
- when a decision withdrew other paused calls (approving or cancelling a plan withdraws
  its open questions), their results are added to the message, so the run resumes now.

And as each event is appended, a plan it mirrors into session state is made equal to
the store (several plan calls of one step commit in turn but report in one event).

Behind it, the step boundary still applies replies (also ones without an id) and tells
the model about unmatched ones, and a plan tool that ADK runs again answers from the
request it already opened instead of opening a second one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent
from google.adk.events import Event
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from plangate.adk.capability import CONFIRMATION_CALL, confirmation_reply
from plangate.adk.replies import paused_calls, record_replies, replies_in
from plangate.adk.runtime import Loaded, PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.adk.step_call_ids import unique_call_ids
from plangate.adk.tools import plan_runtime
from plangate.plan.gate import PLAN_TOOL_NAMES
from plangate.plan.replies import ReplyError, ReplyErrorCode, match_reply
from plangate.plan.session_state import PlanSessionState

__all__ = ["PlanPlugin"]


class PlanPlugin(BasePlugin):
    """Plan Mode at the runner: human replies before ADK sees them, the mirror as events
    are appended. Registered once on the App (``build_app`` does it); it serves every
    agent in the runner that has Plan Mode mounted."""

    def __init__(self) -> None:
        super().__init__(name="plangate")

    async def on_event_callback(self, *, invocation_context: Any, event: Event) -> None:
        """A plan mirrored by an event equals the store when the event is appended.

        Plan calls of one step commit in some order but their results arrive in one
        merged event; the value it carries is replaced by the one committed last.
        """
        delta = event.actions.state_delta if event.actions else None
        if not delta:
            return None
        session = invocation_context.session
        for _, runtime in _governed(invocation_context.agent):
            if runtime.state_key not in delta:
                continue
            scope = PlanScope(session.app_name, session.user_id, session.id, runtime.branch)
            loaded = await runtime.load(scope)
            if loaded.unreadable is None:
                record = loaded.state.record
                delta[runtime.state_key] = record.dump() if record is not None else None
        return None

    async def on_user_message_callback(
        self, *, invocation_context: Any, user_message: types.Content
    ) -> types.Content | None:
        replies = replies_in(user_message)
        if not replies:
            return None
        session = invocation_context.session
        owners = list(_governed(invocation_context.agent))
        if not owners:
            return None
        scopes = {
            runtime: PlanScope(session.app_name, session.user_id, session.id, runtime.branch)
            for _, runtime in owners
        }
        loaded = {runtime: await runtime.load(scope) for runtime, scope in scopes.items()}
        changed = False
        parts: list[types.Part] = []
        routed: dict[PlanRuntime, list[types.FunctionResponse]] = {}
        for part in user_message.parts or []:
            reply = part.function_response
            if reply is None:
                parts.append(part)
                continue
            runtime, canonical = _route(reply, loaded)
            if canonical is not reply:
                changed = True
                part = types.Part(function_response=canonical)
            parts.append(part)
            if runtime is not None:
                routed.setdefault(runtime, []).append(canonical)
        states: dict[PlanRuntime, PlanSessionState] = {}
        names = {runtime: name for name, runtime in owners}
        for runtime, replies_for in routed.items():
            recorded = await record_replies(
                runtime, scopes[runtime], replies_for, agent_name=names[runtime]
            )
            states[runtime] = recorded.state
        # A decision on an amendment resumes ADK's confirmation of the paused call, not
        # the call itself (it already answered "waiting").
        deciding = {
            call_id
            for state in states.values()
            for call_id, resolution in state.resolutions.items()
            if resolution.decides_call
        }
        kept = [
            p
            for p in parts
            if p.function_response is None or p.function_response.id not in deciding
        ]
        if len(kept) != len(parts):
            parts, changed = kept, True
        # Calls the decisions withdrew are answered here, so the run resumes now.
        sent = {p.function_response.id for p in parts if p.function_response is not None}
        for call in paused_calls(session.events):
            if call.id in sent:
                continue
            if call.name == CONFIRMATION_CALL:
                for state in states.values():
                    confirmation = confirmation_reply(call, state)
                    if confirmation is not None:
                        parts.append(types.Part(function_response=confirmation))
                        changed = True
                        break
                continue
            for state in states.values():
                resolution = state.resolutions.get(call.id or "")
                if resolution is None or resolution.reply is not None:
                    continue
                parts.append(
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=call.id,
                            name=resolution.tool_name or call.name,
                            response=resolution.result,
                        )
                    )
                )
                changed = True
                break
        if not changed:
            return None
        return types.Content(role="user", parts=parts)

    async def after_model_callback(
        self, *, callback_context: Any, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """A call whose id another call of the step, or an earlier step, already holds
        gets an id of its own before ADK builds the step (``step_call_ids``): otherwise one
        call's result would answer the other. The response is changed in place, so the
        agent's own after-model callbacks still run."""
        if llm_response.partial or llm_response.content is None:
            return None
        session = callback_context.session
        unique_call_ids(llm_response.content, session.events)
        return None


def _route(
    reply: types.FunctionResponse, loaded: dict[PlanRuntime, Loaded]
) -> tuple[PlanRuntime | None, types.FunctionResponse]:
    """The runtime a reply belongs to, and the reply with its id and name made canonical."""
    if reply.id:
        for runtime, current in loaded.items():
            state = current.state
            matched = match_reply(
                state.record,
                state.resolved_names(),
                call_id=reply.id,
                tool_name=reply.name,
                response=reply.response,
            )
            if matched is not None:
                return runtime, _renamed(reply, matched.call_id, matched.tool_name)
        return None, reply
    if reply.name not in PLAN_TOOL_NAMES:
        return None, reply
    candidates = [
        (runtime, p)
        for runtime, current in loaded.items()
        if current.state.record is not None
        for p in current.state.record.pending
        if p.tool_name == reply.name
    ]
    if len(candidates) == 1:
        runtime, request = candidates[0]
        return runtime, _renamed(reply, request.call_id, request.tool_name)
    if candidates:
        ids = ", ".join(p.call_id for _, p in candidates)
        raise ReplyError(
            ReplyErrorCode.AMBIGUOUS_REPLY,
            f"the reply to {reply.name} has no call id and {len(candidates)} such requests "
            f"are open ({ids})",
        )
    raise ReplyError(
        ReplyErrorCode.NO_MATCHING_REQUEST,
        f"the reply to {reply.name} has no call id and no such request is open",
    )


def _renamed(reply: types.FunctionResponse, call_id: str, name: str) -> types.FunctionResponse:
    if reply.id == call_id and reply.name == name:
        return reply
    return types.FunctionResponse(id=call_id, name=name, response=reply.response)


def _governed(agent: BaseAgent) -> Iterator[tuple[str, PlanRuntime]]:
    root = agent.root_agent if hasattr(agent, "root_agent") else agent
    seen: set[int] = set()
    stack = [root]
    while stack:
        current = stack.pop()
        if isinstance(current, LlmAgent):
            runtime = plan_runtime(current)
            if runtime is not None and id(runtime) not in seen:
                seen.add(id(runtime))
                yield current.name, runtime
        stack.extend(current.sub_agents)
