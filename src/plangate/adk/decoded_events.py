"""Events of recently read sessions, decoded once.

Every run reads its whole session back (``Runner.run_async`` starts with
``get_session``), and decoding a stored event (pydantic and google-genai validators) costs
~50 us: ~60 ms per run for a thread of 1,200 events. An event, once appended, is never
rewritten in place, so the decoded one is kept beside its stored JSON text and reused
while the row still holds that very text (a session deleted and created again under the
same id holds other text at the same positions). What a read hands out is a deep copy:
a caller may change its session's events, as ADK's own in-memory service allows, and
that must not reach the next reader. A copy costs about half a decode.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from google.adk.events import Event

__all__ = ["DecodedEvents"]

_MAX_EVENTS = 5_000
"""Events kept across all sessions (~5 KB each decoded), least recently read sessions
dropped first."""


class DecodedEvents:
    def __init__(self, max_events: int = _MAX_EVENTS) -> None:
        self._max_events = max_events
        # session key -> the stored text and decoded event of each position read so far
        self._sessions: OrderedDict[str, list[tuple[str, Event]]] = OrderedDict()
        self._count = 0

    def events(self, session_key: str, texts: Sequence[str]) -> list[Event]:
        """The events stored as ``texts`` (a session's rows in order), each a copy of
        its own."""
        kept = self._sessions.pop(session_key, [])
        self._count -= len(kept)
        decoded: list[tuple[str, Event]] = []
        for position, text in enumerate(texts):
            if position < len(kept) and kept[position][0] == text:
                decoded.append(kept[position])
            else:
                decoded.append((text, Event.model_validate_json(text)))
        if len(decoded) <= self._max_events:
            self._sessions[session_key] = decoded
            self._count += len(decoded)
            while self._count > self._max_events:
                _, dropped = self._sessions.popitem(last=False)
                self._count -= len(dropped)
        return [event.model_copy(deep=True) for _, event in decoded]

    def forget(self, session_key: str) -> None:
        self._count -= len(self._sessions.pop(session_key, []))
