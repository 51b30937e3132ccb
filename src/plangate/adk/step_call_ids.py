"""Every call of a model step gets an id of its own.

Pending requests, replies, resumption and approvals are all keyed by function-call id,
and so is ADK's own bookkeeping (a long-running call counts as answered once a response
with its id exists). A gateway that gives two calls of one step the same id, or a server
that numbers ids per response and so reuses an earlier step's id, would let one call's
result answer another: a read's result "answers" the question beside it and the run goes
on without the user. Each repeat is renamed before ADK builds the step's event; the
renamed id is what the session stores and what the provider is sent back, so the history
stays consistent (every call has exactly one result with its id).
"""

from __future__ import annotations

from collections.abc import Iterable

from google.adk.events import Event
from google.genai import types

__all__ = ["unique_call_ids"]


def unique_call_ids(content: types.Content | None, earlier: Iterable[Event] = ()) -> dict[int, str]:
    """Rename, in place, each call of ``content`` whose id an earlier call of the step or
    of ``earlier`` (the session's events) already holds; returns {part index: new id}.

    A new id is the old one with a numeric suffix (``call_1`` -> ``call_1_2``), letters,
    digits, ``_`` and ``-`` only, as every provider accepts. Calls without an id are left
    to ADK, which names them itself.
    """
    parts = content.parts if content is not None else None
    if not parts:
        return {}
    ids = [p.function_call.id if p.function_call is not None else None for p in parts]
    named = [i for i in ids if i]
    if not named:
        return {}
    taken = {
        call.id
        for event in earlier
        for call in event.get_function_calls()
        if call.id and call.id in named
    }
    if len(set(named)) == len(named) and not taken:
        return {}
    taken = set(taken)
    every = set(named) | taken
    renamed: dict[int, str] = {}
    for index, call_id in enumerate(ids):
        if not call_id:
            continue
        if call_id not in taken:
            taken.add(call_id)
            continue
        n = 2
        while f"{call_id}_{n}" in every:
            n += 1
        fresh = f"{call_id}_{n}"
        every.add(fresh)
        taken.add(fresh)
        call = parts[index].function_call
        assert call is not None
        parts[index] = parts[index].model_copy(
            update={"function_call": call.model_copy(update={"id": fresh})}
        )
        renamed[index] = fresh
    return renamed
