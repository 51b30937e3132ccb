"""An embedded database file must stay the file that was opened.

SQLite keeps writing to a file that was deleted while a connection holds it open, and a
new connection to a recreated folder starts an empty database: either way the writes
would vanish without an error. Every transaction first checks that the path still names
the file opened at start (same device and inode); if not, it fails with
``DATABASE_GONE`` before anything is written.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from plangate.errors import ErrorCode
from plangate.store.errors import DatabaseError
from plangate.store.urls import sqlite_path

__all__ = ["FileIdentity", "guard_sqlite_file"]


class FileIdentity:
    """The file first seen at ``path`` (by the first transaction: connecting creates it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None

    def check(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            found = None
        else:
            found = (st.st_dev, st.st_ino)
        if self.identity is None and found is not None:
            self.identity = found
            return
        if found != self.identity:
            raise DatabaseError(
                ErrorCode.DATABASE_GONE,
                f"the database file {self.path} was deleted or replaced while in use",
                "restore it from a backup and restart plangate; nothing more was written",
            )


def guard_sqlite_file(engine: AsyncEngine, url: str) -> FileIdentity | None:
    """Check the file's identity at every transaction of ``engine`` (a stat: ~1 µs)."""
    path = sqlite_path(url)
    if path is None:
        return None
    identity = FileIdentity(str(path))

    def _begin(conn: Any) -> None:
        identity.check()

    # First among the begin listeners: refuse before SQLite's BEGIN IMMEDIATE is sent.
    event.listen(engine.sync_engine, "begin", _begin, insert=True)
    return identity
