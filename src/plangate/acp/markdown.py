"""Markdown for the editor: tables (the journal, data results), and text the model wrote
shown so that it cannot fake structure.

An editor renders what ACP sends as Markdown. Text the model wrote -- a plan, a question,
a command, a path, a tool's output -- must show as itself: it may not close a code block
(a fence is longer than any backtick run inside it), open a link or an image, or draw a
heading that copies plangate's own approval card. Hidden characters show as markers
(``plangate.plan.visible``).

Pure: rows or text in, Markdown text out. A cell is kept on one line, its pipes escaped,
so no value can break the table or inject Markdown structure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from plangate.plan.visible import visible_text

__all__ = ["cell", "code_span", "data_table", "escaped", "fenced", "table"]

_BACKTICKS = re.compile(r"`+")
_MARKUP = re.compile(r"([\\`*_\[\]<>!#|~])")
"""What can start Markdown structure inside a line: emphasis, code, links and images,
raw HTML, headings, tables, strike-through; each is shown as itself when escaped."""


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in _BACKTICKS.findall(text)), default=0)


def fenced(text: str, info: str = "") -> str:
    """``text`` as a code block no line of it can close: the fence is longer than any
    run of backticks inside, and hidden characters show as markers."""
    shown = visible_text(text)
    fence = "`" * max(3, _longest_backticks(shown) + 1)
    return f"{fence}{info}\n{shown}\n{fence}"


def code_span(text: str) -> str:
    """``text`` as inline code on one line, delimited by more backticks than it holds."""
    shown = visible_text(text, keep_layout=False)
    ticks = "`" * (_longest_backticks(shown) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def escaped(text: str) -> str:
    """``text`` with its Markdown punctuation escaped, so it shows as written: no link,
    image, HTML, heading, emphasis or code; hidden characters show as markers. Line
    breaks stay."""
    return "\n".join(_MARKUP.sub(r"\\\1", line) for line in visible_text(text).split("\n"))


DATA_ROWS = 50
"""Rows shown of a data result; the rest are counted, not shown."""


def cell(value: Any, limit: int = 120) -> str:
    """Text that stays inside one Markdown table cell."""
    text = "NULL" if value is None else str(value)
    flat = " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None
) -> str:
    """A Markdown table; ``right`` marks the columns aligned right (numbers)."""
    aligned = list(right or [False] * len(header))
    lines = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "|" + "|".join("---:" if r else "---" for r in aligned) + "|",
    ]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines)


def data_table(
    columns: Sequence[str], rows: Sequence[dict[str, Any]], limit: int = DATA_ROWS
) -> str:
    """Result rows (objects keyed by column) as a table, numbers aligned right; rows past
    ``limit`` are counted below it."""
    if not columns:
        return "(no columns)"
    shown = rows[:limit]
    right = [
        any(_number(r.get(c)) for r in shown)
        and all(_number(r.get(c)) or r.get(c) is None for r in shown)
        for c in columns
    ]
    out = table(columns, [[r.get(c) for c in columns] for r in shown], right)
    if len(rows) > limit:
        out += f"\n\n… and {len(rows) - limit} more rows."
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
