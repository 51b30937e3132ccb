"""``session/list``: the stored ADK sessions of this app and user as ACP session infos.

The editor's folder and a title are kept in each session's state when the editor opens
it (``acp:cwd``) and sends its first message (``acp:title``); once the protocol runtime
records the task a session works on (its active intent), that names it instead. The
update time is the session's own. Newest first, a page at a time, the cursor being the
offset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from acp import RequestError
from acp.schema import ListSessionsResponse, SessionInfo

__all__ = ["CWD_KEY", "PAGE_SIZE", "TITLE_KEY", "session_page", "title_for", "with_titles"]

CWD_KEY = "acp:cwd"
TITLE_KEY = "acp:title"
PAGE_SIZE = 50
TITLE_LIMIT = 80


def title_for(text: str) -> str:
    """A session title from its first message: the first line, clipped."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= TITLE_LIMIT else line[: TITLE_LIMIT - 1] + "…"


def session_page(
    sessions: Sequence[Any],
    *,
    cwd: str | None,
    cursor: str | None,
    default_cwd: str | None,
) -> ListSessionsResponse:
    """One page of ``sessions`` (ADK sessions with state), filtered by ``cwd``. A session
    opened elsewhere (the terminal, the web) has no recorded folder: it is listed under
    ``default_cwd`` (the fixed workspace), or not at all."""
    try:
        offset = int(cursor) if cursor else 0
    except ValueError:
        raise RequestError(-32602, f"invalid cursor {cursor!r}", {"cursor": cursor}) from None
    infos: list[SessionInfo] = []
    for session in sorted(sessions, key=lambda s: s.last_update_time, reverse=True):
        state = session.state or {}
        folder = state.get(CWD_KEY) or default_cwd
        if not folder or (cwd is not None and folder != cwd):
            continue
        title = state.get(TITLE_KEY)
        infos.append(
            SessionInfo(
                session_id=session.id,
                cwd=str(folder),
                title=str(title) if title else None,
                updated_at=datetime.fromtimestamp(session.last_update_time, UTC).isoformat(),
            )
        )
    page = infos[offset : offset + PAGE_SIZE]
    more = offset + PAGE_SIZE < len(infos)
    return ListSessionsResponse(
        sessions=page, next_cursor=str(offset + PAGE_SIZE) if more else None
    )


def with_titles(page: ListSessionsResponse, titles: Mapping[str, str]) -> ListSessionsResponse:
    """``page`` with the sessions named in ``titles`` retitled."""
    sessions = [
        s.model_copy(update={"title": titles[s.session_id]}) if s.session_id in titles else s
        for s in page.sessions
    ]
    return page.model_copy(update={"sessions": sessions})
