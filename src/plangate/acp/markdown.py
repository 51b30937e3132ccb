"""Markdown tables for the editor: the journal, and data results as the user sees them.

Pure: rows in, Markdown text out. A cell is kept on one line, its pipes escaped, so no
value can break the table or inject Markdown structure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["cell", "data_table", "table"]

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
