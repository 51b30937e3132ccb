"""The one way this package opens a DuckDB file for reading, and the limits it sets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

DEFAULT_MEMORY_LIMIT = "1GB"
"""The most memory one DuckDB database may use (DuckDB's ``memory_limit`` syntax)."""


def _default_threads() -> int:
    # At most two, and never every core this process may run on: a query that takes
    # them all leaves the server's event loop waiting for the scheduler, and every
    # other request of every user waits with it.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(2, (cores or 1) - 1))


DEFAULT_THREADS = _default_threads()
"""The most threads one DuckDB database may run a query on."""

# External access off (no file, network or ATTACH from SQL), no extension loading, and
# the configuration locked so no statement can switch any of it back. Every read-only
# connection to a file uses this exact config: DuckDB shares one database instance per
# file within a process and refuses a second connection with a different config.
LOCKED_CONFIG: dict[str, bool] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}


def limits_config(memory_limit: str, threads: int) -> dict[str, Any]:
    """The resource settings every connection gets, in DuckDB's config form."""
    return {"memory_limit": memory_limit, "threads": threads}


def check_limits(memory_limit: str, threads: int) -> None:
    """Raise ValueError unless DuckDB accepts ``memory_limit`` and ``threads``."""
    if not isinstance(memory_limit, str) or not memory_limit.strip():
        raise ValueError("memory_limit must be a size such as '1GB'")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError("threads must be a positive integer")
    try:
        duckdb.connect(":memory:", config=limits_config(memory_limit, threads)).close()
    except duckdb.Error as err:
        raise ValueError(f"DuckDB refuses these limits: {err}") from None


def connect_read_only(
    path: Path,
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int = DEFAULT_THREADS,
) -> duckdb.DuckDBPyConnection:
    config = {**LOCKED_CONFIG, **limits_config(memory_limit, threads)}
    return duckdb.connect(str(path), read_only=True, config=config)


def is_config_conflict(err: duckdb.Error) -> bool:
    """Whether ``err`` says the file is already open in this process with another config."""
    return "different configuration" in str(err)
