"""The read paths of a run (protocol documents, session intents) are cheap and never
stale: a commit through another connection is seen by the very next read, on SQLite (the
lock-free reader and its ``data_version`` stamp) and on PostgreSQL (a read every time).
A run start commits in one hop, or not at all."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from sqlalchemy import update

from plangate.adk.protocol_runtime import ProtocolRuntime
from plangate.adk.protocols import ProtocolOptions
from plangate.adk.scope import PlanScope
from plangate.protocol import GENERAL_TASK_REF, IntentTransition
from plangate.protocol.definitions import ProtocolState, segment_id_for, start_segment
from plangate.store.fresh import FreshDocuments, FreshReads
from plangate.store.intents import IntentRepository, IntentRevision
from plangate.store.protocol_state import SEGMENT_KIND, ProtocolStateStore, RunRecord
from plangate.store.schema import documents
from plangate.store.store import Document, Store, Transaction
from plangate.store.writes import Put, commit, transact


def _run(scope: str, run_id: str) -> tuple[RunRecord, object]:
    segment = start_segment(GENERAL_TASK_REF, segment_id_for(run_id))
    record = RunRecord(
        run_id=run_id,
        scope_key=scope,
        session_key=scope,
        agent="agent",
        segment_ids=(segment.segment_id,),
        started_at=time.time(),
    )
    return record, segment


async def test_protocol_documents_written_elsewhere_are_read_at_once(database_url: str) -> None:
    here, there = await Store.open(database_url), await Store.open(database_url)
    try:
        scope, run_id = f"app/u/{uuid.uuid4().hex}/agent", "e-run"
        record, segment = _run(scope, run_id)
        await ProtocolStateStore(here).create(scope, record, segment, [])  # type: ignore[arg-type]
        mine = ProtocolStateStore(here)
        first = await mine.segment(scope, record.active_segment_id)
        assert first is not None and first.version == 1
        assert await mine.segment(scope, record.active_segment_id) == first  # kept
        # Another connection (another process, as far as SQLite can tell) commits. Not
        # through ``ProtocolStateStore``: what it writes, it remembers for this process.
        done = first.value.model_copy(update={"phase": "done"})
        async with there.transaction() as tx:
            await tx.put(
                SEGMENT_KIND,
                f"{scope}#{record.active_segment_id}",
                done.model_dump(mode="json", by_alias=True),
                expected_version=1,
            )
        seen = await mine.segment(scope, record.active_segment_id)
        assert seen is not None and seen.version == 2 and seen.value.phase == "done"
        run = await mine.run(scope, run_id)
        assert run is not None and run.value.run_id == run_id
        assert await mine.run(scope, "e-none") is None
    finally:
        await here.close()
        await there.close()


async def test_protocol_documents_written_here_are_not_decoded_again(database_url: str) -> None:
    """What this process commits is read back as the very value it wrote, as long as the
    row is what it wrote; a row changed under it is decoded again."""
    store = await Store.open(database_url)
    try:
        scope, run_id = f"app/u/{uuid.uuid4().hex}/agent", "w-run"
        record, segment = _run(scope, run_id)
        states = ProtocolStateStore(store)
        await states.create(scope, record, segment, [])  # type: ignore[arg-type]
        stored = await store.get(SEGMENT_KIND, f"{scope}#{record.active_segment_id}")
        assert stored is not None
        # The value kept is the one a decode of the stored row gives.
        assert ProtocolState.model_validate(stored.data) == segment
        read = await states.segment(scope, record.active_segment_id)
        assert read is not None and read.version == 1
        run = await states.run(scope, run_id)
        assert run is not None and run.value == record
        if store.reader is not None:  # SQLite: kept without decoding
            assert read.value is segment and run.value is record
        changed = await states.update_segment(
            scope,
            record.active_segment_id,
            lambda state: (state.model_copy(update={"phase": "done"}), []),
        )
        again = await states.segment(scope, record.active_segment_id)
        assert again is not None and again.version == 2 and again.value == changed
        # Rewritten in place under the same version: decoded from the row, not kept.
        async with store.transaction() as tx:
            await tx.connection.execute(
                update(documents)
                .where(
                    documents.c.kind == SEGMENT_KIND,
                    documents.c.key == f"{scope}#{record.active_segment_id}",
                )
                .values(data={**changed.model_dump(mode="json", by_alias=True), "phase": "x"})
            )
        last = await states.segment(scope, record.active_segment_id)
        assert last is not None and last.version == 2 and last.value.phase == "x"
    finally:
        await store.close()


async def test_intent_reads_are_kept_only_until_something_commits(database_url: str) -> None:
    here, there = await Store.open(database_url), await Store.open(database_url)
    try:
        session = f"app/u/{uuid.uuid4().hex}"
        reads = FreshReads[str | None]()
        calls = 0

        async def head() -> str | None:
            nonlocal calls
            calls += 1
            return await here.read(lambda conn: IntentRepository(conn).head(session))

        assert await reads.get(here, session, head) is None
        assert await reads.get(here, session, head) is None
        if here.reader is not None:
            assert calls == 1  # nothing committed in between: the kept answer
        async with there.transaction() as tx:
            revision = await IntentRepository(tx.connection).commit(
                session,
                IntentTransition(
                    kind="initial",
                    intent_id=None,
                    previous_revision_id=None,
                    protocol=GENERAL_TASK_REF,
                    text="a task",
                    task_relation="replace",
                ),
                expected_head=None,
                source_run_id="run-1",
            )
        assert await reads.get(here, session, head) == revision.id
    finally:
        await here.close()
        await there.close()


async def test_a_one_hop_commit_that_waits_on_something_else_applies_nothing(
    tmp_path: object,
) -> None:
    store = await Store.open(f"sqlite:///{tmp_path}/hop.db")
    try:
        assert store.writer is not None

        async def waits(tx: object) -> None:
            await tx.put("note", "k", {"a": 1}, expected_version=0)  # type: ignore[attr-defined]
            await asyncio.sleep(0)  # not a statement of this transaction

        with pytest.raises(RuntimeError, match="waited on something"):
            await transact(store, waits)  # type: ignore[arg-type]
        assert await store.get("note", "k") is None

        async def writes(tx: object) -> int:
            return await tx.put("note", "k", {"a": 2}, expected_version=0)  # type: ignore[attr-defined]

        assert await transact(store, writes) == 1  # type: ignore[arg-type]
        stored = await store.get("note", "k")
        assert stored is not None and stored.data == {"a": 2}
    finally:
        await store.close()


async def test_a_kept_document_is_validated_by_its_own_row(database_url: str) -> None:
    """The kept decoded value is reused only while the row is the one it was decoded
    from: a new version is seen, and so is a row rewritten in place under the same one."""
    here, there = await Store.open(database_url), await Store.open(database_url)
    try:
        key = uuid.uuid4().hex
        decoded: list[object] = []

        def decode(_key: str, document: Document | None) -> object:
            decoded.append(None if document is None else document.data)
            return None if document is None else (document.version, document.data["n"])

        docs = FreshDocuments("test_doc", decode)
        assert await docs.get(here, key) is None
        async with there.transaction() as tx:
            await tx.put("test_doc", key, {"n": 1}, expected_version=0)
        assert await docs.get(here, key) == (1, 1)
        # An unrelated commit to the same database: the row is unchanged, nothing decoded.
        async with there.transaction() as tx:
            await tx.put("test_doc", f"{key}-other", {"n": 0}, expected_version=0)
        assert await docs.get(here, key) == (1, 1)
        assert len(decoded) == 2
        async with there.transaction() as tx:
            await tx.put("test_doc", key, {"n": 2}, expected_version=1)
        assert await docs.get(here, key) == (2, 2)
        async with there.transaction() as tx:
            await tx.connection.execute(
                update(documents)
                .where(documents.c.kind == "test_doc", documents.c.key == key)
                .values(data={"n": 3})
            )
        assert await docs.get(here, key) == (2, 3)
        assert len(decoded) == 4
    finally:
        await here.close()
        await there.close()


async def test_several_documents_are_read_in_one_go_as_last_committed(database_url: str) -> None:
    here, there = await Store.open(database_url), await Store.open(database_url)
    try:
        key = uuid.uuid4().hex
        await commit(there, [Put("a", key, {"n": 1}, 0), Put("b", key, ["x"], 0)], [])
        wanted = [("a", key), ("b", key), ("c", key), ("a", "other")]
        assert await here.get_many(wanted) == {
            ("a", key): Document({"n": 1}, 1),
            ("b", key): Document(["x"], 1),
        }
        # A commit through another connection is seen by the very next read.
        await commit(there, [Put("a", key, {"n": 2}, 1)], [])
        assert (await here.get_many(wanted))[("a", key)] == Document({"n": 2}, 2)
        assert await here.get_many([]) == {}
    finally:
        await here.close()
        await there.close()


async def test_a_runs_intent_follows_a_handoff_committed_elsewhere(database_url: str) -> None:
    """The mirror keeps a run's intent revision against the run document's version: a
    handoff another process commits (new binding, new run version) is in the very next
    mirror, and a commit that leaves the run alone changes nothing."""
    here, there = await Store.open(database_url), await Store.open(database_url)
    try:
        scope = PlanScope("app", "u", uuid.uuid4().hex, "analyst")
        session, run_id = scope.session_key, "e-run"
        record, segment = _run(scope.key, run_id)
        task = IntentTransition(
            kind="initial",
            intent_id=None,
            previous_revision_id=None,
            protocol=GENERAL_TASK_REF,
            text="the first task",
            task_relation="replace",
        )
        written: list[IntentRevision | None] = []

        async def bind(tx: Transaction) -> None:
            _, revision = await IntentRepository(tx.connection).commit_run_start(
                session,
                run_id,
                expected_base_id=None,
                expected_head=None,
                transition=task,
                task_relation="replace",
            )
            written.append(revision)

        elsewhere = ProtocolStateStore(there)
        await elsewhere.create(scope.key, record, segment, [], within=bind)  # type: ignore[arg-type]
        runtime = ProtocolRuntime(
            ProtocolOptions(database_url=database_url),
            "analyst",
            model_classifier=lambda: None,
            fallback_database_url=lambda: None,
        )
        first = await runtime.mirror(scope, run_id)
        assert first["intent"]["text"] == "the first task"
        await elsewhere.append(scope.key, [])  # a commit that leaves the run alone
        assert await runtime.mirror(scope, run_id) == first
        base = written[0]
        assert base is not None
        handoff = IntentTransition(
            kind="handoff",
            intent_id=base.intent_id,
            previous_revision_id=base.id,
            protocol=GENERAL_TASK_REF,
            text="the handed-off task",
            task_relation="continue",
        )

        async def apply(tx: Transaction) -> None:
            await IntentRepository(tx.connection).apply_handoff(session, run_id, handoff)

        await elsewhere.write(scope.key, run=(record, 1), within=apply)
        after = await runtime.mirror(scope, run_id)
        assert after["intent"]["text"] == "the handed-off task"
    finally:
        await here.close()
        await there.close()
