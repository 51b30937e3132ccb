"""``PlanHistory`` tells, without rescanning, whether a session's history holds a plan
reply sent without a call id (then each step matches the history to ids)."""

from __future__ import annotations

from dataclasses import dataclass, field

from google.adk.events import Event
from google.genai import types

from plangate.adk.history import PlanHistory


@dataclass
class _Session:
    events: list[Event] = field(default_factory=list)
    app_name: str = "a"
    user_id: str = "u"
    id: str = "s"


def _reply(name: str, call_id: str | None) -> Event:
    response = types.FunctionResponse(id=call_id, name=name, response={"status": "approved"})
    return Event(
        author="user", content=types.Content(parts=[types.Part(function_response=response)])
    )


def _text(words: str) -> Event:
    return Event(author="user", content=types.Content(parts=[types.Part(text=words)]))


def test_only_a_plan_reply_without_an_id_counts_and_it_is_remembered() -> None:
    history, session = PlanHistory(), _Session()
    session.events += [_text("hi"), _reply("exit_plan_mode", "adk-1"), _reply("Read", None)]
    assert not history.has_plan_reply_without_id(session)
    session.events.append(_reply("exit_plan_mode", None))
    assert history.has_plan_reply_without_id(session)
    session.events.append(_text("more"))  # scanned from the mark on: still known
    assert history.has_plan_reply_without_id(session)


def test_a_history_that_no_longer_starts_with_what_was_scanned_is_scanned_again() -> None:
    history, session = PlanHistory(), _Session()
    session.events += [_text("hi"), _reply("ask_user_question", None)]
    assert history.has_plan_reply_without_id(session)
    session.events = [_text("rewound"), _text("again"), _text("and more")]
    assert not history.has_plan_reply_without_id(session)
