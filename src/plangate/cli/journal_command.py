"""``plangate journal export``: the governance journal as JSON Lines."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from plangate.cli.options import add_database_option

__all__ = ["add_journal_parser"]


def add_journal_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("journal", help="read the governance journal")
    actions = parser.add_subparsers(dest="journal_command", required=True)
    export = actions.add_parser(
        "export",
        help="write the journal as JSON Lines",
        description="Write every journaled governance fact (plan transitions, gate "
        "decisions, approvals, protocol routing) as one JSON object per line.",
    )
    add_database_option(export)
    export.add_argument("--session", help="only this session id")
    export.add_argument(
        "--thread", help="only this agent thread within a session (e.g. orchestrator)"
    )
    export.add_argument("--since", help="from this time on (ISO 8601 or Unix seconds)")
    export.add_argument("--until", help="before this time (ISO 8601 or Unix seconds)")
    export.add_argument("--output", "-o", help="write to this file instead of stdout")
    export.set_defaults(func=run_export, parser=export)
    return parser


def run_export(args: argparse.Namespace) -> int:
    from plangate.journal.export import ExportFilter, parse_time

    parser: argparse.ArgumentParser = args.parser
    try:
        selection = ExportFilter(
            session=args.session,
            thread=args.thread,
            since=parse_time(args.since) if args.since is not None else None,
            until=parse_time(args.until) if args.until is not None else None,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if args.output is None:
        return asyncio.run(_write(args.database_url, selection, sys.stdout))
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            return asyncio.run(_write(args.database_url, selection, out))
    except OSError as exc:
        parser.error(f"cannot write {args.output}: {exc.strerror}")


async def _write(database_url: str | None, selection: Any, out: TextIO) -> int:
    from plangate.adk.audit import export_journal
    from plangate.cli.database import existing_database
    from plangate.store.errors import DatabaseError

    url = existing_database("journal export", database_url)
    if isinstance(url, int):
        return url
    try:
        async for line in export_journal(url, selection):
            out.write(line + "\n")
    except DatabaseError as exc:
        print(f"plangate journal export: {exc.line()}", file=sys.stderr)
        return 2
    return 0
