"""``plangate acp``: the coding agent for editors (Zed, JetBrains, Neovim) over ACP stdio."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from plangate.cli.options import add_database_option, add_model_option

if TYPE_CHECKING:
    from acp.interfaces import Agent

__all__ = ["add_acp_parser", "run_acp"]


def add_acp_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "acp",
        help="serve the coding agent to an editor over the Agent Client Protocol (stdio)",
        description="Speak the Agent Client Protocol on stdin/stdout, so an editor can drive "
        "the coding agent and switch between the Default and Plan modes. Plan approvals, "
        "questions and Plan Mode entry are asked as permission requests; /plan, /status "
        "and /journal work as in plangate chat, and the editor's stdio MCP servers become "
        "tools of their session.",
    )
    parser.add_argument(
        "--workspace",
        default=None,
        help="project folder the agent works in (default: the editor session's folder, "
        "else a copy of the sample project in .plangate/workspace)",
    )
    add_model_option(parser)
    add_database_option(parser)
    parser.set_defaults(func=run_acp)
    return parser


def run_acp(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from plangate.acp import PlangateAgent, run_stdio
    from plangate.cli.database import check_database
    from plangate.models.config import resolve_model
    from plangate.store.urls import resolve_database_url

    try:
        model = resolve_model(args.model, surface="editor")
        database_url = resolve_database_url(args.database_url)
    except ValueError as exc:
        print(f"plangate acp: {exc}", file=sys.stderr)
        return 2
    failed = check_database("acp", database_url)
    if failed is not None:
        return failed
    workspace = None
    if args.workspace:
        workspace = Path(args.workspace).expanduser().resolve()
        if not workspace.is_dir():
            print(f"plangate acp: workspace {workspace} is not a folder", file=sys.stderr)
            return 2
    # Models without usage metadata (the offline demo) would log this on every call.
    logging.getLogger("google_adk.google.adk.telemetry._metrics").setLevel(logging.ERROR)
    agent = PlangateAgent(model, database_url=database_url, workspace=workspace)
    try:
        # The SDK's Agent protocol lists every method; ones an agent leaves out (session
        # resume, authenticate) are answered "method not found" by its router.
        asyncio.run(run_stdio(cast("Agent", agent)))
    except KeyboardInterrupt:
        return 130
    return 0
