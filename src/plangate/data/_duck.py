"""The one way this package opens a DuckDB file for reading."""

from __future__ import annotations

from pathlib import Path

import duckdb

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


def connect_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(path), read_only=True, config=dict(LOCKED_CONFIG))
