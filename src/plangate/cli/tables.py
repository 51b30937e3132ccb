"""Rich tables for the terminal: a query result, the governance journal.

Every cell is a ``Text``: values come from data and the model, and ``[x]`` in them must
print as typed instead of being read as Rich markup.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from plangate.store.store import JournalEntry

__all__ = ["MAX_TABLE_ROWS", "journal_table", "rows_table"]

MAX_TABLE_ROWS = 30
"""Rows shown in the terminal; the rest is counted in the caption."""

_NUMERIC = ("INT", "DECIMAL", "DOUBLE", "FLOAT", "REAL", "NUMERIC", "BIGINT", "HUGEINT")


def _cell(value: Any) -> Text:
    if value is None:
        return Text("NULL", "dim")
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, float):
        return Text(f"{value:,.2f}" if abs(value) >= 1000 else f"{value:g}")
    if isinstance(value, (int, bool)):
        return Text(str(value))
    return Text(json.dumps(value, ensure_ascii=False, default=str))


def rows_table(
    columns: Sequence[str],
    rows: Sequence[dict[str, Any]],
    *,
    column_types: Sequence[str] = (),
    truncated: bool = False,
    title: str | None = None,
) -> Table:
    """A query result as a table; numbers right-aligned (by type, or by value)."""
    table = Table(title=Text(title) if title else None, title_justify="left", show_lines=False)
    for index, name in enumerate(columns):
        kind = column_types[index].upper() if index < len(column_types) else ""
        numeric = any(word in kind for word in _NUMERIC) or (
            not kind
            and bool(rows)
            and all(isinstance(r.get(name), (int, float)) for r in rows if r.get(name) is not None)
        )
        table.add_column(Text(str(name)), justify="right" if numeric else "left")
    for row in rows[:MAX_TABLE_ROWS]:
        table.add_row(*(_cell(row.get(name)) for name in columns))
    hidden = max(0, len(rows) - MAX_TABLE_ROWS)
    notes = []
    if hidden:
        notes.append(f"{hidden} more rows not shown")
    if truncated:
        notes.append("the result was cut off at the row limit")
    if notes:
        table.caption = Text("; ".join(notes), "dim")
    return table


def journal_table(entries: Sequence[JournalEntry]) -> Table:
    """The governance journal: one row per journaled fact."""
    table = Table(title="Journal", title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("event")
    table.add_column("by")
    table.add_column("change")
    table.add_column("rev", justify="right")
    table.add_column("detail", overflow="fold")
    for entry in entries:
        event = entry.event
        change = f"{event.from_state or '-'} → {event.to_state}" if event.to_state else ""
        detail = (
            event.detail.get("tool")
            or event.detail.get("reason")
            or event.detail.get("note")
            or event.detail.get("message")
            or ""
        )
        table.add_row(
            Text(str(entry.seq)),
            Text(event.kind),
            Text(event.actor),
            Text(change),
            Text("" if event.revision is None else str(event.revision)),
            Text(str(detail)),
        )
    if not entries:
        table.caption = Text("nothing journaled yet", "dim")
    return table
