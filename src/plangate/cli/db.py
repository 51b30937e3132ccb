"""``plangate db``: check, repair and upgrade the database."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from plangate.cli.options import add_database_option

__all__ = ["add_db_parser", "run_db"]


def add_db_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "db",
        help="check, repair or upgrade the database",
        description="Look after the database every surface shares: its schema version, "
        "its tables, documents with versions no writer produces, and runs left running "
        "by a process that stopped.",
    )
    actions = parser.add_subparsers(dest="db_command", required=True)
    check = actions.add_parser(
        "check",
        help="report schema, table health and orphaned runs (exit 1 if something is wrong)",
    )
    add_database_option(check)
    check.add_argument(
        "--repair",
        action="store_true",
        help="recreate missing tables (empty), reset corrupt versions, mark orphaned runs "
        "interrupted; each change is journaled",
    )
    check.add_argument(
        "--idle",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="a run counts as orphaned after this long without a write and without a "
        "live lease (default 600)",
    )
    upgrade = actions.add_parser(
        "upgrade", help="create or upgrade plangate's and ADK's tables, then exit"
    )
    add_database_option(upgrade)
    parser.set_defaults(func=run_db)
    return parser


def run_db(args: argparse.Namespace) -> int:
    if args.db_command == "upgrade":
        from plangate.cli.database import check_database

        failed = check_database("db upgrade", args.database_url)
        if failed is not None:
            return failed
        print("ok database is at the schema this plangate writes")
        return 0
    return asyncio.run(_check(args))


async def _check(args: argparse.Namespace) -> int:
    from plangate.adk.database import ADK_TABLES, DatabaseError, prepare_database
    from plangate.cli.database import existing_database
    from plangate.store.health import check_database, repair_database
    from plangate.store.schema import SCHEMA_VERSION
    from plangate.store.store import Store, refuse_foreign, table_names

    url = existing_database("db check", args.database_url)
    if isinstance(url, int):
        return url
    try:
        store = await Store.open(url, migrate=False)
    except DatabaseError as exc:
        print(f"plangate db check: {exc.line()}", file=sys.stderr)
        return 2
    try:
        try:
            # Not plangate's database: "tables missing, run --repair" would have plangate
            # create its tables among another application's.
            async with store.engine.connect() as conn:
                refuse_foreign(await table_names(conn), store.name)
        except DatabaseError as exc:
            print(f"plangate db check: {exc.line()}", file=sys.stderr)
            return 2
        report = await check_database(store, extra_tables=ADK_TABLES, idle_seconds=args.idle)
        _print(report, SCHEMA_VERSION)
        if not args.repair or report.healthy:
            return 0 if report.healthy else 1
        if report.newer:
            print("!! nothing repaired: the schema is newer than this plangate")
            return 1
        for line in await repair_database(store, report, actor="plangate db check"):
            print(f"repaired: {line}")
    finally:
        await store.close()
    try:
        # ADK's tables and any migration still to apply.
        await prepare_database(url, recreate_missing=True)
    except DatabaseError as exc:
        print(f"plangate db check: {exc.line()}", file=sys.stderr)
        return 2
    store = await Store.open(url, migrate=False)
    try:
        after = await check_database(store, extra_tables=ADK_TABLES, idle_seconds=args.idle)
    finally:
        await store.close()
    print("ok repaired" if after.healthy else "!! still not healthy:")
    if not after.healthy:
        _print(after, SCHEMA_VERSION)
    return 0 if after.healthy else 1


def _print(report: Any, code_version: int) -> None:
    if report.newer:
        print(
            f"!! schema: version {report.schema} is newer than this plangate "
            f"({code_version}); upgrade plangate"
        )
    elif report.schema < code_version:
        print(
            f"!! schema: version {report.schema}, this plangate writes {code_version}; "
            "run plangate db upgrade"
        )
    else:
        print(f"ok schema: version {report.schema}")
    if report.missing_tables:
        print(f"!! tables missing: {', '.join(report.missing_tables)}")
    else:
        print("ok tables: all present")
    if report.corrupt:
        print(f"!! documents: {len(report.corrupt)} with a version below 1")
        for kind, key, version in report.corrupt[:20]:
            print(f"   {kind} {key!r}: version {version}")
    else:
        print("ok documents: every version valid")
    if report.stale:
        print(f"!! runs: {len(report.stale)} left running by a process that stopped")
        for run in report.stale[:20]:
            print(f"   {run.key}")
    else:
        print("ok runs: none orphaned")
