"""The database at start: one clear line and exit code 2 when it cannot be used."""

from __future__ import annotations

import asyncio
import sys

from plangate.store.errors import DatabaseError

__all__ = ["check_database", "prepare_or_report"]


async def prepare_or_report(prog: str, url: str | None) -> int | None:
    """Prepare the database; on failure print one line to stderr and return 2."""
    from plangate.adk.database import prepare_database

    try:
        await prepare_database(url)
    except DatabaseError as exc:
        print(f"plangate {prog}: {exc.line()}", file=sys.stderr, flush=True)
        return 2
    except ValueError as exc:  # not a database URL
        print(f"plangate {prog}: {exc}", file=sys.stderr, flush=True)
        return 2
    return None


def check_database(prog: str, url: str | None) -> int | None:
    """``prepare_or_report`` from outside an event loop (serve and acp start their own)."""
    return asyncio.run(prepare_or_report(prog, url))
