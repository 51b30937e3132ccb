"""ADK runs as AG-UI runs: event translation, shared state, interrupts and resume.

One AG-UI run is one ``PlanSession.run``. The stream opens with ``RUN_STARTED`` and a
``STATE_SNAPSHOT``; each ADK event becomes text, tool-call and tool-result events, and a
``STATE_DELTA`` (an RFC 6902 patch of the keys it wrote) follows every event that changed the
plan, the todos, the mode selection or the protocol state. A run that waits for a human
ends with ``RUN_FINISHED`` and an interrupt outcome, one ``Interrupt`` per pending plan
request; the next run answers them with ``RunAgentInput.resume`` (or, as in the original
demo, with ``role: "tool"`` messages), which become the bound ``PlanSession`` replies.
A run the protocol failed (its completion gate) ends with ``RUN_ERROR`` carrying the
protocol's outcome code, never with a successful ``RUN_FINISHED``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig
from google.adk.events import Event
from google.genai import types
from pydantic_core import PydanticSerializationError

from plangate.adk.capability import CONFIRMATION_CALL
from plangate.adk.contract import StreamingMode
from plangate.adk.database import failure_text
from plangate.adk.protocols import protocol_runtime
from plangate.adk.replies import replies_in
from plangate.adk.runner import function_reply
from plangate.adk.session import PlanSession
from plangate.agent.todos import todos_state_key
from plangate.errors import ErrorCode
from plangate.plan.record import PendingRequest
from plangate.plan.replies import ReplyError
from plangate.store.storable import clean_json

__all__ = [
    "BadRunInput",
    "PreparedRun",
    "StateKeys",
    "event_text",
    "interrupt_for",
    "is_confirmation",
    "lease_lost_event",
    "prepare_run",
    "protocol_failure",
    "reply_id",
    "run_events",
    "send_failed_event",
    "shared_state",
    "stopped_event",
]

STALE_RESUME = ErrorCode.STALE_RESUME
AGENT_ERROR = ErrorCode.AGENT_ERROR
PROTOCOL_RUN_FAILED = ErrorCode.PROTOCOL_RUN_FAILED
RUN_STOPPED = ErrorCode.RUN_STOPPED

REASONS = {
    "enter": "plan_entry",
    "exit": "plan_approval",
    "question": "question",
    "amendment": "scope_amendment",
    "edit": "edit_review",
    "tool": "tool_call",
}

_DECISION_SCHEMA = {"type": "string", "enum": ["approve", "reject"]}
_NOTE_SCHEMA = {"type": "string", "description": "Optional note for the agent"}


_SCOPE_SCHEMA = {
    "type": "object",
    "description": "The scope, edited by the reviewer (replaces the one shown)",
    "additionalProperties": False,
    "properties": {
        "write": {"type": "array", "items": {"type": "string"}},
        "commands": {"type": "array", "items": {"type": "string"}},
        "network": {"type": "boolean"},
    },
}
_PERMISSION_SCHEMA = {
    "type": "string",
    "enum": ["auto", "ask_each_edit"],
    "description": "auto: act within the scope; ask_each_edit: review every file write",
}


def _decide_schema(**more: dict[str, Any]) -> dict[str, Any]:
    """A reply that approves or rejects, with an optional note (entry, amendment, edit)."""
    return {
        "type": "object",
        "required": ["decision"],
        "properties": {"decision": _DECISION_SCHEMA, "reviewer_note": _NOTE_SCHEMA, **more},
    }


class BadRunInput(ValueError):
    """Input that is well-formed JSON but cannot be run; answered with a 4xx, nothing changes."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class StateKeys:
    """The session-state keys a page shares: the plan record, the todos, the selection and,
    when the agent has protocol governance mounted, its protocol state."""

    plan: str
    todos: str
    selection: str | None
    plan_value: str
    agent_value: str
    protocol: str | None = None

    @classmethod
    def of(cls, session: PlanSession) -> StateKeys:
        runtime = session.runtime
        options = runtime.options
        agent = session.runner.agent
        protocols = protocol_runtime(agent) if isinstance(agent, LlmAgent) else None
        return cls(
            plan=runtime.state_key,
            todos=todos_state_key(runtime.branch),
            selection=options.force_enter_plan_state_key,
            plan_value=options.force_enter_plan_state_value,
            agent_value=options.agent_state_value,
            protocol=protocols.state_key if protocols is not None else None,
        )

    @property
    def client_selection(self) -> str | None:
        """Where the selection an AG-UI client last sent is kept (not shared with it)."""
        return f"{self.selection}:sent" if self.selection else None

    @property
    def all(self) -> tuple[str, ...]:
        return tuple(k for k in (self.selection, self.plan, self.todos, self.protocol) if k)

    def as_json(self) -> dict[str, str | None]:
        """The keys as the page reads them (``/api/info`` and the thread read-back)."""
        return {
            "plan": self.plan,
            "todos": self.todos,
            "selection": self.selection,
            "protocol": self.protocol,
        }


def shared_state(session_state: dict[str, Any], keys: StateKeys) -> dict[str, Any]:
    """The AG-UI state of a thread: the shared keys of its ADK session state, as JSON."""
    return {k: _jsonable(session_state[k]) for k in keys.all if k in session_state}


def _jsonable(value: Any) -> Any:
    # Session state round-trips through the database as JSON already; copy it so that
    # later diffs never alias live session objects.
    return json.loads(json.dumps(value, default=str))


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- interrupts ---------------------------------------------------------------------------


def interrupt_for(request: PendingRequest) -> Interrupt:
    """The AG-UI interrupt that shows one pending plan request; its id is the approval id."""
    payload = request.payload
    metadata: dict[str, Any] = {
        "kind": request.kind,
        "tool_name": request.tool_name,
        "plan_id": payload.get("plan_id"),
    }
    if request.kind == "enter":
        objective = payload.get("objective") or ""
        message = f"The agent asks to enter Plan Mode for: {objective}"
        metadata["objective"] = objective
        schema = _decide_schema()
    elif request.kind == "exit":
        message = str(payload.get("message") or "Plan submitted for approval.")
        metadata.update(
            objective=payload.get("objective"),
            revision=request.revision,
            sha256=request.sha256,
            content=payload.get("content"),
            scope=payload.get("scope"),
            scope_summary=payload.get("scope_summary"),
            permission_options=payload.get("permission_options", ["auto", "ask_each_edit"]),
        )
        schema = _decide_schema(
            content={"type": "string", "description": "The plan, edited by the reviewer"},
            scope=_SCOPE_SCHEMA,
            permission=_PERMISSION_SCHEMA,
            revision={"type": "integer", "const": request.revision},
            sha256={"type": "string", "const": request.sha256},
        )
    elif request.kind in ("amendment", "edit", "tool"):
        message = str(payload.get("message") or "")
        metadata.update(
            title=payload.get("title"),
            revision=request.revision,
            sha256=request.sha256,
            target=payload.get("target"),
            wants=payload.get("wants"),
            scope=payload.get("scope"),
            scope_summary=payload.get("scope_summary"),
            diff=payload.get("diff"),
            diff_truncated=payload.get("diff_truncated"),
        )
        # Approving an amendment may send back the whole scope it leaves in force (widened
        # to a glob, say); an edit review or a tool call only approves or refuses.
        bound = {
            "revision": {"type": "integer", "const": request.revision},
            "sha256": {"type": "string", "const": request.sha256},
        }
        if request.kind == "amendment":
            bound["scope"] = _SCOPE_SCHEMA
        schema = _decide_schema(**bound)
    else:
        message = str(payload.get("message") or "")
        metadata.update(question_id=request.question_id, options=payload.get("options"))
        schema = {
            "type": "object",
            "required": ["answer"],
            "properties": {"answer": {"type": "string", "minLength": 1}},
        }
    return Interrupt(
        id=request.approval_id,
        reason=REASONS[request.kind],
        message=message,
        tool_call_id=request.call_id,
        response_schema=schema,
        metadata=metadata,
    )


# -- preparing a run ----------------------------------------------------------------------


@dataclass
class PreparedRun:
    """What a validated input asks for: one ADK turn, human replies to record (and the
    turn that resumes once all are in), or a refusal reported in the stream."""

    message: types.Content | None = None
    state_delta: dict[str, Any] | None = None
    requested_selection: str | None = None
    replies: list[types.Content] = field(default_factory=list)
    """Human replies, each submitted through ``PlanSession.submit`` when the run starts."""
    stale: str | None = None
    """Why the input answers nothing pending; the run reports STALE_RESUME and changes nothing."""
    new_thread: bool = False
    """The thread had no session before this run: its state starts empty."""


async def prepare_run(
    session: PlanSession, run_input: RunAgentInput, *, new_thread: bool = False
) -> PreparedRun:
    """Validate ``run_input`` against the thread; raise BadRunInput for input that cannot run.

    Reads only: nothing is written until the run starts (a new thread is not created yet).
    """
    keys = StateKeys.of(session)
    prepared = PreparedRun(new_thread=new_thread)
    selection = _requested_selection(run_input, keys)
    if selection is not None and keys.selection:
        prepared.requested_selection = selection
        prepared.state_delta = await _selection_delta(session, keys, selection, new_thread)
    pending = [] if new_thread else await session.pending()
    if run_input.resume:
        return _from_resume(prepared, run_input.resume, pending)
    replies = _trailing_tool_messages(run_input)
    if replies:
        return _from_tool_messages(prepared, replies, pending)
    last = run_input.messages[-1] if run_input.messages else None
    if not isinstance(last, UserMessage):
        raise BadRunInput(
            "nothing to run: the last message must be a user message, or 'resume' must "
            "answer a pending interrupt"
        )
    text = _user_text(last)
    if not text.strip():
        raise BadRunInput("the user message is empty")
    prepared.message = types.Content(role="user", parts=[types.Part(text=text)])
    return prepared


async def _selection_delta(
    session: PlanSession, keys: StateKeys, selection: str, new_thread: bool
) -> dict[str, Any] | None:
    """What the client's selection changes in session state: the selection, when the
    user changed it, and what the client sent (to tell the next run's change).

    A client sends its selection with every run, and one that does not follow the
    state deltas (the seed's page) keeps sending ``plan`` after approval switched the
    thread back to ``agent``. Only a value that differs from what this client sent last
    is the user's choice; the same value again is not, so it cannot start a new plan.
    """
    assert keys.selection is not None and keys.client_selection is not None
    if new_thread:
        sent, current = None, None
    else:
        stored = await session.session(events=False)
        sent = stored.state.get(keys.client_selection) if stored is not None else None
        if selection == sent:
            return None  # the client says again what it said: no choice of the user's
        current = await session.selection()
    delta: dict[str, Any] = {keys.client_selection: selection}
    if selection != (current or keys.agent_value):
        delta[keys.selection] = selection
    return delta


def _requested_selection(run_input: RunAgentInput, keys: StateKeys) -> str | None:
    state = run_input.state
    if state is None:
        return None
    if not isinstance(state, dict):
        raise BadRunInput("'state' must be a JSON object")
    if not keys.selection or keys.selection not in state or state[keys.selection] is None:
        return None
    value = state[keys.selection]
    if value not in (keys.plan_value, keys.agent_value):
        raise BadRunInput(
            f"state.{keys.selection} must be {keys.plan_value!r} or {keys.agent_value!r}, "
            f"got {value!r}"
        )
    return value


def _user_text(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    texts = [getattr(part, "text", None) for part in message.content]
    if any(t is None for t in texts):
        raise BadRunInput("only text content is supported in user messages")
    return "\n".join(t for t in texts if t)


def _trailing_tool_messages(run_input: RunAgentInput) -> list[ToolMessage]:
    replies: list[ToolMessage] = []
    for message in reversed(run_input.messages):
        if not isinstance(message, ToolMessage):
            break
        replies.append(message)
    return list(reversed(replies))


def _from_resume(
    prepared: PreparedRun, entries: Sequence[ResumeEntry], pending: list[PendingRequest]
) -> PreparedRun:
    by_id = {p.approval_id: p for p in pending}
    seen: set[str] = set()
    answered: list[tuple[PendingRequest, types.Content]] = []
    stale: list[str] = []
    for entry in entries:
        if entry.interrupt_id in seen:
            raise BadRunInput(f"interrupt {entry.interrupt_id!r} is answered twice")
        seen.add(entry.interrupt_id)
        request = by_id.get(entry.interrupt_id)
        if request is None:
            stale.append(entry.interrupt_id)
            continue
        reply = reply_for(request, entry)
        mismatch = _binding_mismatch(request, entry.payload)
        if mismatch:
            stale.append(f"{entry.interrupt_id} ({mismatch})")
            continue
        answered.append((request, reply))
    if stale:
        return _stale(prepared, stale, pending)
    prepared.replies = _in_call_order(answered, pending)
    return prepared


def _in_call_order(
    answered: list[tuple[PendingRequest, types.Content]], pending: list[PendingRequest]
) -> list[types.Content]:
    """Replies in the order the model asked: an approval withdraws the questions still
    open, so the answers to questions asked beside it are recorded first."""
    order = {p.call_id: i for i, p in enumerate(pending)}
    return [reply for _, reply in sorted(answered, key=lambda a: order[a[0].call_id])]


def _from_tool_messages(
    prepared: PreparedRun, replies: list[ToolMessage], pending: list[PendingRequest]
) -> PreparedRun:
    by_call = {p.call_id: p for p in pending}
    answered: list[tuple[PendingRequest, types.Content]] = []
    unbound: list[types.Content] = []
    stale: list[str] = []
    for message in replies:
        response = _tool_message_json(message)
        if not message.tool_call_id:
            # Seed 000's shape: a reply without a call id answers the single open request
            # of its kind; submit() refuses it with a code when none or several are open.
            unbound.append(_unbound_reply(response, pending))
            continue
        request = by_call.get(message.tool_call_id)
        if request is None:
            stale.append(f"tool call {message.tool_call_id}")
            continue
        _validate_seed_reply(request, response)
        mismatch = _binding_mismatch(request, response)
        if mismatch:
            stale.append(f"tool call {message.tool_call_id} ({mismatch})")
            continue
        reply = function_reply(request.call_id, request.tool_name, _adk_reply(request, response))
        answered.append((request, reply))
    if stale:
        return _stale(prepared, stale, pending)
    prepared.replies = _in_call_order(answered, pending) + unbound
    return prepared


def _adk_reply(request: PendingRequest, response: dict[str, Any]) -> dict[str, Any]:
    """A seed-style reply as the plan runtime reads it (a question's status is implied)."""
    if request.kind == "question" and "status" not in response:
        return {"status": "answered", **response}
    return response


def _unbound_reply(response: dict[str, Any], pending: list[PendingRequest]) -> types.Content:
    """A reply without a call id, named for the kind of request its shape answers."""
    if "answer" in response:
        answer = response.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise BadRunInput("a question reply needs a non-empty string 'answer'")
        name = "ask_user_question"
        response = {"status": "answered", **response}
    elif response.get("status") in ("approved", "rejected"):
        _optional_str(response, "reviewer_note")
        _optional_str(response, "content")
        decisions = {p.tool_name for p in pending if p.kind != "question"}
        # With no open decision (or both kinds open) submit() says so with its code.
        name = decisions.pop() if len(decisions) == 1 else "exit_plan_mode"
    else:
        raise BadRunInput(
            'a reply without a toolCallId must be {"answer": …} or '
            '{"status": "approved" | "rejected"}'
        )
    return types.Content(
        role="user",
        parts=[types.Part(function_response=types.FunctionResponse(name=name, response=response))],
    )


def _stale(prepared: PreparedRun, stale: list[str], pending: list[PendingRequest]) -> PreparedRun:
    waiting = ", ".join(p.approval_id for p in pending) or "none"
    prepared.stale = (
        f"not pending any more: {', '.join(stale)}. The request was already answered, "
        f"withdrawn or replaced; nothing was changed. Pending now: {waiting}."
    )
    prepared.state_delta = None
    return prepared


def _tool_message_json(message: ToolMessage) -> dict[str, Any]:
    content = message.content
    if not isinstance(content, str):
        texts = [getattr(part, "text", None) or "" for part in content]
        content = "".join(texts)
    try:
        value = json.loads(content)
    except ValueError:
        raise BadRunInput(
            f"the tool message for {message.tool_call_id} must hold a JSON object"
        ) from None
    if not isinstance(value, dict):
        raise BadRunInput(f"the tool message for {message.tool_call_id} must hold a JSON object")
    return value


def _validate_seed_reply(request: PendingRequest, response: dict[str, Any]) -> None:
    """The original demo's replies: ``{status, reviewer_note}`` or ``{answer, question_id}``."""
    if request.kind == "question":
        answer = response.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise BadRunInput("a question reply needs a non-empty string 'answer'")
        return
    if response.get("status") not in ("approved", "rejected"):
        raise BadRunInput(
            f"a {REASONS[request.kind]} reply needs status 'approved' or 'rejected', "
            f"got {response.get('status')!r}"
        )
    _optional_str(response, "reviewer_note")
    _optional_str(response, "content")


def _optional_str(payload: dict[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is not None and not isinstance(value, str):
        raise BadRunInput(f"'{name}' must be a string")
    return value


def _binding_mismatch(request: PendingRequest, payload: Any) -> str | None:
    """An approval binds to the request, revision and content hash the reviewer saw."""
    if not isinstance(payload, dict):
        return None
    given = payload.get("approval_id")
    if given is not None and given != request.approval_id:
        return "it answers another request"
    given = payload.get("revision")
    if given is not None and request.revision is not None and given != request.revision:
        return f"revision {given} was reviewed, revision {request.revision} is pending"
    given = payload.get("sha256")
    if given is not None and request.sha256 is not None and given != request.sha256:
        return "the reviewed plan content differs (sha256)"
    return None


def reply_for(request: PendingRequest, entry: ResumeEntry) -> types.Content:
    """The bound PlanSession reply for one resume entry; raises BadRunInput when malformed."""
    payload = entry.payload if entry.payload is not None else {}
    if not isinstance(payload, dict):
        raise BadRunInput(f"the payload for interrupt {entry.interrupt_id!r} must be an object")
    note = _optional_str(payload, "reviewer_note")
    cancelled = entry.status == "cancelled"
    if request.kind == "question":
        if cancelled:
            return PlanSession.answer(
                request, "(The user dismissed this question without answering.)"
            )
        answer = payload.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            raise BadRunInput("a question needs a non-empty string 'answer'")
        return PlanSession.answer(request, answer)
    decision = "reject" if cancelled else _decision(payload)
    if decision not in ("approve", "reject"):
        raise BadRunInput(
            f"a {REASONS[request.kind]} interrupt needs 'decision': 'approve' or 'reject' "
            "(or the ADK shape 'status': 'approved' or 'rejected')"
        )
    if request.kind == "enter":
        return PlanSession.confirm_enter(request, decision == "approve", note)
    content = _optional_str(payload, "content")
    if decision == "approve":
        # An edited scope and the permission are checked where they are applied (a bad
        # one is refused with its reason and changes nothing).
        return PlanSession.approve(
            request,
            content=content,
            note=note,
            scope=payload.get("scope"),
            permission=payload.get("permission"),
        )
    if cancelled and not note:
        note = "The reviewer cancelled this approval request."
    return PlanSession.reject(request, note=note or "", content=content)


def _decision(payload: dict[str, Any]) -> Any:
    """``{"decision": "approve"}`` (the interrupt's schema) or the README's ADK shape
    ``{"status": "approved"}``; both given must agree."""
    decision = payload.get("decision")
    status = payload.get("status")
    if status is None:
        return decision
    from_status = _STATUS_DECISIONS.get(status) if isinstance(status, str) else None
    if from_status is None:
        raise BadRunInput(f"'status' must be 'approved' or 'rejected', got {status!r}")
    if decision is not None and decision != from_status:
        raise BadRunInput(f"'decision' {decision!r} contradicts 'status' {status!r}")
    return from_status


_STATUS_DECISIONS = {"approved": "approve", "rejected": "reject"}


def reply_id(call_id: str) -> str:
    """The message id of a human reply to a paused call, live and when rebuilt."""
    return f"reply:{call_id}"


# -- running ------------------------------------------------------------------------------


class EventTranslator:
    """ADK events to AG-UI text and tool events; partial text streams into one message."""

    def __init__(self) -> None:
        self.open_text: str | None = None

    def translate(self, event: Event) -> list[BaseEvent]:
        if event.author == "user" or event.content is None:
            return []
        parts = event.content.parts or []
        out: list[BaseEvent] = []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        if event.partial:
            if text:
                if self.open_text is None:
                    self.open_text = event.id
                    out.append(
                        TextMessageStartEvent(
                            message_id=event.id, role="assistant", timestamp=_now_ms()
                        )
                    )
                out.append(TextMessageContentEvent(message_id=self.open_text, delta=text))
            return out
        parent = self.open_text or event.id
        if self.open_text is not None:
            # The final event repeats the streamed text: close the message instead.
            out.append(TextMessageEndEvent(message_id=self.open_text))
            self.open_text = None
        elif text:
            out.append(
                TextMessageStartEvent(message_id=event.id, role="assistant", timestamp=_now_ms())
            )
            out.append(TextMessageContentEvent(message_id=event.id, delta=text))
            out.append(TextMessageEndEvent(message_id=event.id))
        for part in parts:
            if is_confirmation(part):
                continue  # ADK's pause of a call: the interrupt shows it, not a tool call
            call = part.function_call
            if call is not None and call.id:
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call.id,
                        tool_call_name=call.name or "",
                        parent_message_id=parent,
                        timestamp=_now_ms(),
                    )
                )
                out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=_dumps(call.args or {})))
                out.append(ToolCallEndEvent(tool_call_id=call.id))
            response = part.function_response
            if response is not None and response.id:
                out.append(
                    ToolCallResultEvent(
                        message_id=f"{event.id}:{response.id}",
                        tool_call_id=response.id,
                        content=_dumps(response.response or {}),
                        role="tool",
                        timestamp=_now_ms(),
                    )
                )
        return out

    def close(self) -> list[BaseEvent]:
        if self.open_text is None:
            return []
        message_id, self.open_text = self.open_text, None
        return [TextMessageEndEvent(message_id=message_id)]


def event_text(event: BaseEvent) -> str:
    """An event's JSON, as ``EventEncoder`` writes it (``model_dump_json(by_alias=True)``).
    A text no UTF-8 can hold -- an unpaired surrogate a tool or a model passed on -- fails
    that serialiser and would end the stream mid-run: such an event is written through
    ``json`` instead, the surrogate replaced by U+FFFD as the stores replace it."""
    try:
        return event.model_dump_json(by_alias=True)
    except PydanticSerializationError:
        return clean_json(json.dumps(event.model_dump(mode="json", by_alias=True)))


def sse_frame(event_json: str) -> str:
    """An event's SSE frame from its JSON (``model_dump_json(by_alias=True)``), as AG-UI's
    ``EventEncoder`` writes it: the JSON is made once for the response and the followers."""
    return f"data: {event_json}\n\n"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def is_confirmation(part: types.Part) -> bool:
    """ADK's tool confirmation, with which a call outside the plan's scope (or an edit
    under review) pauses and resumes. It is plumbing: the paused call's interrupt and
    its reply are what a person sees."""
    call, response = part.function_call, part.function_response
    name = call.name if call is not None else response.name if response is not None else None
    return name == CONFIRMATION_CALL


class StateMirror:
    """The state last sent to the client; each change goes out as a JSON Patch.

    The mirror owns the dicts it is given (``shared_state`` makes fresh ones) and never
    changes a value in place: a change replaces the top-level value, so a state can share
    every untouched value with the one before it instead of being deep-copied per event."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def update(self, new_state: dict[str, Any]) -> StateDeltaEvent | None:
        """Move to ``new_state``, a fresh JSON value nobody else holds."""
        # Plain RFC 6902 dicts: the event validates them into AG-UI's operation models.
        operations: list[Any] = [
            {"op": "remove", "path": _pointer(key)} for key in self.state if key not in new_state
        ]
        for key, value in new_state.items():
            operations += _value_patch(_pointer(key), self.state.get(key, _ABSENT), value)
        self.state = new_state
        if not operations:
            return None
        return StateDeltaEvent(delta=operations, timestamp=_now_ms())

    def apply_delta(self, delta: dict[str, Any], keys: StateKeys) -> StateDeltaEvent | None:
        """The patch of the keys an event's delta writes: the rest of the state is
        neither copied nor compared."""
        touched = {k: _jsonable(v) for k, v in delta.items() if k in keys.all}
        operations: list[Any] = []
        for key, value in touched.items():
            operations += _value_patch(_pointer(key), self.state.get(key, _ABSENT), value)
        if not operations:
            return None
        self.state = {**self.state, **touched}
        return StateDeltaEvent(delta=operations, timestamp=_now_ms())


_ABSENT = object()


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def _value_patch(path: str, old: Any, new: Any) -> list[dict[str, Any]]:
    """JSON Patch operations turning the value at ``path`` from ``old`` into ``new``.

    An object is patched field by field, one level down: a plan or protocol state changes
    a few fields per event, and a field's new value is small beside the diff a general
    algorithm would spend finding a finer patch."""
    if old is _ABSENT:
        return [{"op": "add", "path": path, "value": new}]
    if old == new:
        return []
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [{"op": "replace", "path": path, "value": new}]
    operations: list[dict[str, Any]] = [
        {"op": "remove", "path": path + _pointer(name)} for name in old if name not in new
    ]
    for name, value in new.items():
        before = old.get(name, _ABSENT)
        if before is _ABSENT:
            operations.append({"op": "add", "path": path + _pointer(name), "value": value})
        elif before != value:
            operations.append({"op": "replace", "path": path + _pointer(name), "value": value})
    return operations


def _run_config() -> RunConfig:
    # Models that stream (Gemini, LiteLLM) send partial text; the demo answers whole.
    return RunConfig(streaming_mode=StreamingMode.SSE)


async def run_events(
    session: PlanSession, prepared: PreparedRun, *, thread_id: str, run_id: str
) -> AsyncIterator[BaseEvent]:
    """One AG-UI run over one ADK turn; never raises, a failure ends with RUN_ERROR."""
    keys = StateKeys.of(session)
    yield RunStartedEvent(
        thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION, timestamp=_now_ms()
    )
    try:
        # A new thread's session was created empty just now: nothing to read back.
        state = {} if prepared.new_thread else await _session_state(session, keys)
        protocol_before = _protocol_view(state, keys)
        if prepared.state_delta:
            # The runner writes the selection with the user's turn, before the first event.
            shared = {k: v for k, v in prepared.state_delta.items() if k in keys.all}
            state.update(_jsonable(shared))
        mirror = StateMirror(state)
        yield StateSnapshotEvent(snapshot=copy.deepcopy(state), timestamp=_now_ms())
        if prepared.stale is not None:
            yield RunErrorEvent(message=prepared.stale, code=STALE_RESUME, timestamp=_now_ms())
            return
        message = prepared.message
        unanswered: list[str] = []
        if prepared.replies:
            submitted, refused = await _submit(session, prepared.replies)
            waiting = await session.awaiting()
            if refused is not None or not waiting.ready:
                # Each answer is recorded as it arrives; the run resumes only once every
                # paused call is answered. Until then this run reports what was recorded.
                replies, _ = await _reply_results(session, submitted)
                for reply in replies:
                    yield reply
                delta = mirror.update(await _session_state(session, keys))
                if delta is not None:
                    yield delta
                if refused is not None:
                    yield _reply_error(refused)
                    return
                yield _finished(thread_id, run_id, waiting.open)
                return
            message = waiting.message
            assert message is not None  # awaiting() is ready: its resume message exists
            # The decisions this run carried, and the replies the resume message holds; a
            # paused call resumes through ADK's confirmation, whose id is not the call's.
            unanswered = list(dict.fromkeys([*submitted, *_call_ids(message, confirmations=False)]))
        translator = EventTranslator()
        assert message is not None
        async for event in session.run(
            message, state_delta=prepared.state_delta, run_config=_run_config()
        ):
            if unanswered:
                # A reply is resolved when the plan runtime takes it, which may come after
                # the run's first event (protocol routing writes state before that).
                replies, unanswered = await _reply_results(session, unanswered)
                for reply in replies:
                    yield reply
            for translated in translator.translate(event):
                yield translated
            if event.actions and event.actions.state_delta:
                delta = mirror.apply_delta(event.actions.state_delta, keys)
                if delta is not None:
                    yield delta
        for translated in translator.close():
            yield translated
        if unanswered:
            replies, _ = await _reply_results(session, unanswered)
            for reply in replies:
                yield reply
        # A paused tool writes its state outside the event stream: reconcile with the
        # session as stored, so snapshot + deltas equal it exactly.
        # The run settled by reading the session's state (see ``PlanSession.run``): use
        # that read rather than another, when there was one.
        settled = session.settled_state
        delta = mirror.update(
            shared_state(settled, keys)
            if settled is not None
            else await _session_state(session, keys)
        )
        if delta is not None:
            yield delta
        failure = protocol_failure(protocol_before, _protocol_view(mirror.state, keys))
        pending = await session.pending()
    except Exception as exc:  # the run must end with a terminal event, never a broken stream
        code, message = failure_text(exc)
        yield RunErrorEvent(message=message, code=code or AGENT_ERROR, timestamp=_now_ms())
        return
    if failure is not None:
        # AG-UI: a run that failed must not be reported as a success.
        yield failure
        return
    yield _finished(thread_id, run_id, pending)


def _finished(thread_id: str, run_id: str, pending: list[PendingRequest]) -> RunFinishedEvent:
    """The end of a run: the requests still waiting as interrupts, or success."""
    outcome: Any
    if pending:
        outcome = RunFinishedInterruptOutcome(interrupts=[interrupt_for(p) for p in pending])
    else:
        outcome = RunFinishedSuccessOutcome()
    return RunFinishedEvent(
        thread_id=thread_id, run_id=run_id, outcome=outcome, timestamp=_now_ms()
    )


async def _submit(
    session: PlanSession, replies: Sequence[types.Content]
) -> tuple[list[str], ReplyError | None]:
    """Record each reply the moment it is taken; stop at the first refused one (the ones
    before it stay recorded: each is an answer in its own right)."""
    submitted: list[str] = []
    for reply in replies:
        try:
            await session.submit(reply)
        except ReplyError as exc:
            return submitted, exc
        call_id = _call_ids(reply)[0] or ""
        if not call_id:  # a reply without id: the request it matched
            call_id = await _matched_call(session, reply)
        submitted.append(call_id)
    return submitted, None


async def _matched_call(session: PlanSession, reply: types.Content) -> str:
    state = await session.plan_state()
    response = replies_in(reply)[0].response
    for call_id, resolution in reversed(state.resolutions.items()):
        if resolution.reply == response:
            return call_id
    return ""


def _call_ids(message: types.Content, *, confirmations: bool = True) -> list[str]:
    return [r.id or "" for r in replies_in(message) if confirmations or r.name != CONFIRMATION_CALL]


def _reply_error(exc: ReplyError) -> RunErrorEvent:
    """A refused reply as the run's error: the code once, the message and what to do."""
    return RunErrorEvent(
        message=f"{exc.message}. {exc.hint[:1].upper()}{exc.hint[1:]}.",
        code=exc.code.value,
        timestamp=_now_ms(),
    )


def stopped_event() -> RunErrorEvent:
    """How a run the user stopped ends."""
    return _run_error(
        RUN_STOPPED, "Stopped by you. Nothing after this point ran; send a message to go on."
    )


def _protocol_view(state: dict[str, Any], keys: StateKeys) -> dict[str, Any]:
    """The protocol mirror in shared state (stored as an object, or as JSON text)."""
    value = state.get(keys.protocol) if keys.protocol else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def lease_lost_event() -> RunErrorEvent:
    return _run_error(
        ErrorCode.RUN_LEASE_LOST,
        "this server lost the thread (its lease could not be renewed in time) and stopped "
        "the run; what was stored is kept -- send the message again to continue",
    )


def send_failed_event() -> RunErrorEvent:
    return _run_error(
        ErrorCode.AGENT_ERROR,
        "the server could not send one of the run's events and stopped streaming it; what "
        "was stored is kept -- reload the thread to see it",
    )


def _run_error(code: ErrorCode, message: str) -> RunErrorEvent:
    return RunErrorEvent(message=message, code=code.value, timestamp=_now_ms())


def protocol_failure(before: dict[str, Any], after: dict[str, Any]) -> RunErrorEvent | None:
    """``RUN_ERROR`` when the protocol failed THIS run (its completion gate, or a run that
    could not start): the mirror names a failed run that was not already failed before."""
    if after.get("run_status") != "failed":
        return None
    same_run = before.get("run_id") == after.get("run_id")
    if same_run and before.get("run_status") == "failed":
        return None  # an earlier run's failure, still on display
    code = str(after.get("run_outcome_code") or PROTOCOL_RUN_FAILED)
    message = str(after.get("run_outcome_message") or code)
    return RunErrorEvent(message=message, code=code, timestamp=_now_ms())


async def _session_state(session: PlanSession, keys: StateKeys) -> dict[str, Any]:
    stored = await session.session(events=False)
    return shared_state(stored.state if stored is not None else {}, keys)


async def _reply_results(
    session: PlanSession, call_ids: Sequence[str]
) -> tuple[list[BaseEvent], list[str]]:
    """The canonical result of each human reply this run carried, as a tool result; and
    the calls whose reply is not resolved yet."""
    state = await session.plan_state()
    out: list[BaseEvent] = []
    waiting: list[str] = []
    for call_id in call_ids:
        content = state.reply_result(call_id)
        if content is None:
            waiting.append(call_id)
            continue
        out.append(
            ToolCallResultEvent(
                message_id=reply_id(call_id),
                tool_call_id=call_id,
                content=_dumps(content),
                role="tool",
                timestamp=_now_ms(),
            )
        )
    return out, waiting
