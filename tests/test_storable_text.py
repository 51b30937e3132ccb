"""Text PostgreSQL refuses (NUL, unpaired surrogates) never fails a turn, on either store;
and a database error that is not a lost compare-and-set is never called a conflict."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text as sql

from harness import WRITES, make_agent
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.journal.events import JournalEvent
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.store.errors import DatabaseError
from plangate.store.storable import REPLACEMENT, clean_json, clean_text
from plangate.store.store import Conflict, Store

NUL = "\x00"


def test_clean_text_replaces_raw_nul_and_lone_surrogates_only() -> None:
    assert clean_text(f"a{NUL}b") == f"a{REPLACEMENT}b"
    assert clean_text("x\ud800y") == f"x{REPLACEMENT}y"
    assert clean_text("ok \U0001f600 é") == "ok \U0001f600 é"
    # Text that spells an escape is the user's content: kept.
    assert clean_text("\\u0000") == "\\u0000"


def test_clean_json_replaces_escapes_but_not_escaped_backslashes() -> None:
    assert json.loads(clean_json(json.dumps(f"a{NUL}b"))) == f"a{REPLACEMENT}b"
    assert json.loads(clean_json(json.dumps("x\ud800y"))) == f"x{REPLACEMENT}y"
    assert json.loads(clean_json(json.dumps("\udc00z"))) == f"{REPLACEMENT}z"
    assert json.loads(clean_json(json.dumps("\\u0000"))) == "\\u0000"
    assert json.loads(clean_json(json.dumps("\U0001f600"))) == "\U0001f600"
    assert json.loads(clean_json(json.dumps({"k\x00": [NUL]}))) == {
        f"k{REPLACEMENT}": [REPLACEMENT]
    }


async def test_fix_12_3_documents_and_journal_keep_text_with_nul(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        async with store.transaction() as tx:
            await tx.put("doc", "k", {"text": f"a{NUL}b", "bad": "x\ud800"}, expected_version=0)
            await tx.append(
                "scope",
                JournalEvent(
                    kind="note", subject=f"s{NUL}", actor="user", at=1.0, detail={"d": NUL}
                ),
            )
        document = await store.get("doc", "k")
        assert document is not None
        assert document.data == {"text": f"a{REPLACEMENT}b", "bad": f"x{REPLACEMENT}"}
        [entry] = await store.journal("scope")
        assert entry.event.subject == f"s{REPLACEMENT}"
        assert entry.event.detail == {"d": REPLACEMENT}
    finally:
        await store.close()


def _texts(events: list[Any]) -> str:
    parts: list[str] = []
    for event in events:
        for part in (event.content.parts if event.content else None) or []:
            if part.text:
                parts.append(part.text)
            if part.function_call is not None:
                parts.append(json.dumps(part.function_call.args, ensure_ascii=False))
            if part.function_response is not None:
                parts.append(json.dumps(part.function_response.response, ensure_ascii=False))
    return "\n".join(parts)


async def test_fix_12_3_nul_in_user_text_reply_and_tool_arguments_keeps_the_turn(
    database_url: str,
) -> None:
    model = ScriptedLlm()
    runner = build_runner(make_agent(model), database_url=database_url, app_name="nul")
    session = await PlanSession.open(runner, session_id="s1")
    model.add(
        # NUL in a text argument; a path with NUL names no file, and the authority
        # refuses it before the tool runs (INVALID_ARGS).
        [text(f"reply{NUL}1"), call("Write", path="f.txt", content=f"x{NUL}y")],
        [text(f"done{NUL}")],
    )
    events = [event async for event in session.run(f"write{NUL}it \ud800")]
    path, content = WRITES[0]
    assert (path, content) == ("f.txt", "x\x00y")  # the tool got what the model sent
    assert f"done{NUL}" in _texts(events)  # the live stream is not altered

    # A new runner on the same database reads the turn back, cleaned.
    again = build_runner(make_agent(ScriptedLlm()), database_url=database_url, app_name="nul")
    stored = await PlanSession(again, user_id=session.user_id, session_id="s1").session()
    written = _texts(list(stored.events))
    if database_url.startswith("sqlite"):
        # ADK serialises its own events for SQLite, which stores NUL as it is.
        written = written.replace(NUL, REPLACEMENT).replace("\\u0000", "\\ufffd")
    assert NUL not in written
    for piece in (f"write{REPLACEMENT}it", f"reply{REPLACEMENT}1", "done"):
        assert piece in written, written
    assert "x\\ufffdy" in written or f"x{REPLACEMENT}y" in written


async def _refuse_new_rows(store: Store) -> None:
    """Someone added a rule this code does not know: a NOT NULL column (PostgreSQL), a
    trigger that aborts every insert (SQLite, which cannot add such a column)."""
    async with store.engine.begin() as conn:
        if store.is_sqlite:
            await conn.execute(
                sql(
                    "CREATE TRIGGER refuse BEFORE INSERT ON plangate_documents "
                    "BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )
        else:
            await conn.execute(sql("ALTER TABLE plangate_documents ADD COLUMN owner text NOT NULL"))


async def test_fix_12_3_a_refused_insert_is_a_database_error_not_a_conflict(
    database_url: str,
) -> None:
    store = await Store.open(database_url)
    try:
        await _refuse_new_rows(store)
        with pytest.raises(DatabaseError) as caught:
            async with store.transaction() as tx:
                await tx.put("doc", "new", {"a": 1}, expected_version=0)
        assert not isinstance(caught.value, Conflict)
        assert caught.value.code.value == "DATABASE_ERROR"
        assert "INSERT" not in str(caught.value)
        assert await store.get("doc", "new") is None
    finally:
        await store.close()


async def test_a_lost_insert_race_is_still_a_conflict(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        async with store.transaction() as tx:
            await tx.put("doc", "k", {"a": 1}, expected_version=0)
        with pytest.raises(Conflict):
            async with store.transaction() as tx:
                await tx.put("doc", "k", {"a": 2}, expected_version=0)
    finally:
        await store.close()
