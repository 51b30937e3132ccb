"""How the terminal shows a run: text, tool calls and results, refusals, plan and todos."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from plangate.plan.record import PendingRequest, PlanRecord

__all__ = [
    "render_call",
    "render_pending",
    "render_plan",
    "render_result",
    "render_todos",
    "summarize_result",
]

GATE_PREFIX = "PLAN_MODE_GATE"


def _args(args: dict[str, Any], limit: int = 90) -> str:
    shown = []
    for key, value in args.items():
        if key == "content" and isinstance(value, str) and len(value) > 40:
            value = f"<{len(value.splitlines())} lines>"
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
        shown.append(f"{key}={text}")
    joined = ", ".join(shown)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def render_call(console: Console, name: str, args: dict[str, Any]) -> None:
    console.print(
        Text.assemble(("  ⏺ ", "cyan"), (name, "bold cyan"), (f"({_args(args)})", "cyan"))
    )


def summarize_result(name: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return str(result["error"])
    if name == "Read":
        return f"read {result.get('path')} ({result.get('total_lines')} lines)"
    if name == "Glob":
        paths = result.get("paths") or []
        return f"{len(paths)} paths: " + ", ".join(paths[:4]) + (" …" if len(paths) > 4 else "")
    if name == "Grep":
        return f"{len(result.get('matches') or [])} matches"
    if name == "Bash":
        out = (result.get("stdout") or result.get("stderr") or "").strip().splitlines()
        tail = out[-1] if out else ""
        return f"exit {result.get('exit_code')} · {tail}"
    if name in ("Edit", "Write"):
        return f"changed {result.get('path')}"
    if name == "update_plan_content":
        plan = result.get("plan") or {}
        return f"plan {plan.get('status')} · revision {plan.get('contentRevisions')}"
    if name == "todo_write":
        return result.get("message", "todos updated")
    if "message" in result:
        return str(result["message"])
    text = json.dumps(result, ensure_ascii=False)
    return text if len(text) < 160 else text[:159] + "…"


def render_result(console: Console, name: str, result: dict[str, Any]) -> None:
    summary = summarize_result(name, result)
    error = str(result.get("error", ""))
    if error.startswith(GATE_PREFIX):
        console.print(
            Text.assemble(
                ("    ⛔ refused by plan gate: ", "bold red"),
                (error[len(GATE_PREFIX) + 2 :], "red"),
            )
        )
    elif error:
        console.print(Text.assemble(("    ✗ ", "yellow"), (summary, "yellow")))
    else:
        console.print(Text.assemble(("    ⎿ ", "green"), (summary, "dim")))


def render_plan(console: Console, record: PlanRecord) -> None:
    title = (
        f"Plan · {record.status.value} · revision {record.content_revisions}"
        f" · sha256 {record.sha256[:10]}"
    )
    body: Any = Markdown(record.content) if record.content.strip() else Text("(empty)", "dim")
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


def render_pending(console: Console, request: PendingRequest, record: PlanRecord | None) -> None:
    payload = request.payload
    if request.kind == "enter":
        console.print(
            Panel(
                Text(f"The agent asks to enter Plan Mode.\nObjective: {payload.get('objective')}"),
                title="Plan Mode entry",
                border_style="yellow",
                title_align="left",
            )
        )
    elif request.kind == "question":
        lines = [str(payload.get("message"))]
        for number, option in enumerate(payload.get("options") or [], start=1):
            lines.append(f"  {number}. {option}")
        console.print(
            Panel("\n".join(lines), title="Question", border_style="yellow", title_align="left")
        )
    elif record is not None:
        render_plan(console, record)
        console.print(Text.assemble(("Summary: ", "bold yellow"), str(payload.get("message"))))
