"""Database failures as codes a person can act on.

Drivers and SQLAlchemy describe a failure with the statement that failed and the
driver's own wording. Neither may reach a client: the statement leaks the schema and
the wording differs between SQLite and PostgreSQL. ``database_error`` turns any of them
into one ``DatabaseError`` with a stable code, a one-line message and a hint.

A compare-and-set loss is not a database failure: it stays ``Conflict``.
"""

from __future__ import annotations

import socket
import sqlite3

from plangate.errors import CodedError, ErrorCode

__all__ = ["DatabaseError", "database_error", "is_database_failure"]


class DatabaseError(CodedError):
    """The database cannot do what was asked; ``message`` never contains SQL."""

    def line(self) -> str:
        """One line for a terminal: the problem, then what to do."""
        return f"{self.message}" + (f"; {self.hint}" if self.hint else "")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps: SQLAlchemy's ``orig``, the adapter's cause."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        todo.extend([getattr(current, "orig", None), current.__cause__, current.__context__])
    return seen


def is_database_failure(exc: BaseException) -> bool:
    """Whether ``exc`` came from the database layer (driver, pool or SQLAlchemy)."""
    from sqlalchemy.exc import SQLAlchemyError

    for item in _chain(exc):
        if isinstance(item, DatabaseError | SQLAlchemyError | sqlite3.Error):
            return True
        if type(item).__module__.startswith("asyncpg"):
            return True
    return False


def database_error(exc: BaseException, where: str = "the database") -> DatabaseError:
    """Classify a driver, pool or SQLAlchemy failure; ``where`` names the database
    (a URL without its password)."""
    if isinstance(exc, DatabaseError):
        return exc
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    chain = _chain(exc)
    for item in chain:
        if isinstance(item, DatabaseError):
            return item
        if isinstance(
            item,
            asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError,
        ):
            return DatabaseError(
                ErrorCode.DATABASE_AUTH_FAILED,
                f"{where} refused the login (wrong user or password)",
                "check the user and password in the database URL",
            )
        if isinstance(item, asyncpg.InvalidCatalogNameError):
            return DatabaseError(
                ErrorCode.DATABASE_MISSING,
                f"{where} does not exist",
                "create it (createdb NAME) or fix the database name in the URL",
            )
        if isinstance(item, asyncpg.UndefinedTableError):
            return DatabaseError(
                ErrorCode.DATABASE_TABLE_MISSING,
                f"a table is missing in {where}",
                "run plangate db check",
            )
        if isinstance(
            item, asyncpg.UntranslatableCharacterError | asyncpg.CharacterNotInRepertoireError
        ):
            return DatabaseError(
                ErrorCode.TEXT_NOT_STORABLE,
                "the text holds a character the database cannot store (such as NUL)",
                "remove control characters and retry",
            )
        if isinstance(item, socket.gaierror):
            return DatabaseError(
                ErrorCode.DATABASE_UNKNOWN_HOST,
                f"the host of {where} is unknown",
                "fix the host name in the database URL",
            )
        if isinstance(item, sqlite3.OperationalError) and "unable to open" in str(item):
            return DatabaseError(
                ErrorCode.DATABASE_GONE,
                f"{where} cannot be opened (its folder is missing or not writable)",
                "restore the folder or point --database-url at a writable place",
            )
        if isinstance(item, sqlite3.DatabaseError) and _damaged(str(item)):
            return DatabaseError(
                ErrorCode.DATABASE_CORRUPT,
                f"{where} is not a SQLite database, or is damaged",
                "restore the file from a backup, or point --database-url elsewhere",
            )
        if isinstance(item, sqlite3.OperationalError) and "no such table" in str(item):
            return DatabaseError(
                ErrorCode.DATABASE_TABLE_MISSING,
                f"a table is missing in {where}",
                "run plangate db check",
            )
    for item in chain:
        lost = (
            OSError,
            TimeoutError,
            asyncpg.CannotConnectNowError,
            asyncpg.ConnectionDoesNotExistError,
        )
        if isinstance(item, lost):
            return DatabaseError(
                ErrorCode.DATABASE_UNREACHABLE,
                f"{where} is unreachable",
                "check that the server is running and the host and port are right",
            )
        if type(item).__name__ in ("InterfaceError", "ConnectionFailureError"):
            return DatabaseError(
                ErrorCode.DATABASE_UNREACHABLE,
                f"the connection to {where} was lost",
                "retry once the database is back",
            )
    return DatabaseError(
        ErrorCode.DATABASE_ERROR,
        f"{where} failed ({_driver_name(chain)})",
        "retry; if it persists, run plangate db check",
    )


def _damaged(message: str) -> bool:
    """SQLite's two wordings for a file it cannot read as a database."""
    return "file is not a database" in message or "disk image is malformed" in message


def _driver_name(chain: list[BaseException]) -> str:
    """The most specific exception class name in the chain: no message, so no SQL."""
    return type(chain[-1]).__name__ if chain else "error"
