"""Slash commands in the editor: the terminal's ``/plan``, ``/status`` and ``/journal``.

They are advertised with an ``available_commands_update`` and arrive as prompt text
("/plan off"). Parsing and the Markdown the editor shows are pure; the agent runs them
through the session.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.schema import (
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    UnstructuredCommandInput,
)

from plangate.acp.markdown import cell, table
from plangate.adk.session import ModeState
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.store.store import JournalEntry

__all__ = [
    "Command",
    "available_commands",
    "journal_markdown",
    "parse_command",
    "status_markdown",
]

_COMMANDS = (
    AvailableCommand(
        name="plan",
        description="Select Plan Mode; '/plan <message>' also sends the message, "
        "'/plan off' leaves Plan Mode (cancels an active plan), '/plan done' closes the "
        "approved plan (its scope and permission hold until then).",
        input=AvailableCommandInput(
            root=UnstructuredCommandInput(hint="off, done, or a message to plan")
        ),
    ),
    AvailableCommand(
        name="status",
        description="Mode, plan status and revision, pending requests and protocol.",
    ),
    AvailableCommand(name="journal", description="The session's governance journal."),
)
NAMES = tuple(c.name for c in _COMMANDS)
_COMMAND = re.compile(r"/(?P<name>[a-z]+)(?:\s+(?P<argument>.*))?\Z", re.DOTALL)


@dataclass(frozen=True)
class Command:
    name: str
    argument: str


def available_commands() -> AvailableCommandsUpdate:
    return AvailableCommandsUpdate(
        session_update="available_commands_update", available_commands=list(_COMMANDS)
    )


def parse_command(text: str) -> Command | None:
    """The command a prompt starts with ("/plan off" → plan, "off"); None for any other
    text, slashes included ("/usr/bin is empty" goes to the model)."""
    match = _COMMAND.match(text)
    if match is None or match["name"] not in NAMES:
        return None
    return Command(match["name"], (match["argument"] or "").strip())


# -- /status --------------------------------------------------------------------------


def status_markdown(
    *,
    session_id: str,
    workspace: Path,
    mode: ModeState,
    record: PlanRecord | None,
    pending: Sequence[PendingRequest],
    todos: Sequence[Any],
    protocol: dict[str, Any] | None,
) -> str:
    lines = [
        "**Status**",
        "",
        f"- Session: `{session_id}`",
        f"- Workspace: `{workspace}`",
        f"- Mode: {_mode(mode)}",
    ]
    if record is not None:
        lines.append(
            f"- Plan: {record.status.value} · revision {record.content_revisions}"
            + (f" · {cell(record.objective)}" if record.objective else "")
        )
    else:
        lines.append("- Plan: none")
    for request in pending:
        lines.append(f"- Waiting for you: {_request(request)}")
    if todos:
        done = sum(1 for t in todos if isinstance(t, dict) and t.get("status") == "completed")
        lines.append(f"- Todos: {done}/{len(todos)} completed")
    if protocol:
        lines.append(f"- Protocol: {_protocol(protocol)}")
        if protocol.get("run_status"):
            code = protocol.get("run_outcome_code")
            lines.append(f"- Last run: {protocol['run_status']}" + (f" ({code})" if code else ""))
    return "\n".join(lines)


def _mode(mode: ModeState) -> str:
    text = "plan" if mode.active else "default"
    if mode.pending is not None:
        text += f" (switching to {'plan' if mode.pending else 'default'} at the next step)"
    return text


def _request(request: PendingRequest) -> str:
    if request.kind == "exit":
        return f"approval of plan revision {request.revision}"
    if request.kind == "enter":
        return "confirmation to enter Plan Mode"
    return f"an answer to “{cell(str(request.payload.get('message') or ''))}”"


def _protocol(state: dict[str, Any]) -> str:
    line = f"{state.get('protocol')}@{state.get('version')} · phase {state.get('phase')}"
    intent = str((state.get("intent") or {}).get("text") or "").replace("\n", " ")
    if intent:
        line += f" · intent: {intent[:80]}" + ("…" if len(intent) > 80 else "")
    return line


# -- /journal -------------------------------------------------------------------------


def journal_markdown(entries: Sequence[JournalEntry]) -> str:
    """The governance journal as a Markdown table, oldest first."""
    if not entries:
        return "The journal is empty: nothing has been decided in this session yet."
    rows = []
    for entry in entries:
        event = entry.event
        change = f"{event.from_state or '–'} → {event.to_state}" if event.to_state else ""
        detail = (
            event.detail.get("tool")
            or event.detail.get("reason")
            or event.detail.get("note")
            or event.detail.get("decision")
            or ""
        )
        revision = "" if event.revision is None else str(event.revision)
        rows.append([entry.seq, event.kind, event.actor, change, revision, detail])
    return table(
        ["#", "Event", "Actor", "Change", "Revision", "Detail"],
        rows,
        [True, False, False, False, True, False],
    )
