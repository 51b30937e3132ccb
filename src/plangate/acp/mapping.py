"""Pure mapping between plangate and the Agent Client Protocol: ADK events, plan records,
todos and protocol state in; ACP session updates and mode state out (pending requests and
their replies are :mod:`plangate.acp.requests`).

Nothing here does I/O: :mod:`plangate.acp.agent` reads the session and sends what these
functions build.
"""

from __future__ import annotations

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
    AgentPlanUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PlanEntry,
    PlanEntryStatus,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
)
from google.adk.events import Event
from google.genai import types

from plangate.acp.markdown import data_table, escaped, fenced
from plangate.adk.capability import CONFIRMATION_CALL
from plangate.adk.session import ModeState
from plangate.plan.amendments import WAITING_STATUSES
from plangate.plan.record import PlanRecord, PlanStatus
from plangate.plan.transitions import plan_steps
from plangate.result_text import describe_result, summarize_result
from plangate.store.storable import clean_text

__all__ = [
    "DEFAULT_MODE",
    "MODE_CONFIG_ID",
    "MODE_IDS",
    "PLAN_MODE",
    "EventMapper",
    "clip",
    "config_options",
    "mode_changed",
    "mode_id",
    "plan_entries",
    "plan_update",
    "prompt_text",
    "protocol_refusal",
    "resolution_update",
    "session_modes",
    "text_content",
    "tool_kind",
    "tool_title",
    "unknown_mode_message",
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
_DATA_RESULTS = ("run_sql_readonly", "preview_table")


# -- modes --------------------------------------------------------------------------------


def mode_id(mode: ModeState) -> str:
    """The ACP mode the user sees: a pending selection wins, else whether the gate is on."""
    plan = mode.pending if mode.pending is not None else mode.active
    return PLAN_MODE if plan else DEFAULT_MODE


def session_modes(current: str) -> SessionModeState:
    return SessionModeState(current_mode_id=current, available_modes=list(_MODES))


def config_options(current: str) -> list[SessionConfigOptionSelect | SessionConfigOptionBoolean]:
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
    (embedded text resources inline). Images and audio are not advertised and skipped.
    An unpaired surrogate or a NUL (a client's broken escape) becomes U+FFFD, as in
    every store: the message is kept, and nothing downstream refuses or cannot send it."""
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
    return clean_text("\n".join(p for p in pieces if p).strip())


# -- tool calls ---------------------------------------------------------------------------


def tool_kind(name: str) -> ToolKind:
    return _KINDS.get(name, "other")


def tool_title(name: str, args: dict[str, Any]) -> str:
    # Paths, patterns and commands are the model's: shown as written, never as Markdown.
    path = args.get("path")
    if name in ("Read", "Edit", "Write") and isinstance(path, str):
        return f"{name} {escaped(path)}"
    if name == "Glob":
        where = f" in {escaped(path)}" if isinstance(path, str) and path else ""
        return f"Glob {escaped(str(args.get('pattern', '')))}{where}"
    if name == "Grep":
        where = f" in {escaped(path)}" if isinstance(path, str) and path else ""
        return f"Grep {escaped(repr(args.get('pattern', '')))}{where}"
    if name == "Bash":
        return f"Run {escaped(clip(str(args.get('command', '')), 80))}"
    if name == "enter_plan_mode":
        return "Enter Plan Mode"
    if name == "exit_plan_mode":
        return "Submit the plan for approval"
    if name == "update_plan_content":
        return f"Update the plan ({args.get('mode') or 'append'})"
    if name == "ask_user_question":
        return escaped(clip(str(args.get("question", "")), 120)) or "Question"
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
    if result.get("error"):
        outcome = describe_result(name, result)
        code = f" ({outcome.code.value})" if outcome.code is not None else ""
        text = f"{outcome.text}{code}"
        if outcome.refused_by:
            text = f"Refused by the {outcome.refused_by}{code}: {outcome.text}"
        if outcome.hint:
            text += f"\n\nWhat to do: {outcome.hint}"
        return update_tool_call(
            call_id, status="failed", content=[text_content(text)], raw_output=result
        )
    # An edit keeps the diff it showed at the start; everything else gets a summary.
    content = None if name in ("Edit", "Write") else [text_content(_summary(name, result))]
    return update_tool_call(call_id, status="completed", content=content, raw_output=result)


def _summary(name: str, result: dict[str, Any]) -> str:
    """The shared one-line summary; an editor has room for the paths and the output."""
    if name == "Glob":
        paths = [str(p) for p in result.get("paths") or []]
        return f"{len(paths)} paths\n" + "\n".join(paths[:50])
    if name == "Bash":
        output = (str(result.get("stdout") or "") + str(result.get("stderr") or "")).strip()
        return f"exit {result.get('exit_code')}\n{fenced(clip(output, _TEXT_LIMIT))}"
    if name in _DATA_RESULTS and isinstance(result.get("rows"), list):
        return _data_summary(name, result)
    if name == "lookup_values" and isinstance(result.get("values"), list):
        shown = data_table(["value", "count"], result["values"])
        return (
            f"{result.get('distinct_count')} distinct values of {result.get('column')}\n\n{shown}"
        )
    return clip(summarize_result(name, result), _TEXT_LIMIT)


def _data_summary(name: str, result: dict[str, Any]) -> str:
    """A query result or table preview as the Markdown table the editor renders."""
    rows = [r for r in result["rows"] if isinstance(r, dict)]
    columns = [str(c) for c in result.get("columns") or (rows[0].keys() if rows else [])]
    if name == "preview_table":
        head = f"{result.get('table')}: first {len(rows)} of {result.get('total_rows')} rows"
    else:
        head = f"{len(rows)} row{'' if len(rows) == 1 else 's'}"
        if result.get("truncated"):
            head += " (truncated: the result has more)"
    return f"{head}\n\n{data_table(columns, rows)}" if columns else head


def text_content(text: str) -> Any:
    return tool_content(text_block(text))


def clip(text: str, limit: int) -> str:
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
            if call is not None and call.id and call.name == CONFIRMATION_CALL:
                continue  # ADK's pause of a call for the human: the request is its card
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
                if _waits_for_human(response):
                    continue  # the call is asked about next, on its own card
                name = response.name or self.started.get(response.id, "")
                out.append(_result(response.id, name, dict(response.response or {})))
        return out

    def _user_parts(self, parts: Sequence[types.Part]) -> list[Any]:
        """A replayed user turn: its text (human replies are shown by ``resolution_update``)."""
        return [update_user_message_text(p.text) for p in parts if p.text]

    def interrupted(self, reason: str) -> list[ToolCallProgress]:
        """Close the calls still running when a turn stops early."""
        out = [
            update_tool_call(c, status="failed", content=[text_content(reason)])
            for c in self.running
        ]
        self.running.clear()
        return out


def _waits_for_human(response: types.FunctionResponse) -> bool:
    """A call's result while it waits for an amendment, edit review or tool approval."""
    result = response.response or {}
    return str(result.get("status") or "") in WAITING_STATUSES and "error" not in result


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
                status=_entry_status(t.get("status")),
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


def _entry_status(value: object) -> PlanEntryStatus:
    if value == "in_progress":
        return "in_progress"
    return "completed" if value == "completed" else "pending"
