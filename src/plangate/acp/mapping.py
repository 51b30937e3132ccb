"""Pure mapping between plangate and the Agent Client Protocol: ADK events, plan records,
todos and pending requests in; ACP session updates, mode state and permission options out.

Nothing here does I/O: :mod:`plangate.acp.agent` reads the session and sends what these
functions build.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_current_mode,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AcceptElicitationResponse,
    AgentPlanUpdate,
    AllowedOutcome,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeniedOutcome,
    ElicitationFormSessionMode,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    PermissionOption,
    PlanEntry,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
)
from google.adk.events import Event
from google.genai import types

from plangate.adk.session import ModeState, PlanSession
from plangate.plan.record import PendingRequest, PlanRecord, PlanStatus
from plangate.plan.transitions import plan_steps

__all__ = [
    "DEFAULT_MODE",
    "MODE_CONFIG_ID",
    "MODE_IDS",
    "PLAN_MODE",
    "EventMapper",
    "ToolCallFields",
    "config_options",
    "elicited_words",
    "mode_changed",
    "mode_id",
    "next_message_notice",
    "not_sent_notice",
    "permission_options",
    "plan_entries",
    "plan_update",
    "prompt_text",
    "protocol_refusal",
    "reask_notice",
    "reply_for",
    "reply_with_words",
    "request_tool_call",
    "resolution_update",
    "session_modes",
    "shown_plan",
    "tool_kind",
    "tool_title",
    "unknown_mode_message",
    "wants_words",
    "withdrawn",
    "words_form",
    "words_prompt",
]

DEFAULT_MODE = "default"
PLAN_MODE = "plan"
MODE_IDS = (DEFAULT_MODE, PLAN_MODE)
MODE_CONFIG_ID = "mode"

_MODES = (
    SessionMode(
        id=DEFAULT_MODE,
        name="Default",
        description="Tools run as usual; the agent may propose a plan first.",
    ),
    SessionMode(
        id=PLAN_MODE,
        name="Plan",
        description="Read-only exploration; edits wait until you approve the plan.",
    ),
)

GATE_PREFIX = "PLAN_MODE_GATE"
PHASE_PREFIX = "ACTION_NOT_ALLOWED_IN_PHASE"
KEEP_PLANNING_NOTE = "The user chose to keep planning."
NO_ANSWER = "(no answer)"

_KINDS: dict[str, ToolKind] = {
    "Read": "read",
    "list_data_sources": "read",
    "inspect_schema": "read",
    "preview_table": "read",
    "Glob": "search",
    "Grep": "search",
    "lookup_values": "search",
    "Write": "edit",
    "Edit": "edit",
    "Bash": "execute",
    "run_sql_readonly": "execute",
    "enter_plan_mode": "switch_mode",
    "exit_plan_mode": "switch_mode",
    "update_plan_content": "think",
    "ask_user_question": "think",
    "todo_write": "think",
}
_TEXT_LIMIT = 4000
_DECISIONS = {
    "exit_plan_mode": {"approved": "Approved", "rejected": "Kept planning"},
    "enter_plan_mode": {"approved": "Entered Plan Mode", "rejected": "Declined Plan Mode"},
}


# -- modes --------------------------------------------------------------------------------


def mode_id(mode: ModeState) -> str:
    """The ACP mode the user sees: a pending selection wins, else whether the gate is on."""
    plan = mode.pending if mode.pending is not None else mode.active
    return PLAN_MODE if plan else DEFAULT_MODE


def session_modes(current: str) -> SessionModeState:
    return SessionModeState(current_mode_id=current, available_modes=list(_MODES))


def config_options(current: str) -> list[SessionConfigOptionSelect]:
    """The mode as a session config option (category ``mode``), the successor of modes."""
    return [
        SessionConfigOptionSelect(
            id=MODE_CONFIG_ID,
            name="Mode",
            description="Plan Mode: explore read-only and get the plan approved before editing.",
            category="mode",
            type="select",
            current_value=current,
            options=[SessionConfigSelectOption(value=m.id, name=m.name) for m in _MODES],
        )
    ]


def mode_changed(current: str) -> list[CurrentModeUpdate | ConfigOptionUpdate]:
    """The updates announcing a committed mode change, for mode and config-option clients."""
    return [
        update_current_mode(current),
        ConfigOptionUpdate(
            session_update="config_option_update", config_options=config_options(current)
        ),
    ]


def unknown_mode_message(value: str) -> str:
    return f"unknown session mode '{value}' — available modes: {', '.join(MODE_IDS)}"


# -- prompts ------------------------------------------------------------------------------


def prompt_text(blocks: Sequence[Any]) -> str:
    """The user's message from ACP content blocks: text as is, resources as references
    (embedded text resources inline). Images and audio are not advertised and skipped."""
    pieces: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            pieces.append(block.text)
        elif kind == "resource_link":
            pieces.append(f"[{block.name}]({block.uri})")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                pieces.append(f'<context uri="{resource.uri}">\n{text}\n</context>')
            else:
                pieces.append(f"[{resource.uri}]")
    return "\n".join(p for p in pieces if p).strip()


# -- tool calls ---------------------------------------------------------------------------


def tool_kind(name: str) -> ToolKind:
    return _KINDS.get(name, "other")


def tool_title(name: str, args: dict[str, Any]) -> str:
    path = args.get("path")
    if name in ("Read", "Edit", "Write") and isinstance(path, str):
        return f"{name} {path}"
    if name == "Glob":
        where = f" in {path}" if isinstance(path, str) and path else ""
        return f"Glob {args.get('pattern', '')}{where}"
    if name == "Grep":
        where = f" in {path}" if isinstance(path, str) and path else ""
        return f"Grep {args.get('pattern', '')!r}{where}"
    if name == "Bash":
        return f"Run {_clip(str(args.get('command', '')), 80)}"
    if name == "enter_plan_mode":
        return "Enter Plan Mode"
    if name == "exit_plan_mode":
        return "Submit the plan for approval"
    if name == "update_plan_content":
        return f"Update the plan ({args.get('mode') or 'append'})"
    if name == "ask_user_question":
        return _clip(str(args.get("question", "")), 120) or "Question"
    if name == "todo_write":
        return "Update todos"
    return name


def _locations(name: str, args: dict[str, Any], root: Path) -> list[ToolCallLocation] | None:
    path = args.get("path")
    if not isinstance(path, str) or not path or tool_kind(name) not in ("read", "search", "edit"):
        return None
    absolute = Path(path) if Path(path).is_absolute() else root / path
    return [ToolCallLocation(path=str(absolute))]


def _start(
    call_id: str, name: str, args: dict[str, Any], root: Path, *, waiting: bool
) -> ToolCallStart:
    content = None
    path = args.get("path")
    if name == "Edit" and isinstance(path, str):
        content = [
            tool_diff_content(
                str(root / path),
                str(args.get("new_string", "")),
                str(args.get("old_string", "")),
            )
        ]
    elif name == "Write" and isinstance(path, str):
        content = [tool_diff_content(str(root / path), str(args.get("content", "")))]
    return start_tool_call(
        call_id,
        tool_title(name, args),
        kind=tool_kind(name),
        # A human-in-the-loop call waits for the user; every other call runs now.
        status="pending" if waiting else "in_progress",
        content=content,
        locations=_locations(name, args, root),
        raw_input=args,
    )


def _result(call_id: str, name: str, result: dict[str, Any]) -> ToolCallProgress:
    error = result.get("error")
    if error is not None:
        text = str(error)
        if text.startswith(GATE_PREFIX):
            text = f"Refused by the plan gate: {text}"
        elif text.startswith(PHASE_PREFIX):
            text = f"Refused by the protocol phase: {text}"
        return update_tool_call(call_id, status="failed", content=[_text(text)], raw_output=result)
    # An edit keeps the diff it showed at the start; everything else gets a summary.
    content = None if name in ("Edit", "Write") else [_text(_summary(name, result))]
    return update_tool_call(call_id, status="completed", content=content, raw_output=result)


def _summary(name: str, result: dict[str, Any]) -> str:
    if name == "Read":
        return f"Read {result.get('path')} ({result.get('total_lines')} lines)"
    if name == "Glob":
        paths = [str(p) for p in result.get("paths") or []]
        return f"{len(paths)} paths\n" + "\n".join(paths[:50])
    if name == "Grep":
        return f"{len(result.get('matches') or [])} matches"
    if name == "Bash":
        output = (str(result.get("stdout") or "") + str(result.get("stderr") or "")).strip()
        return f"exit {result.get('exit_code')}\n```\n{_clip(output, _TEXT_LIMIT)}\n```"
    if name == "todo_write":
        return str(result.get("message") or "todos updated")
    if name == "ask_user_question" and result.get("answer") is not None:
        return f"Answer: {result['answer']}"
    decided = _DECISIONS.get(name, {}).get(str(result.get("status")))
    if decided is not None:
        note = result.get("reviewer_note")
        return f"{decided}: {note}" if note else f"{decided}."
    if "message" in result:
        return str(result["message"])
    return _clip(json.dumps(result, ensure_ascii=False, default=str), _TEXT_LIMIT)


def _text(text: str) -> Any:
    return tool_content(text_block(text))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def resolution_update(call_id: str, name: str, result: dict[str, Any]) -> ToolCallProgress:
    """The tool-call update for a human reply the plan runtime applied (its canonical result)."""
    return _result(call_id, name, result)


class EventMapper:
    """ADK events to ACP session updates for one turn (or one replay).

    Streamed (partial) text goes out as chunks and the final event, which repeats it, is
    skipped. It remembers which tool calls it started, their names, and which still run.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: dict[str, str] = {}
        self.running: set[str] = set()
        self._streamed = False

    def updates(self, event: Event) -> list[Any]:
        if event.content is None:
            return []
        parts = event.content.parts or []
        if event.author == "user":
            return self._user_parts(parts)
        out: list[Any] = []
        if event.partial:
            for part in parts:
                if part.text:
                    out.append(_chunk(part))
                    self._streamed = True
            return out
        streamed, self._streamed = self._streamed, False
        waiting = set(event.long_running_tool_ids or ())
        for part in parts:
            if part.text and not streamed:
                out.append(_chunk(part))
            call = part.function_call
            if call is not None and call.id:
                name = call.name or ""
                self.started[call.id] = name
                if call.id not in waiting:
                    self.running.add(call.id)
                args = dict(call.args or {})
                out.append(_start(call.id, name, args, self.root, waiting=call.id in waiting))
            response = part.function_response
            if response is not None and response.id:
                self.running.discard(response.id)
                name = response.name or self.started.get(response.id, "")
                out.append(_result(response.id, name, dict(response.response or {})))
        return out

    def _user_parts(self, parts: Sequence[types.Part]) -> list[Any]:
        """A replayed user turn: its text (human replies are shown by ``resolution_update``)."""
        return [update_user_message_text(p.text) for p in parts if p.text]

    def interrupted(self, reason: str) -> list[ToolCallProgress]:
        """Close the calls still running when a turn stops early."""
        out = [update_tool_call(c, status="failed", content=[_text(reason)]) for c in self.running]
        self.running.clear()
        return out


def _chunk(part: types.Part) -> Any:
    if part.thought:
        return update_agent_thought_text(part.text or "")
    return update_agent_message_text(part.text or "")


# -- plans --------------------------------------------------------------------------------


def plan_entries(record: PlanRecord | None, todos: Sequence[Any] | None) -> list[PlanEntry]:
    """What the editor's plan view shows: the plan's steps while it is being made, then the
    todos that track its implementation (the approved plan's steps until there are any)."""
    if record is not None and record.is_gate_active():
        return _steps(record.content)
    cleaned = [t for t in todos or () if isinstance(t, dict) and t.get("content")]
    if cleaned:
        return [
            PlanEntry(
                content=str(t["content"]),
                priority="medium",
                status=t.get("status")
                if t.get("status") in ("pending", "in_progress", "completed")
                else "pending",
            )
            for t in cleaned
        ]
    if record is not None and record.status is PlanStatus.APPROVED:
        return _steps(record.content)
    return []


def _steps(content: str) -> list[PlanEntry]:
    return [PlanEntry(content=s, priority="medium", status="pending") for s in plan_steps(content)]


def plan_update(entries: Sequence[PlanEntry]) -> AgentPlanUpdate:
    return update_plan(entries)


# -- human-in-the-loop --------------------------------------------------------------------


class ToolCallFields:
    """A pending request shown as a tool call: the card update and the permission subject."""

    def __init__(
        self, request: PendingRequest, record: PlanRecord | None, plan_file: Path | None = None
    ) -> None:
        payload = request.payload
        self.call_id = request.call_id
        self.kind: ToolKind = "switch_mode" if request.kind in ("enter", "exit") else "think"
        self.content: list[Any] | None = None
        self.locations: list[ToolCallLocation] | None = None
        if request.kind == "exit":
            content = shown_plan(request, record)
            self.title = f"Approve plan (revision {request.revision})"
            self.raw_input: dict[str, Any] = {
                "plan": content,
                "revision": request.revision,
                "sha256": request.sha256,
                "summary": payload.get("message"),
                "objective": payload.get("objective"),
                "approval_id": request.approval_id,
            }
            self.content = [_text(content)] if content else []
            if plan_file is not None:
                self.raw_input["plan_file"] = str(plan_file)
                self.locations = [ToolCallLocation(path=str(plan_file))]
                self.content.append(
                    _text(
                        f"The plan is also in {plan_file}: edit it there and save before "
                        "you answer, and the saved text is what you approve."
                    )
                )
            self.content = self.content or None
        elif request.kind == "enter":
            objective = str(payload.get("objective") or "")
            self.title = (
                f"Enter Plan Mode: {_clip(objective, 80)}" if objective else "Enter Plan Mode"
            )
            self.raw_input = {"objective": objective, "approval_id": request.approval_id}
            self.content = [_text(f"The agent asks to plan before acting: {objective}")]
        else:
            question = str(payload.get("message") or "")
            self.title = _clip(question, 120) or "Question"
            self.raw_input = {
                "question": question,
                "options": list(payload.get("options") or []),
                "question_id": request.question_id,
                "approval_id": request.approval_id,
            }

    def card(self, *, started: bool) -> ToolCallStart | ToolCallProgress:
        """The session update that shows the request: a new tool call, or an update of the
        call already on screen."""
        if started:
            return update_tool_call(
                self.call_id,
                title=self.title,
                kind=self.kind,
                status="pending",
                content=self.content,
                locations=self.locations,
                raw_input=self.raw_input,
            )
        return start_tool_call(
            self.call_id,
            self.title,
            kind=self.kind,
            status="pending",
            content=self.content,
            locations=self.locations,
            raw_input=self.raw_input,
        )

    def subject(self) -> ToolCallUpdate:
        return ToolCallUpdate(
            tool_call_id=self.call_id,
            title=self.title,
            kind=self.kind,
            status="pending",
            content=self.content,
            locations=self.locations,
            raw_input=self.raw_input,
        )


def request_tool_call(
    request: PendingRequest, record: PlanRecord | None, plan_file: Path | None = None
) -> ToolCallFields:
    return ToolCallFields(request, record, plan_file)


def shown_plan(request: PendingRequest, record: PlanRecord | None) -> str:
    """The plan text an approval request shows (the revision it is bound to)."""
    return str(request.payload.get("content") or (record.content if record else ""))


IN_WORDS = "in_words"
WORDS_FIELD = "text"
"""The option that asks for free text (an answer, a rejection note) instead of a choice."""


def permission_options(request: PendingRequest) -> list[PermissionOption]:
    if request.kind == "exit":
        return [
            PermissionOption(option_id="approve", name="Approve", kind="allow_once"),
            PermissionOption(option_id="keep_planning", name="Keep planning", kind="reject_once"),
            PermissionOption(option_id=IN_WORDS, name="Reject with a note", kind="reject_once"),
        ]
    if request.kind == "enter":
        return [
            PermissionOption(option_id="enter", name="Enter Plan Mode", kind="allow_once"),
            PermissionOption(option_id="no", name="No", kind="reject_once"),
            PermissionOption(option_id=IN_WORDS, name="No, with a note", kind="reject_once"),
        ]
    options = [
        PermissionOption(option_id=str(index), name=str(text), kind="allow_once")
        for index, text in enumerate(request.payload.get("options") or [])
    ]
    if not options:
        options.append(PermissionOption(option_id="skip", name="Skip", kind="reject_once"))
    options.append(
        PermissionOption(option_id=IN_WORDS, name="Answer in my own words", kind="allow_once")
    )
    return options


def wants_words(outcome: AllowedOutcome | DeniedOutcome) -> bool:
    """Whether the user picked the free-text option."""
    return isinstance(outcome, AllowedOutcome) and outcome.option_id == IN_WORDS


def reply_for(
    request: PendingRequest, outcome: AllowedOutcome | DeniedOutcome, content: str | None = None
) -> types.Content | None:
    """The bound reply for the option the user picked; None when the prompt was cancelled.
    ``content`` is the plan as the user edited it (an approval request only).

    Raises ValueError for an option that was not offered, or for the free-text option
    (its reply needs the text: :func:`reply_with_words`).
    """
    if isinstance(outcome, DeniedOutcome) or outcome.outcome == "cancelled":
        return None
    choice = outcome.option_id
    if request.kind == "exit":
        if choice == "approve":
            return PlanSession.approve(request, content=content)
        if choice == "keep_planning":
            return PlanSession.reject(request, note=KEEP_PLANNING_NOTE, content=content)
    elif request.kind == "enter":
        if choice in ("enter", "no"):
            return PlanSession.confirm_enter(request, choice == "enter")
    else:
        options = [str(o) for o in request.payload.get("options") or []]
        if not options and choice == "skip":
            return PlanSession.answer(request, NO_ANSWER)
        if choice.isdigit() and int(choice) < len(options):
            return PlanSession.answer(request, options[int(choice)])
    raise ValueError(f"option {choice!r} was not offered for this {request.kind} request")


def reply_with_words(
    request: PendingRequest, text: str, content: str | None = None
) -> types.Content:
    """The bound reply carrying the user's own words: the answer to a question, the note
    that rejects a plan (with the edited plan, if any) or declines Plan Mode."""
    if request.kind == "exit":
        return PlanSession.reject(request, note=text, content=content)
    if request.kind == "enter":
        return PlanSession.confirm_enter(request, False, text)
    return PlanSession.answer(request, text)


def words_prompt(request: PendingRequest) -> str:
    """What the user is asked to type for the free-text option."""
    if request.kind == "exit":
        return f"What should change in plan revision {request.revision}?"
    if request.kind == "enter":
        return "Why not plan first? Your note goes to the agent."
    return str(request.payload.get("message") or "Your answer")


def next_message_notice(request: PendingRequest) -> str:
    """The agent message binding the user's next prompt to an open request."""
    if request.kind == "exit":
        what = f"the note that rejects plan revision {request.revision}"
    elif request.kind == "enter":
        what = "your note declining Plan Mode"
    else:
        what = f"your answer to “{_clip(str(request.payload.get('message') or ''), 120)}”"
    return (
        f"Type {what} as your next message: it is sent to this request, not as a new task. "
        "(/plan off leaves Plan Mode instead.)"
    )


def reask_notice(request: PendingRequest) -> str:
    """After a load: the request still open, asked again at the next message."""
    if request.kind == "exit":
        what = f"The approval of plan revision {request.revision} is still open"
    elif request.kind == "enter":
        what = "The agent's request to enter Plan Mode is still open"
    else:
        what = f"The question “{_clip(str(request.payload.get('message') or ''), 120)}” is open"
    return f"{what}: it is asked again when you send your next message."


def not_sent_notice(text: str) -> str:
    return (
        f"Your message “{_clip(text, 120)}” was not sent to the agent while a request is "
        "open; send it again once the request is answered."
    )


def words_form(request: PendingRequest, session_id: str) -> ElicitationFormSessionMode:
    """The form elicitation asking for the free-text reply (one required text field)."""
    return ElicitationFormSessionMode(
        session_id=session_id,
        tool_call_id=request.call_id,
        requested_schema=ElicitationSchema(
            properties={
                WORDS_FIELD: ElicitationStringPropertySchema(
                    type="string", title=words_prompt(request), min_length=1
                )
            },
            required=[WORDS_FIELD],
        ),
    )


def elicited_words(response: Any) -> str | None:
    """The text an accepted form elicitation returned; None when declined or empty."""
    if not isinstance(response, AcceptElicitationResponse):
        return None
    text = str((response.content or {}).get(WORDS_FIELD) or "").strip()
    return text or None


def withdrawn(call_id: str) -> ToolCallProgress:
    """A request that stopped being pending while the editor asked about it."""
    return update_tool_call(
        call_id,
        status="failed",
        content=[
            _text(
                "No longer pending: the request was withdrawn (the user left plan mode) "
                "or answered elsewhere; nothing was changed."
            )
        ],
    )


# -- protocol governance ------------------------------------------------------------------


def protocol_refusal(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """What to tell the user when protocol governance failed THIS turn's run (its
    completion gate refused to let it end as done); None otherwise. A failure already on
    display before the turn is not news."""
    if not after or after.get("run_status") != "failed":
        return None
    if (
        before
        and before.get("run_id") == after.get("run_id")
        and before.get("run_status") == "failed"
    ):
        return None
    code = str(after.get("run_outcome_code") or "PROTOCOL_RUN_FAILED")
    message = str(after.get("run_outcome_message") or "")
    detail = message if message.startswith(code) else f"{code}: {message}" if message else code
    protocol = f"{after.get('protocol')}@{after.get('version')}"
    return (
        f"Protocol governance stopped this run under {protocol} — {detail}.\n"
        "Type “try again” to retry: the agent can then hand the task over to the protocol "
        "it needs (such as data-analysis). Or rephrase the request."
    )
