"""The commit path of plan transitions (``store.writes.commit``): on SQLite the one-hop
writer, on PostgreSQL asyncpg directly. Either way a lost compare-and-set applies nothing
(journal rows included), text is cleaned, and only a lost race is a conflict."""

from __future__ import annotations

import pytest
from sqlalchemy import text as sql

from plangate.journal.events import JournalEvent
from plangate.store.errors import DatabaseError
from plangate.store.storable import REPLACEMENT
from plangate.store.store import Conflict, Store
from plangate.store.writes import Put, commit

NUL = "\x00"


def _event(kind: str, **detail: object) -> JournalEvent:
    return JournalEvent(kind=kind, subject="plan", actor="user", at=1.0, detail=dict(detail))


async def test_a_put_and_its_journal_rows_commit_together_in_order(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        events = [("s", _event(f"step.{n}", n=n)) for n in range(3)]
        assert await commit(store, [Put("doc", "k", {"v": 1}, 0)], events) == [1]
        assert await commit(store, [Put("doc", "k", {"v": 2}, 1)], []) == [2]
        document = await store.get("doc", "k")
        assert document is not None and (document.data, document.version) == ({"v": 2}, 2)
        assert [e.event.kind for e in await store.journal("s")] == ["step.0", "step.1", "step.2"]
        assert [e.event.detail for e in await store.journal("s")] == [{"n": 0}, {"n": 1}, {"n": 2}]
    finally:
        await store.close()


async def test_a_lost_compare_and_set_applies_nothing(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        await commit(store, [Put("doc", "k", {"v": 1}, 0)], [])
        await commit(store, [Put("doc", "k", {"v": 2}, 1)], [])
        for stale in (1, 0):  # an update from an old version; a second "first" write
            with pytest.raises(Conflict) as caught:
                await commit(store, [Put("doc", "k", {"v": 9}, stale)], [("s", _event("lost"))])
            assert (caught.value.expected, caught.value.actual) == (stale, 2)
        document = await store.get("doc", "k")
        assert document is not None and document.data == {"v": 2}
        assert await store.journal("s") == []
    finally:
        await store.close()


async def test_several_puts_commit_or_fail_as_one(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        await commit(store, [Put("doc", "a", {"v": 1}, 0)], [])
        with pytest.raises(Conflict):
            await commit(
                store,
                [Put("doc", "b", {"v": 1}, 0), Put("doc", "a", {"v": 2}, 5)],
                [("s", _event("both"))],
            )
        assert await store.get("doc", "b") is None
        assert await store.journal("s") == []
        versions = await commit(
            store, [Put("doc", "b", {"v": 1}, 0), Put("archive", "a#1", {"v": 1}, None)], []
        )
        assert versions == [1, 1]
    finally:
        await store.close()


async def test_text_with_nul_is_kept_cleaned_in_document_and_journal(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        event = JournalEvent(
            kind="note", subject=f"s{NUL}", actor="user", at=1.0, detail={"d": f"x{NUL}\ud800"}
        )
        await commit(store, [Put("doc", f"k{NUL}", {"t": f"a{NUL}b"}, 0)], [(f"s{NUL}", event)])
        document = await store.get("doc", f"k{REPLACEMENT}")
        assert document is not None and document.data == {"t": f"a{REPLACEMENT}b"}
        [entry] = await store.journal(f"s{REPLACEMENT}")
        assert entry.event.subject == f"s{REPLACEMENT}"
        assert entry.event.detail == {"d": f"x{REPLACEMENT}{REPLACEMENT}"}
    finally:
        await store.close()


async def test_a_refused_write_is_a_database_error_not_a_conflict(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        await commit(store, [Put("doc", "old", {"v": 1}, 0)], [])
        async with store.engine.begin() as conn:
            if store.is_sqlite:
                await conn.execute(
                    sql(
                        "CREATE TRIGGER refuse BEFORE INSERT ON plangate_documents "
                        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
                    )
                )
            else:
                await conn.execute(
                    sql("ALTER TABLE plangate_documents ADD COLUMN owner text NOT NULL DEFAULT ''")
                )
                await conn.execute(
                    sql("ALTER TABLE plangate_documents ALTER COLUMN owner DROP DEFAULT")
                )
        with pytest.raises(DatabaseError) as caught:
            await commit(store, [Put("doc", "new", {"a": 1}, 0)], [("s", _event("refused"))])
        assert not isinstance(caught.value, Conflict)
        assert "INSERT" not in str(caught.value)
        assert await store.get("doc", "new") is None
        assert await store.journal("s") == []
        # The row that exists still takes a compare-and-set update.
        assert await commit(store, [Put("doc", "old", {"v": 2}, 1)], []) == [2]
    finally:
        await store.close()
