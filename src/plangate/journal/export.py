"""The governance journal as JSON Lines others can read: one object per journaled fact,
selected by session, thread (the agent branch within a session) and time.

Pure: entries in, records out. Reading the store is the host's job (``adk.audit``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from plangate.journal.events import JournalEvent

__all__ = ["ExportFilter", "export_line", "export_record", "parse_time"]


def parse_time(text: str) -> float:
    """ISO 8601 (``2026-07-01``, ``2026-07-01T12:00:00+02:00``; UTC when no zone is given)
    or Unix seconds; anything else is a ValueError that says what is accepted."""
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"not a time: {text!r}; use ISO 8601 (2026-07-01 or 2026-07-01T12:00:00Z) "
            "or Unix seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class ExportFilter:
    session: str | None = None
    thread: str | None = None
    since: float | None = None
    until: float | None = None
    """``since`` is inclusive, ``until`` exclusive."""

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("--since must be earlier than --until")

    def matches(self, scope: str, event: JournalEvent) -> bool:
        parts = _scope_parts(scope)
        if self.session is not None and parts["session"] != self.session:
            return False
        if self.thread is not None and parts["thread"] != self.thread:
            return False
        if self.since is not None and event.at < self.since:
            return False
        return self.until is None or event.at < self.until


def _scope_parts(scope: str) -> dict[str, str | None]:
    # app/user/session/branch; app and user names may not hold "/", session ids never do.
    parts = scope.split("/")
    if len(parts) < 4:
        return {"app": None, "user": None, "session": None, "thread": None}
    return {
        "app": "/".join(parts[:-3]),
        "user": parts[-3],
        "session": parts[-2],
        "thread": parts[-1],
    }


def export_record(seq: int, scope: str, event: JournalEvent) -> dict[str, Any]:
    return {
        "seq": seq,
        "scope": scope,
        **_scope_parts(scope),
        "time": datetime.fromtimestamp(event.at, UTC).isoformat(),
        **event.model_dump(mode="json"),
    }


def export_line(seq: int, scope: str, event: JournalEvent) -> str:
    return json.dumps(export_record(seq, scope, event), ensure_ascii=False, sort_keys=True)
