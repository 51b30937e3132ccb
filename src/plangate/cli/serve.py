"""``plangate serve``: the AG-UI server and the browser UI."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_serve_parser", "data_sources", "run_serve"]


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve",
        help="serve the web UI and the AG-UI endpoint",
        description="Serve the browser UI (live plan panel, approval cards) and an AG-UI "
        "endpoint at /api/agent. Loopback needs no token; any other address requires one.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any)")
    parser.add_argument(
        "--workspace",
        default=None,
        help="project folder the agent works in (default: a copy of the sample project "
        "in .plangate/workspace)",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="demo (default), a Gemini name, openai:<model> or anthropic:<model> "
        "(default from PLANGATE_MODEL)",
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="sqlite:///… or postgresql://… (default PLANGATE_DATABASE_URL or "
        ".plangate/plangate.db)",
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="register a .csv, .parquet or .duckdb file as data source NAME beside the "
        "sample database (repeatable)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help="bearer token for the API; required off loopback (generated and printed when "
        "not given)",
    )
    parser.set_defaults(func=run_serve)
    return parser


def data_sources(specs: list[str]) -> list[tuple[str, str]]:
    """``NAME=PATH`` options as ``(name, path)`` pairs; ValueError names a malformed one."""
    pairs = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"--data takes NAME=PATH, got {spec!r}")
        pairs.append((name.strip(), path.strip()))
    return pairs


def run_serve(args: argparse.Namespace) -> int:
    from plangate.data import DataError
    from plangate.web.server import serve

    if not 0 <= args.port <= 65535:
        print(f"plangate serve: invalid port {args.port}", file=sys.stderr)
        return 2
    try:
        sources = data_sources(args.data)
    except ValueError as exc:
        print(f"plangate serve: {exc}", file=sys.stderr)
        return 2
    try:
        serve(
            args.host,
            args.port,
            args.workspace,
            args.model,
            args.database_url,
            args.token,
            data_sources=sources,
        )
    except DataError as exc:
        print(f"plangate serve: --data: {exc}", file=sys.stderr)
        return 2
    except (ValueError, FileExistsError) as exc:
        print(f"plangate serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"plangate serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
