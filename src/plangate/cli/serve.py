"""``plangate serve``: the AG-UI server and the browser UI."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from plangate.cli.options import (
    add_data_option,
    add_database_option,
    add_model_option,
    add_network_option,
    data_sources,
)

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
    add_model_option(parser)
    add_database_option(parser)
    add_data_option(parser)
    add_network_option(parser)
    parser.add_argument(
        "--token",
        default=None,
        help="bearer token for the API; required off loopback (generated and printed when "
        "not given)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        default=None,
        metavar="N",
        help="runs in progress this server admits; past it a new run gets 503 with "
        "Retry-After (default 64)",
    )
    parser.set_defaults(func=run_serve)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    from plangate.cli.database import check_database
    from plangate.data import DataError
    from plangate.web.server import serve

    if not 0 <= args.port <= 65535:
        print(f"plangate serve: invalid port {args.port}", file=sys.stderr)
        return 2
    if args.max_runs is not None and args.max_runs < 1:
        print(
            f"plangate serve: --max-runs must be at least 1, not {args.max_runs}", file=sys.stderr
        )
        return 2
    try:
        sources = data_sources(args.data)
    except ValueError as exc:
        print(f"plangate serve: {exc}", file=sys.stderr)
        return 2
    failed = check_database("serve", args.database_url)
    if failed is not None:
        return failed
    try:
        serve(
            args.host,
            args.port,
            args.workspace,
            args.model,
            args.database_url,
            args.token,
            data_sources=sources,
            allow_network=args.allow_network,
            **({} if args.max_runs is None else {"max_runs": args.max_runs}),
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
