"""Plain-text views of a plan: a short ASCII card, and the task subjects it names.

Neither is wired into the flow; they are for hosts (a log line, a terminal, seeding a
task list after approval).
"""

from __future__ import annotations

import re

from plangate.plan.record import PlanRecord

__all__ = ["CARD_LINES", "CARD_WIDTH", "plan_to_task_subjects", "render_plan"]

CARD_LINES = 8
"""How many lines of the plan's content the card shows."""
CARD_WIDTH = 72
"""The card's width in characters, borders included."""


def render_plan(record: PlanRecord, *, lines: int = CARD_LINES, width: int = CARD_WIDTH) -> str:
    """An ASCII card: objective, status and revision, then the first ``lines`` lines.

    Characters a terminal would not show as themselves (control and format characters,
    such as a right-to-left override) are written as ``\\uXXXX``, so the card shows
    what the plan holds.
    """
    inner = max(width - 4, 10)
    body = record.content.splitlines()
    shown = body[:lines] or ["(no content yet)"]
    rows = [
        f"Plan: {record.objective}",
        f"status: {record.status.value}  revision: {record.content_revisions}  "
        f"id: {record.id[:12]}",
    ]
    rule = "+" + "-" * (inner + 2) + "+"
    card = [rule, *(_row(r, inner) for r in rows), rule, *(_row(r, inner) for r in shown)]
    if len(body) > lines:
        card.append(_row(f"... ({len(body) - lines} more lines)", inner))
    card.append(rule)
    return "\n".join(card)


def _row(text: str, inner: int) -> str:
    text = _visible(text.expandtabs(4))
    if len(text) > inner:
        text = text[: inner - 3] + "..."
    return f"| {text.ljust(inner)} |"


def _visible(text: str) -> str:
    return "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)


_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ ]{0,3}(```|~~~)")


def plan_to_task_subjects(content: str) -> list[str]:
    """The subjects of the plan's ``## `` headings, in order, as task subjects.

    Only level-2 headings count (``#`` is the title, ``###`` a detail of a task), and
    lines inside fenced code blocks are not headings.
    """
    subjects: list[str] = []
    fenced = False
    for line in content.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        heading = None if fenced else _HEADING.match(line)
        if heading is not None:
            subjects.append(heading.group(1).strip())
    return subjects
