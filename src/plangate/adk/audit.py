"""Reading the governance journal for audit, for surfaces that must not touch the store."""

from __future__ import annotations

from collections.abc import AsyncIterator

from plangate.journal.export import ExportFilter, export_line
from plangate.store.store import Store

__all__ = ["export_journal"]


async def export_journal(database_url: str | None, selection: ExportFilter) -> AsyncIterator[str]:
    """JSON Lines of every journaled fact ``selection`` matches, in sequence order."""
    # migrate=False: an export reads; it never creates or upgrades tables.
    store = await Store.open(database_url, migrate=False)
    try:
        for entry in await store.journal():
            if selection.matches(entry.scope, entry.event):
                yield export_line(entry.seq, entry.scope, entry.event)
    finally:
        await store.close()
