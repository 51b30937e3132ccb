"""One database URL for everything: ADK sessions, the journal, plans, intents."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_DATABASE_PATH", "resolve_database_url"]

DEFAULT_DATABASE_PATH = Path(".plangate") / "plangate.db"
ENV_VAR = "PLANGATE_DATABASE_URL"


def resolve_database_url(url: str | None = None) -> str:
    """Normalise a URL to an async driver; default to an embedded SQLite file.

    ``sqlite:///x.db`` becomes ``sqlite+aiosqlite:///x.db`` and ``postgresql://…``
    becomes ``postgresql+asyncpg://…``. Without a URL, ``PLANGATE_DATABASE_URL`` is used,
    else ``.plangate/plangate.db`` under the working directory (created on first use).
    """
    url = url or os.environ.get(ENV_VAR)
    if not url:
        path = (Path.cwd() / DEFAULT_DATABASE_PATH).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite+aiosqlite:///{path}"
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {url!r} (expected e.g. sqlite:///plangate.db)")
    base = scheme.split("+", 1)[0]
    if base == "sqlite":
        if rest.startswith("/") and rest not in ("/", "/:memory:"):
            Path(rest[1:]).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite+aiosqlite://{rest}"
    if base in ("postgresql", "postgres"):
        return f"postgresql+asyncpg://{rest}"
    raise ValueError(f"unsupported database {scheme!r}: use sqlite:// or postgresql://")
