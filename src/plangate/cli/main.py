"""The ``plangate`` command."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from plangate.adk.experimental import quiet_experimental_adk_warnings

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plangate", description="Plan first, then act: agents governed in code."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    from plangate.cli.chat import add_chat_parser

    add_chat_parser(subparsers)
    from plangate.cli.doctor import add_doctor_parser

    add_doctor_parser(subparsers)
    from plangate.cli.db import add_db_parser

    add_db_parser(subparsers)
    from plangate.cli.journal_command import add_journal_parser

    add_journal_parser(subparsers)
    from plangate.cli.policy_command import add_policy_parser

    add_policy_parser(subparsers)
    try:
        from plangate.cli.serve import add_serve_parser
    except ImportError:
        pass
    else:
        add_serve_parser(subparsers)
    try:
        from plangate.cli.acp_command import add_acp_parser
    except ImportError:
        pass
    else:
        add_acp_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # ADK warns about the experimental features plangate relies on; users cannot act on
    # those. Every other warning shows.
    quiet_experimental_adk_warnings()
    logging.getLogger("google_adk").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    if args.command in _RUNS_AGENTS:
        _configure_telemetry()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (``plangate journal export | head``): what it wanted was
        # printed. Point stdout at /dev/null so the interpreter's final flush does not
        # fail a second time, and end like a program killed by SIGPIPE.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


_RUNS_AGENTS = frozenset({"chat", "serve", "acp"})


def _configure_telemetry() -> None:
    """Spans go where the standard ``OTEL_EXPORTER_OTLP_*`` variables point; nothing is set
    up (and nothing costs) without them."""
    from plangate.adk.telemetry import configure_from_env

    problem = configure_from_env()
    if problem is not None:
        print(f"plangate: {problem}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
