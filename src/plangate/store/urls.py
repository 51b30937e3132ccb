"""One database URL for everything: ADK sessions, the journal, plans, intents."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DEFAULT_DATABASE_PATH",
    "ensure_sqlite_folder",
    "redacted",
    "resolve_database_url",
    "sqlite_path",
    "unusable_path",
]

DEFAULT_DATABASE_PATH = Path(".plangate") / "plangate.db"
ENV_VAR = "PLANGATE_DATABASE_URL"


def resolve_database_url(url: str | None = None) -> str:
    """Normalise a URL to an async driver; default to an embedded SQLite file.

    ``sqlite:///x.db`` becomes ``sqlite+aiosqlite:///x.db`` and ``postgresql://…``
    becomes ``postgresql+asyncpg://…``. Without a URL, ``PLANGATE_DATABASE_URL`` is used,
    else ``.plangate/plangate.db`` under the working directory.

    Pure: nothing is created here. The folder of a SQLite file is made once, when the
    database is opened at start (``ensure_sqlite_folder``), so a folder deleted while
    the process runs is reported instead of silently replaced by an empty database.
    """
    url = url or os.environ.get(ENV_VAR)
    if not url:
        path = (Path.cwd() / DEFAULT_DATABASE_PATH).resolve()
        return f"sqlite+aiosqlite:///{path}"
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {url!r} (expected e.g. sqlite:///plangate.db)")
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        return f"sqlite+aiosqlite://{rest}"
    if base in ("postgresql", "postgres"):
        return _checked(f"postgresql+asyncpg://{rest}")
    raise ValueError(f"unsupported database {scheme!r}: use sqlite:// or postgresql://")


def _checked(url: str) -> str:
    """``url`` when SQLAlchemy can parse it; else a ``ValueError`` naming the part that is
    wrong (its own message is ``int()``'s, about a port it does not name)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except ValueError:
        port = url.rsplit("@", 1)[-1].split("/", 1)[0].rpartition(":")[2]
        raise ValueError(
            f"the database URL's port {port!r} is not a number"
            f" (expected e.g. postgresql://user@host:5432/plangate)"
        ) from None
    except Exception as exc:  # ArgumentError: a URL SQLAlchemy cannot read at all
        raise ValueError(f"not a database URL: {redacted(url)} ({exc})") from None
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise ValueError(f"the database URL's port {parsed.port} is out of range (1-65535)")
    return url


def sqlite_path(url: str) -> Path | None:
    """The file of an embedded database URL (``None`` for PostgreSQL and in-memory)."""
    prefix = "sqlite+aiosqlite:///"
    if not url.startswith(prefix):
        return None
    rest = url[len(prefix) :].split("?", 1)[0]
    if rest in ("", ":memory:"):
        return None
    return Path(rest).expanduser()


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder of an embedded database file: done once, at start.

    A path no file can be made at (under a regular file, in ``/proc``, on a read-only
    mount) raises ``DatabaseError`` with ``DATABASE_PATH_UNUSABLE``: the one line every
    entry point prints, not the ``OSError``'s traceback."""
    path = sqlite_path(url)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unusable_path(path, exc) from None


def unusable_path(path: Path, exc: OSError) -> Exception:
    """The error for a SQLite path the system will not hold a database at."""
    from plangate.errors import ErrorCode
    from plangate.store.errors import DatabaseError

    reason = (exc.strerror or type(exc).__name__).lower()
    if isinstance(exc, FileExistsError | NotADirectoryError):
        blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            reason = f"{blocker} is a file, not a folder"
    return DatabaseError(
        ErrorCode.DATABASE_PATH_UNUSABLE,
        f"no database can be kept at {path} ({reason})",
        "point --database-url at a file in a writable folder",
    )


def redacted(url: str) -> str:
    """The URL as it may be shown: no password."""
    from sqlalchemy.engine import make_url

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparseable URL is shown by its scheme only
        return url.split("://", 1)[0] + "://…"
    # The driver is an internal choice: show the URL the way the user wrote it.
    return shown.replace("+asyncpg://", "://", 1).replace("+aiosqlite://", "://", 1)
