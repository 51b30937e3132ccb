"""The database at start: one clear line and exit code 2 when it cannot be used."""

from __future__ import annotations

import asyncio
import sys

from plangate.store.errors import DatabaseError

__all__ = ["check_database", "existing_database", "prepare_or_report"]


def existing_database(prog: str, url: str | None) -> str | int:
    """The resolved URL of a database that must already exist (commands that only read:
    an embedded file is never created by them); else print one line and return 2."""
    from plangate.store.urls import resolve_database_url, sqlite_path

    try:
        resolved = resolve_database_url(url)
    except ValueError as exc:
        print(f"plangate {prog}: {exc}", file=sys.stderr)
        return 2
    path = sqlite_path(resolved)
    if path is not None and not path.is_file():
        # A read from the wrong folder would otherwise leave an empty database behind
        # and report nothing, as if the database were empty.
        print(f"plangate {prog}: no database at {path}", file=sys.stderr)
        return 2
    return resolved


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
