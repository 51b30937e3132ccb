"""An embedded database file must stay the file that was opened, with its log.

SQLite keeps writing to a file that was deleted while a connection holds it open, and a
new connection to a recreated folder starts an empty database: either way the writes
would vanish without an error. The same holds for the write-ahead log (``-wal``): a
connection keeps appending to a log that was removed, while a new connection -- a
restart -- starts a new, empty one and every commit since the last checkpoint is gone.
And a file whose header was overwritten is no SQLite database any more, whatever the
connections still cache.

So every transaction (and every read on the lock-free path) first checks, for a few
microseconds (two ``stat`` calls and one 16-byte ``pread``), that the path still names
the file opened at start (same device and inode) -- else ``DATABASE_GONE`` -- that its
header still says SQLite, and that the log seen beside it is still there, the same
file -- else ``DATABASE_CORRUPT``; before anything is written or served.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from plangate.errors import ErrorCode
from plangate.store.errors import DatabaseError
from plangate.store.urls import sqlite_path

__all__ = ["SQLITE_HEADER", "FileIdentity", "guard_sqlite_file"]

SQLITE_HEADER = b"SQLite format 3\x00"


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class FileIdentity:
    """The file first seen at ``path`` (by the first transaction: connecting creates it),
    and its write-ahead log once one was seen."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None
        self.wal: tuple[int, int] | None = None
        self._fd: int | None = None

    def check(self) -> None:
        found = _identity(self.path)
        if self.identity is None and found is not None:
            self.identity = found
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                self._fd = None
        elif found != self.identity:
            raise DatabaseError(
                ErrorCode.DATABASE_GONE,
                f"the database file {self.path} was deleted or replaced while in use",
                "restore it from a backup and restart plangate; nothing more was written",
            )
        if self._fd is not None:
            # The path names the file opened (checked above): its first bytes are the
            # header every SQLite database starts with (an empty file is a new one).
            header = os.pread(self._fd, len(SQLITE_HEADER), 0)
            if header and header != SQLITE_HEADER:
                raise DatabaseError(
                    ErrorCode.DATABASE_CORRUPT,
                    f"the database file {self.path} is damaged (its header was overwritten)",
                    "restore it from a backup and restart plangate; nothing more was written",
                )
        log = _identity(self.path + "-wal")
        if self.wal is None:
            # SQLite removes the log only when the last connection closes; this store
            # keeps connections open, so from the first sighting it stays the same file.
            self.wal = log
        elif log != self.wal:
            raise DatabaseError(
                ErrorCode.DATABASE_CORRUPT,
                f"the write-ahead log of {self.path} was removed or replaced while in use: "
                "the commits since the last checkpoint are not in the database file",
                "stop plangate, restore the database from a backup, and restart it",
            )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def guard_sqlite_file(engine: AsyncEngine, url: str) -> FileIdentity | None:
    """Check the file at every transaction of ``engine`` (a few microseconds)."""
    path = sqlite_path(url)
    if path is None:
        return None
    identity = FileIdentity(str(path))

    def _begin(conn: Any) -> None:
        identity.check()

    # First among the begin listeners: refuse before SQLite's BEGIN IMMEDIATE is sent.
    event.listen(engine.sync_engine, "begin", _begin, insert=True)
    return identity
