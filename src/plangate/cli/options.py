"""Options every ``plangate`` surface shares: the model, the database, the data sources."""

from __future__ import annotations

import argparse

__all__ = [
    "add_data_option",
    "add_database_option",
    "add_model_option",
    "add_network_option",
    "data_sources",
]


def add_model_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=None,
        help="demo (default), a Gemini name, openai:<model> or anthropic:<model> "
        "(default from PLANGATE_MODEL)",
    )


def add_database_option(parser: argparse.ArgumentParser, *aliases: str) -> None:
    parser.add_argument(
        "--database-url",
        *aliases,
        dest="database_url",
        default=None,
        help="sqlite:///… or postgresql://… (default PLANGATE_DATABASE_URL or "
        ".plangate/plangate.db)",
    )


def add_network_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-network",
        action="store_true",
        help="let the agent's shell commands reach the network once a plan is approved "
        "(never while planning; off by default)",
    )


def add_data_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="register a .csv, .parquet or .duckdb file as data source NAME beside the "
        "sample database (repeatable)",
    )


def data_sources(specs: list[str]) -> list[tuple[str, str]]:
    """``NAME=PATH`` options as ``(name, path)`` pairs; ValueError names a malformed one."""
    pairs = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"--data takes NAME=PATH, got {spec!r}")
        pairs.append((name.strip(), path.strip()))
    return pairs
