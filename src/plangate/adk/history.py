"""Whether a session's history holds a plan-tool reply without a call id, known without
rescanning it at every model step.

The step boundary rewrites plan-tool results in each request (canonical results, answers
for dangling calls, an explanation for a reply that answers nothing), which means
matching every call and reply in the history to its id. With no decision recorded (no
resolution, ignored reply or open request) the only rewrite left is for a plan-tool reply
the user sent without an id: every reply ADK or a surface stored with its id matches its
own stored part and keeps its result. Most steps of most sessions, including sessions
that wrote a plan, are such; this remembers, per session, how far its events were
scanned, so a step looks only at the events appended since the last one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from plangate.plan.gate import PLAN_TOOL_NAMES

__all__ = ["PlanHistory"]

_MAX_SESSIONS = 4096


class PlanHistory:
    def __init__(self) -> None:
        # session -> (events scanned, id of the last one, an id-less plan reply was seen)
        self._marks: OrderedDict[tuple[str, str, str], tuple[int, str | None, bool]] = OrderedDict()

    def has_plan_reply_without_id(self, session: Any) -> bool:
        events: Sequence[Any] = session.events
        key = (session.app_name, session.user_id, session.id)
        mark = self._marks.get(key)
        start, found = 0, False
        if mark is not None:
            count, last_id, found = mark
            # Trust the mark only if the history still starts with what was scanned.
            if 0 < count <= len(events) and events[count - 1].id == last_id:
                start = count
            else:
                start, found = 0, False
        if not found:
            found = any(_plan_reply_without_id(events[i]) for i in range(start, len(events)))
        self._marks[key] = (len(events), events[-1].id if events else None, found)
        self._marks.move_to_end(key)
        if len(self._marks) > _MAX_SESSIONS:
            self._marks.popitem(last=False)
        return found


def _plan_reply_without_id(event: Any) -> bool:
    content = event.content
    for part in (content.parts if content else None) or ():
        response = part.function_response
        if response is not None and not response.id and response.name in PLAN_TOOL_NAMES:
            return True
    return False
