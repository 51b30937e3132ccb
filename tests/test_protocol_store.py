"""Session intents and protocol state on the store, on SQLite and on PostgreSQL.

Ports the anchor's repository and protocol-state-store scenarios; each regression the
store fixes is named after its weakness (§8.6 CAS, §8.7 lineage, §8.8 same on every
backend -- the ``database_url`` fixture runs every test on SQLite and PostgreSQL,
§8.13 migrations).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import delete, select

from plangate.errors import ErrorCode
from plangate.journal.events import JournalEvent
from plangate.protocol import DATA_ANALYSIS_REF, GENERAL_TASK_REF, IntentTransition
from plangate.protocol.definitions import (
    ActionOutcome,
    ProtocolError,
    ProtocolState,
    record_action,
    segment_id_for,
    start_segment,
)
from plangate.store.intents import IntentRepository, IntentRevision, IntentRevisionConflict
from plangate.store.protocol_state import SEGMENT_KIND, ProtocolStateStore, RunRecord
from plangate.store.schema import documents, intent_revisions, schema_migrations
from plangate.store.shared import shared_store
from plangate.store.store import Conflict, Store


def key() -> str:
    return f"app/user/{uuid.uuid4().hex}"


def transition(
    text: str,
    *,
    kind: str = "initial",
    base: IntentRevision | None = None,
    protocol=DATA_ANALYSIS_REF,
    keep_identity: bool = False,
) -> IntentTransition:
    return IntentTransition(
        kind=kind,
        intent_id=base.intent_id if base and keep_identity else None,
        previous_revision_id=base.id if base else None,
        protocol=protocol,
        text=text,
        task_relation="refine" if keep_identity else "replace",
    )


async def commit(store: Store, session: str, tr: IntentTransition, expected: str | None):
    async with store.transaction() as tx:
        return await IntentRepository(tx.connection).commit(
            session, tr, expected_head=expected, source_run_id="run-x"
        )


async def read(store: Store, fn):
    async with store.engine.connect() as conn:
        return await fn(IntentRepository(conn))


# --------------------------------------------------------------------------- repository


async def test_commits_and_reads_the_session_intent(database_url: str) -> None:
    store = await shared_store(database_url)
    session = key()
    first = await commit(store, session, transition("revenue by region"), None)
    resolved = await read(store, lambda r: r.resolve(session))
    assert resolved == first
    assert resolved.as_intent().text == "revenue by region"
    assert resolved.change_kind == "initial"


async def test_a_replace_moves_the_head_and_keeps_the_old_revision(database_url: str) -> None:
    store = await shared_store(database_url)
    session = key()
    first = await commit(store, session, transition("revenue by region"), None)
    second = await commit(
        store, session, transition("write the README", kind="replace", base=first), first.id
    )
    assert (await read(store, lambda r: r.resolve(session))).id == second.id
    assert second.previous_revision_id == first.id
    assert second.intent_id != first.intent_id
    assert [r.id for r in await read(store, lambda r: r.revisions(session))] == [
        first.id,
        second.id,
    ]


async def test_no_intent_without_a_head_or_lineage(database_url: str) -> None:
    store = await shared_store(database_url)
    assert await read(store, lambda r: r.resolve(key())) is None


async def test_stale_expected_head_is_a_conflict_and_changes_nothing(database_url: str) -> None:
    """§8.6: a lost compare-and-set is a clear error, and nothing is half-written."""
    store = await shared_store(database_url)
    session = key()
    first = await commit(store, session, transition("one"), None)
    second = await commit(store, session, transition("two", kind="replace", base=first), first.id)
    with pytest.raises(IntentRevisionConflict) as raised:
        await commit(store, session, transition("three", kind="replace", base=first), first.id)
    assert raised.value.code == "SESSION_INTENT_REVISION_CONFLICT"
    assert str(raised.value).startswith(f"SESSION_INTENT_REVISION_CONFLICT:{session}")
    assert isinstance(raised.value, Conflict)
    assert (await read(store, lambda r: r.head(session))) == second.id
    texts = [r.text for r in await read(store, lambda r: r.revisions(session))]
    assert texts == ["one", "two"]
    with pytest.raises(IntentRevisionConflict):  # "no head yet" is a claim too
        await commit(store, session, transition("four"), None)


async def test_run_binding_fixes_the_base_at_first_bind(database_url: str) -> None:
    store = await shared_store(database_url)
    session = key()
    first = await commit(store, session, transition("one"), None)
    async with store.transaction() as tx:
        repo = IntentRepository(tx.connection)
        binding, _ = await repo.commit_run_start(
            session,
            "run-1",
            expected_base_id=first.id,
            expected_head=first.id,
            transition=transition("one, by month", kind="refine", base=first, keep_identity=True),
            task_relation="refine",
        )
        again = await repo.bind_run(
            session,
            "run-1",
            base_revision_id="ignored",
            active_revision_id=binding.active_revision_id,
            task_relation="continue",
        )
    assert binding.base_revision_id == first.id
    assert again.base_revision_id == first.id
    active = await read(store, lambda r: r.resolve_for_run(session, "run-1"))
    assert active.text == "one, by month" and active.intent_id == first.intent_id
    # The head moves on; the run keeps its own task.
    await commit(store, session, transition("other", kind="replace", base=active), active.id)
    assert (await read(store, lambda r: r.resolve_for_run(session, "run-1"))).id == active.id


async def test_route_commit_fails_when_the_base_changed_during_routing(database_url: str) -> None:
    """Even a route that writes no revision (side-chat) checks the base it was given."""
    store = await shared_store(database_url)
    session = key()
    first = await commit(store, session, transition("one"), None)
    concurrent = await commit(
        store, session, transition("two", kind="replace", base=first), first.id
    )
    with pytest.raises(IntentRevisionConflict):
        async with store.transaction() as tx:
            await IntentRepository(tx.connection).commit_run_start(
                session,
                "run-2",
                expected_base_id=first.id,
                expected_head=first.id,
                transition=None,
                task_relation="side-chat",
            )
    assert await read(store, lambda r: r.binding(session, "run-2")) is None
    assert await read(store, lambda r: r.head(session)) == concurrent.id


# --------------------------------------------------------------------------- branches


async def test_a_branch_is_pinned_when_the_parent_changes_after_the_fork(database_url: str) -> None:
    store = await shared_store(database_url)
    parent, child = key(), key()
    first = await commit(store, parent, transition("analysis"), None)
    async with store.transaction() as tx:
        fork = await IntentRepository(tx.connection).fork_session(parent, child)
    assert fork.fork_revision_id == first.id
    await commit(store, parent, transition("README", kind="replace", base=first), first.id)
    assert (await read(store, lambda r: r.resolve(child))).id == first.id


async def test_the_branch_prefers_its_own_intent(database_url: str) -> None:
    store = await shared_store(database_url)
    parent, child = key(), key()
    first = await commit(store, parent, transition("analysis"), None)
    async with store.transaction() as tx:
        await IntentRepository(tx.connection).fork_session(parent, child)
    own = await commit(store, child, transition("own", kind="replace", base=first), None)
    assert (await read(store, lambda r: r.resolve(child))).id == own.id


async def test_lineage_is_walked_beyond_one_hop(database_url: str) -> None:
    """§8.7: a grandchild forked with no pin of its own resolves through its parent's
    pin to the root intent -- and never through an ancestor's *current* head."""
    store = await shared_store(database_url)
    root, child, grandchild = key(), key(), key()
    first = await commit(store, root, transition("root task"), None)
    async with store.transaction() as tx:
        repo = IntentRepository(tx.connection)
        await repo.fork_session(root, child, first.id)
        await repo.fork_session(child, grandchild, None)
    assert (await read(store, lambda r: r.resolve(grandchild))).id == first.id
    await commit(store, root, transition("later", kind="replace", base=first), first.id)
    assert (await read(store, lambda r: r.resolve(grandchild))).id == first.id
    # A fork made from the grandchild without a pin pins what it resolves to now.
    great = key()
    async with store.transaction() as tx:
        fork = await IntentRepository(tx.connection).fork_session(grandchild, great)
    assert fork.fork_revision_id == first.id


async def test_a_branch_takes_the_parents_run_bindings(database_url: str) -> None:
    """A run paused at the fork resumes in the branch on the task it had."""
    store = await shared_store(database_url)
    parent, child = key(), key()
    base = await commit(store, parent, transition("task"), None)
    async with store.transaction() as tx:
        await IntentRepository(tx.connection).commit_run_start(
            parent,
            "run-r",
            expected_base_id=base.id,
            expected_head=base.id,
            transition=transition("task, refined", kind="refine", base=base, keep_identity=True),
            task_relation="refine",
        )
    active = await read(store, lambda r: r.resolve_for_run(parent, "run-r"))
    async with store.transaction() as tx:
        fork = await IntentRepository(tx.connection).fork_session(parent, child)
    assert fork.fork_revision_id == active.id
    binding = await read(store, lambda r: r.binding(child, "run-r"))
    assert (binding.base_revision_id, binding.active_revision_id) == (base.id, active.id)
    assert (await read(store, lambda r: r.resolve_for_run(child, "run-r"))).id == active.id


async def test_deleting_a_session_keeps_its_branches_and_what_they_pin(database_url: str) -> None:
    """A branch is a session of its own: deleting its parent deletes the parent's intents
    but not the revision the branch pins, nor what a grandchild inherits through it."""
    store = await shared_store(database_url)
    root, parent, child, grandchild = key(), key(), key(), key()
    rooted = await commit(store, root, transition("root task"), None)
    async with store.transaction() as tx:
        repo = IntentRepository(tx.connection)
        await repo.fork_session(root, parent)
    first = await commit(store, parent, transition("task", kind="replace", base=rooted), None)
    later = await commit(store, parent, transition("later", kind="replace", base=first), first.id)
    async with store.transaction() as tx:
        repo = IntentRepository(tx.connection)
        await repo.fork_session(parent, child, first.id)
        await repo.fork_session(child, grandchild, None)
    async with store.transaction() as tx:
        await IntentRepository(tx.connection).delete_session(parent)
    assert await read(store, lambda r: r.resolve(parent)) is None
    assert await read(store, lambda r: r.revision(later.id)) is None
    assert (await read(store, lambda r: r.resolve(child))).id == first.id
    assert (await read(store, lambda r: r.resolve(grandchild))).id == first.id
    assert (await read(store, lambda r: r.resolve(root))).id == rooted.id
    async with store.engine.connect() as conn:
        left = (
            await conn.execute(
                select(intent_revisions.c.id).where(intent_revisions.c.session_key == parent)
            )
        ).scalars()
        assert list(left) == [first.id]


# --------------------------------------------------------------------------- protocol state


def start_on(session: str, run_id: str, base: IntentRevision, change: IntentTransition | None):
    """A run start's intent binding on ``base``, the session's own head as read before
    routing (``change``: the revision the route writes; None: it continues the task)."""

    async def bind(tx):
        await IntentRepository(tx.connection).commit_run_start(
            session,
            run_id,
            expected_base_id=base.id,
            expected_head=base.id,
            transition=change,
            task_relation=change.task_relation if change else "continue",
        )

    return bind


def run_record(scope: str, run_id: str, session: str) -> tuple[RunRecord, ProtocolState]:
    segment = start_segment(DATA_ANALYSIS_REF, segment_id_for(run_id))
    record = RunRecord(
        run_id=run_id,
        scope_key=scope,
        session_key=session,
        agent="analyst",
        user_input="revenue by region",
        segment_ids=(segment.segment_id,),
        started_at=0.0,
    )
    return record, segment


def events(*kinds: str) -> list[JournalEvent]:
    return [JournalEvent(kind=k, subject="s", at=0.0) for k in kinds]


async def test_initial_state_route_journal_and_binding_commit_atomically(database_url: str) -> None:
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    session = key()
    scope = session + "/analyst"
    record, segment = run_record(scope, "run-1", session)

    async def bind(tx):
        await IntentRepository(tx.connection).commit_run_start(
            session,
            "run-1",
            expected_base_id=None,
            expected_head=None,
            transition=transition("revenue by region"),
            task_relation="replace",
        )

    await states.create(
        scope, record, segment, events("protocol.route.resolved", "protocol.run.started"), bind
    )
    assert (await states.run(scope, "run-1")).value == record
    assert (await states.segment(scope, segment.segment_id)).value == segment
    assert [e.kind for e in await states.journal(scope)] == [
        "protocol.route.resolved",
        "protocol.run.started",
    ]
    binding = await read(store, lambda r: r.binding(session, "run-1"))
    assert binding.task_relation == "replace" and binding.base_revision_id is None


async def test_initial_commit_rolls_back_everything_when_the_intent_cas_loses(
    database_url: str,
) -> None:
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    session = key()
    scope = session + "/analyst"
    concurrent = await commit(store, session, transition("someone else's task"), None)
    record, segment = run_record(scope, "run-1", session)

    async def bind(tx):
        await IntentRepository(tx.connection).commit_run_start(
            session,
            "run-1",
            expected_base_id=None,
            expected_head=None,
            transition=transition("revenue by region"),
            task_relation="replace",
        )

    with pytest.raises(IntentRevisionConflict):
        await states.create(scope, record, segment, events("protocol.route.resolved"), bind)
    assert await states.run(scope, "run-1") is None
    assert await states.segment(scope, segment.segment_id) is None
    assert await states.journal(scope) == []
    assert await read(store, lambda r: r.binding(session, "run-1")) is None
    assert await read(store, lambda r: r.head(session)) == concurrent.id


async def test_a_run_start_moving_a_head_moved_meanwhile_rolls_back_everything(
    database_url: str,
) -> None:
    """A start that writes a revision over the session's own head checks the head once,
    by the head's compare-and-set: a task changed after routing still loses it all."""
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    session = key()
    scope = session + "/analyst"
    base = await commit(store, session, transition("task"), None)
    concurrent = await commit(
        store, session, transition("other", kind="replace", base=base), base.id
    )
    record, segment = run_record(scope, "run-1", session)

    bind = start_on(session, "run-1", base, transition("refined", kind="refine", base=base))
    with pytest.raises(IntentRevisionConflict) as raised:
        await states.create(scope, record, segment, events("protocol.route.resolved"), bind)
    assert raised.value.actual_revision == concurrent.id
    assert await states.run(scope, "run-1") is None
    assert await states.journal(scope) == []
    assert await read(store, lambda r: r.binding(session, "run-1")) is None
    assert [r.id for r in await read(store, lambda r: r.revisions(session))] == [
        base.id,
        concurrent.id,
    ]


async def test_handoff_transition_rolls_back_on_an_intent_cas_conflict(database_url: str) -> None:
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    session = key()
    scope = session + "/analyst"
    record, _ = run_record(scope, "run-1", session)
    general = start_segment(GENERAL_TASK_REF, segment_id_for("run-1"))
    base = await commit(store, session, transition("task", protocol=GENERAL_TASK_REF), None)

    bind = start_on(session, "run-1", base, None)
    await states.create(scope, record, general, events("protocol.run.started"), bind)
    concurrent = await commit(store, session, transition("new", kind="replace", base=base), base.id)
    target = start_segment(DATA_ANALYSIS_REF, segment_id_for("run-1", 2))
    ended = general.model_copy(update={"status": "handed_off", "revision": 1})
    handoff = IntentTransition(
        kind="handoff",
        intent_id=base.intent_id,
        previous_revision_id=base.id,
        protocol=DATA_ANALYSIS_REF,
        text="task",
        task_relation="continue",
    )

    async def apply(tx):
        await IntentRepository(tx.connection).apply_handoff(session, "run-1", handoff)

    before = await states.journal(scope)
    with pytest.raises(IntentRevisionConflict):
        await states.write(
            scope,
            segments=[(ended, 1), (target, 0)],
            run=(
                record.model_copy(update={"segment_ids": (general.segment_id, target.segment_id)}),
                1,
            ),
            events=events("protocol.handoff.proposed", "protocol.handoff.accepted"),
            within=apply,
        )
    assert (await states.segment(scope, general.segment_id)).value.status == "active"
    assert (await states.segment(scope, general.segment_id)).version == 1
    assert await states.segment(scope, target.segment_id) is None
    assert (await states.run(scope, "run-1")).value.segment_ids == (general.segment_id,)
    assert await states.journal(scope) == before
    assert await read(store, lambda r: r.head(session)) == concurrent.id


async def test_parallel_ledger_records_are_all_kept(database_url: str) -> None:
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    scope = key() + "/analyst"
    record, segment = run_record(scope, "run-1", "s")
    await states.create(scope, record, segment, [])

    async def record_many(n: int) -> None:
        for _ in range(n):
            await states.update_segment(
                scope,
                segment.segment_id,
                lambda s: (record_action(s, "list_data_sources", ActionOutcome()), []),
            )

    await asyncio.gather(record_many(8), record_many(8))
    stored = (await states.segment(scope, segment.segment_id)).value
    assert len(stored.ledger) == 16 and stored.revision == 16


async def test_a_missing_segment_is_a_coded_protocol_error(database_url: str) -> None:
    store = await shared_store(database_url)
    states = ProtocolStateStore(store)
    scope = key() + "/analyst"
    record, segment = run_record(scope, "run-1", "s")
    await states.create(scope, record, segment, [])
    async with store.transaction() as tx:
        await tx.connection.execute(
            delete(documents).where(
                documents.c.kind == SEGMENT_KIND, documents.c.key.startswith(scope)
            )
        )
    with pytest.raises(ProtocolError) as read_all:
        await states.segments(scope, record)
    with pytest.raises(ProtocolError) as update:
        await states.update_segment(scope, segment.segment_id, lambda s: (s, []))
    for raised in (read_all.value, update.value):
        assert raised.code is ErrorCode.PROTOCOL_SEGMENT_MISSING
        assert raised.detail == segment.segment_id and raised.hint


# --------------------------------------------------------------------------- migrations


async def test_intent_tables_are_a_versioned_migration(database_url: str) -> None:
    """§8.13: the intent schema is migration 2; a database from before it is upgraded
    in place when opened (and runs paused before it fail with a clear error, see the
    ADK tests)."""
    store = await Store.open(database_url)
    async with store.engine.connect() as conn:
        versions = (await conn.execute(select(schema_migrations.c.version))).scalars().all()
    assert sorted(versions)[:2] == [1, 2]
    # Simulate a database from before migration 2.
    async with store.engine.begin() as conn:
        await conn.run_sync(lambda c: intent_revisions.drop(c))
        await conn.execute(delete(schema_migrations).where(schema_migrations.c.version == 2))
    await store.close()
    reopened = await Store.open(database_url)
    session = key()
    revision = await commit(reopened, session, transition("after upgrade"), None)
    assert (await read(reopened, lambda r: r.resolve(session))).id == revision.id
    await reopened.close()
