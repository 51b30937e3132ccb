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
        return f"postgresql+asyncpg://{rest}"
    raise ValueError(f"unsupported database {scheme!r}: use sqlite:// or postgresql://")


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
    """Create the folder of an embedded database file: done once, at start."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)


def redacted(url: str) -> str:
    """The URL as it may be shown: no password."""
    from sqlalchemy.engine import make_url

    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparseable URL is shown by its scheme only
        return url.split("://", 1)[0] + "://…"
    # The driver is an internal choice: show the URL the way the user wrote it.
    return shown.replace("+asyncpg://", "://", 1).replace("+aiosqlite://", "://", 1)
