"""How the terminal shows a run: text, tool calls and results, refusals, plan and todos."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from plangate.adk.capability import CONFIRMATION_CALL
from plangate.cli.tables import rows_table
from plangate.plan.amendments import WAITING_STATUSES
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.replies import ReplyError
from plangate.plan.scope import Scope, scope_or_none
from plangate.plan.visible import visible_text
from plangate.result_text import describe_result, summarize_result

__all__ = [
    "call_line",
    "is_confirmation",
    "protocol_next_step",
    "render_call",
    "render_pending",
    "render_plan",
    "render_reply_error",
    "render_result",
    "render_todos",
    "render_transcript",
    "result_table",
    "scope_table",
    "summarize_result",
    "unified_diff_text",
]


def _args(args: dict[str, Any], limit: int = 90) -> str:
    shown = []
    for key, value in args.items():
        if key == "content" and isinstance(value, str) and len(value) > 40:
            value = f"<{len(value.splitlines())} lines>"
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
        shown.append(f"{key}={text}")
    joined = ", ".join(shown)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def call_line(name: str, args: dict[str, Any], *, streaming: bool = False) -> Text:
    """A tool call as one line; ``streaming``: its arguments are still arriving (drawn
    dim, in place, until the call is complete)."""
    style = "dim cyan" if streaming else "cyan"
    return Text.assemble(("  ⏺ ", style), (name, f"bold {style}"), (f"({_args(args)})", style))


def render_call(console: Console, name: str, args: dict[str, Any]) -> None:
    console.print(call_line(name, args))


def is_confirmation(name: str | None) -> bool:
    """ADK's own call that pauses a tool for the human (an amendment, an edit review):
    the request is shown as its own panel, so the call itself is not."""
    return name == CONFIRMATION_CALL


def render_result(console: Console, name: str, result: dict[str, Any]) -> None:
    if str(result.get("status") or "") in WAITING_STATUSES and "error" not in result:
        console.print(Text.assemble(("    ⏸ ", "yellow"), ("waits for your decision", "dim")))
        return
    outcome = describe_result(name, result)
    hint = (f" — {outcome.hint}", "dim") if outcome.hint else ""
    if outcome.kind == "refused":
        console.print(
            Text.assemble(
                (f"    ⛔ refused by {outcome.refused_by}: ", "bold red"),
                (outcome.text, "red"),
                hint,
            )
        )
    elif outcome.kind != "ok":
        code = f" ({outcome.code.value})" if outcome.code is not None else ""
        console.print(Text.assemble(("    ✗ ", "yellow"), (outcome.text + code, "yellow"), hint))
    else:
        console.print(Text.assemble(("    ⎿ ", "green"), (outcome.text, "dim")))
        table = result_table(name, result)
        if table is not None:
            console.print(Padding(table, (0, 0, 0, 4)))


def result_table(name: str, result: dict[str, Any]) -> Table | None:
    """A data result (a query, a table preview) as a table; None for other results."""
    if name not in ("run_sql_readonly", "preview_table"):
        return None
    rows = result.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    columns = [str(c) for c in result.get("columns") or (rows[0].keys() if rows else [])]
    if not columns:
        return None
    return rows_table(
        columns,
        rows,
        column_types=[str(t) for t in result.get("column_types") or []],
        truncated=bool(result.get("truncated")),
    )


def render_plan(console: Console, record: PlanRecord) -> None:
    title = (
        f"Plan · {record.status.value} · revision {record.content_revisions}"
        f" · sha256 {record.sha256[:10]}"
    )
    # Hidden characters made visible before layout (the console's hook is the net).
    content = visible_text(record.content)
    body: Any = Markdown(content) if content.strip() else Text("(empty)", "dim")
    extras = []
    if record.reviewer_note:
        extras.append(Text(f"Reviewer note: {record.reviewer_note}", "yellow"))
    console.print(
        Panel(Group(body, *extras), title=title, border_style="magenta", title_align="left")
    )


def render_todos(console: Console, todos: list[dict[str, Any]]) -> None:
    table = Table(title="Todos", show_header=False, box=None, title_justify="left")
    marks = {"completed": "[green]✔[/]", "in_progress": "[yellow]▶[/]", "pending": "[dim]○[/]"}
    for todo in todos:
        table.add_row(
            marks.get(todo.get("status", "pending"), "○"), Text(str(todo.get("content", "")))
        )
    console.print(table)


def protocol_line(state: dict[str, Any]) -> str:
    """One line: protocol, phase and the session intent it serves."""
    intent = state.get("intent") or {}
    text = str(intent.get("text") or "").replace("\n", " ")
    line = f"{state.get('protocol')}@{state.get('version')} · phase {state.get('phase')}"
    if text:
        line += f" · intent: {text[:80]}" + ("…" if len(text) > 80 else "")
    return line


def render_protocol(
    console: Console, state: dict[str, Any], previous: dict[str, Any] | None
) -> None:
    """What changed in protocol governance during a run: route, handoffs, outcome."""
    before = previous or {}
    if (state.get("run_id"), state.get("protocol")) != (
        before.get("run_id"),
        before.get("protocol"),
    ):
        route = state.get("route") or {}
        reasons = ", ".join(route.get("reason_codes") or [])
        console.print(
            Text.assemble(
                ("  ⇢ ", "blue"),
                (protocol_line(state), "blue"),
                (f"  ({route.get('source')}: {reasons}; {route.get('task_relation')})", "dim"),
            )
        )
    known = len(before.get("handoffs") or []) if before.get("run_id") == state.get("run_id") else 0
    for handoff in (state.get("handoffs") or [])[known:]:
        console.print(
            Text(
                f"  ⇄ handoff {handoff.get('from_protocol')} → {handoff.get('to_protocol')}"
                f" ({handoff.get('transition_kind')})",
                "blue",
            )
        )
    same_run = before.get("run_id") == state.get("run_id")
    if state.get("run_status") == "failed" and not (
        same_run and before.get("run_status") == "failed"
    ):
        code = str(state.get("run_outcome_code") or "PROTOCOL_RUN_FAILED")
        message = str(state.get("run_outcome_message") or "")
        if message.startswith(code):
            message = message[len(code) :].lstrip(": ")
        console.print(
            Text.assemble(
                ("  ✗ run failed: ", "bold red"),
                (code, "red"),
                (f" — {message}" if message else "", "red"),
            )
        )
        console.print(Text(f"  → {protocol_next_step(state)}", "yellow"))


def protocol_next_step(state: dict[str, Any]) -> str:
    """What the user can do after protocol governance failed a run."""
    return (
        f"Protocol governance stopped this run under {state.get('protocol')}@"
        f"{state.get('version')}. Type “try again” to retry: the agent can then hand the "
        "task over to the protocol it needs (such as data-analysis). Or rephrase the "
        "request; /status shows the protocol and the last run."
    )


def render_pending(
    console: Console,
    request: PendingRequest,
    record: PlanRecord | None,
    *,
    position: tuple[int, int] | None = None,
) -> None:
    """One open request; ``position`` (n, of) when the run paused on several."""
    payload = request.payload
    of = f" ({position[0]} of {position[1]})" if position else ""
    if request.kind == "enter":
        console.print(
            Panel(
                Text(f"The agent asks to enter Plan Mode.\nObjective: {payload.get('objective')}"),
                title=f"Plan Mode entry{of}",
                border_style="yellow",
                title_align="left",
            )
        )
    elif request.kind == "question":
        # Model text, never markup: "[/]" or "list[str]" must show exactly as asked.
        body = Text(visible_text(str(payload.get("message"))))
        for number, option in enumerate(payload.get("options") or [], start=1):
            body.append(f"\n  {number}. {visible_text(str(option))}")
        console.print(Panel(body, title=f"Question{of}", border_style="yellow", title_align="left"))
    elif request.kind in ("amendment", "edit", "tool"):
        # Model-chosen paths and commands: plain Text, never markup.
        parts: list[Any] = [Text(str(payload.get("message")))]
        wants = scope_or_none(payload.get("wants"))
        if request.kind == "amendment" and wants is not None:
            parts.append(Text("Outside the approved scope:", "bold"))
            parts.append(scope_table(wants, wanted=True))
        if payload.get("scope_summary"):
            parts.append(Text(f"Approved scope: {payload['scope_summary']}", "dim"))
        if payload.get("diff"):
            parts.append(Text("The change:", "bold"))
            parts.append(unified_diff_text(str(payload["diff"])))
            if payload.get("diff_truncated"):
                parts.append(Text("(the diff is cut short here)", "dim"))
        console.print(
            Panel(
                Group(*parts),
                title=f"{payload.get('title') or 'Allow?'}{of}",
                border_style="yellow",
                title_align="left",
            )
        )
    elif record is not None:
        render_plan(console, record)
        console.print(Text.assemble((f"Summary{of}: ", "bold yellow"), str(payload.get("message"))))
        scope = scope_or_none(payload.get("scope"))
        if scope is None:
            console.print(
                Text.assemble(
                    ("Scope: ", "bold yellow"),
                    "none named: approving lets the agent write anywhere in the workspace "
                    "and run any command (in the sandbox).",
                )
            )
        else:
            console.print(Text.assemble(("Scope: ", "bold yellow"), scope.summary()))
            console.print(Padding(scope_table(scope), (0, 0, 0, 2)))


def scope_table(scope: Scope, *, wanted: bool = False) -> Table:
    """A scope as a list: each path or glob it writes, each command prefix it runs, and
    the network. ``wanted``: what a call asks for beyond a scope (the network is listed
    only when asked for)."""
    table = Table(show_header=False, box=None, padding=(0, 1))
    for label, values in (
        ("write", scope.write),
        ("run", scope.commands),
        ("run exactly", scope.exact_commands),
        ("network for", scope.network_commands),
    ):
        for index, value in enumerate(values):
            table.add_row(Text(label if index == 0 else ""), Text(visible_text(value)))
    if scope.network or not wanted:
        table.add_row(Text("network"), Text("yes" if scope.network else "no"))
    return table


def unified_diff_text(diff: str) -> Text:
    """A unified diff coloured by line (added, removed, hunk)."""
    out = Text()
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        out.append(line + "\n", style)
    out.rstrip()
    return out


def render_reply_error(console: Console, error: ReplyError) -> None:
    """A refused reply, plainly: what happened and what to do."""
    console.print(
        Text.assemble(
            ("  ✗ reply not recorded ", "bold yellow"),
            (f"({error.code.value}): ", "yellow"),
            (error.message, "yellow"),
            (f" — {error.hint}", "dim"),
        )
    )


TRANSCRIPT_EVENTS = 60
"""Events of a resumed session replayed on screen; older ones are counted, not shown."""


def render_transcript(console: Console, events: list[Any]) -> None:
    """The conversation so far, when a session is resumed: what the user said, the
    agent's text, its tool calls and their results (human requests are asked after)."""
    shown = [e for e in events if e.content is not None and not getattr(e, "partial", False)]
    if not shown:
        return
    console.rule(Text("Transcript so far", "bold"), align="left")
    hidden = max(0, len(shown) - TRANSCRIPT_EVENTS)
    if hidden:
        console.print(Text(f"({hidden} earlier events not shown)", "dim"))
    for event in shown[hidden:]:
        for part in event.content.parts or []:
            if getattr(part, "thought", False):
                continue
            if part.text:
                if event.author == "user":
                    console.print(Text.assemble(("you> ", "bold"), part.text))
                else:
                    console.print(Text.assemble(("● ", "bold"), part.text))
            elif part.function_call is not None:
                if is_confirmation(part.function_call.name):
                    continue
                render_call(
                    console, part.function_call.name or "", dict(part.function_call.args or {})
                )
            elif part.function_response is not None and is_confirmation(
                part.function_response.name
            ):
                confirmed = (part.function_response.response or {}).get("confirmed")
                shown = "(approved)" if confirmed else "(refused)"
                console.print(Text.assemble(("you> ", "bold"), (shown, "dim")))
            elif part.function_response is not None and event.author == "user":
                reply = dict(part.function_response.response or {})
                console.print(Text.assemble(("you> ", "bold"), (_reply_line(reply), "dim")))
            elif part.function_response is not None:
                render_result(
                    console,
                    part.function_response.name or "",
                    dict(part.function_response.response or {}),
                )
    console.rule(style="dim")


def _reply_line(reply: dict[str, Any]) -> str:
    """A human reply in the transcript: the decision, and the answer or note."""
    status = str(reply.get("status") or "replied")
    if reply.get("answer") is not None:
        return f"(answered) {reply['answer']}"
    note = reply.get("reviewer_note")
    return f"({status})" + (f" {note}" if note else "")
