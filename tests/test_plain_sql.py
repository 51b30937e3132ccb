"""Plain statements (``plangate.store.sql``) run on ``sqlite3`` directly inside plangate's
SQLite transactions and through SQLAlchemy elsewhere: the same answers either way, text
cleaned on both, and a transaction that mixes them with SQLAlchemy statements commits or
rolls back as one."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select, update

from plangate.protocol import GENERAL_TASK_REF, IntentTransition
from plangate.store.intents import IntentRepository, IntentRevisionConflict
from plangate.store.leases import LeaseHeld, RunLeases
from plangate.store.schema import documents, intent_revisions
from plangate.store.storable import REPLACEMENT
from plangate.store.store import Conflict, Store, Transaction
from plangate.store.writes import SqliteTransaction, transact


def _transition(text: str) -> IntentTransition:
    return IntentTransition(
        kind="initial",
        intent_id=None,
        text=text,
        protocol=GENERAL_TASK_REF,
        task_relation="replace",
        previous_revision_id=None,
    )


@pytest.fixture(params=[True, False], ids=["loop", "thread"])
async def store(database_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """The store, its SQLite commits on the event loop's connection or in the thread."""
    opened = await Store.open(database_url)
    if opened.writer is not None:
        opened.writer.on_loop = request.param
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_run_start_reads_and_writes_the_same_on_every_path(store: Store) -> None:
    session = f"app/user/{uuid.uuid4().hex[:8]}"

    async def start(tx: Transaction) -> object:
        if store.writer is not None:  # plangate's own SQLite connection
            assert isinstance(tx, SqliteTransaction)
        return await IntentRepository(tx.connection).commit_run_start(
            session,
            "run-1",
            expected_base_id=None,
            expected_head=None,
            transition=_transition("tidy\x00 the stock module"),
            task_relation="replace",
        )

    binding, revision = await transact(store, start)  # type: ignore[misc]
    assert revision is not None and binding.active_revision_id == revision.id

    async def resolved(conn: object) -> object:
        repository = IntentRepository(conn)  # type: ignore[arg-type]
        return (
            await repository.resolve_with_head(session),
            await repository.binding(session, "run-1"),
            await repository.revisions(session),
        )

    # Through the store's reader (plain sqlite3 on a file) and the async engine.
    (found, head), bound, revisions = await store.read(resolved)  # type: ignore[misc]
    async with store.engine.connect() as conn:
        (found_async, head_async), bound_async, revisions_async = await resolved(conn)  # type: ignore[misc]
    assert found == found_async and head == head_async == revision.id
    assert bound == bound_async == binding
    assert revisions == revisions_async == [found]
    assert found is not None and found.id == revision.id
    assert found is not None and found.text == f"tidy{REPLACEMENT} the stock module"

    # The head moved: a second start expecting none is refused, nothing written.
    async def again(tx: Transaction) -> object:
        return await IntentRepository(tx.connection).commit_run_start(
            session,
            "run-2",
            expected_base_id=revision.id,
            expected_head=None,
            transition=_transition("something else"),
            task_relation="replace",
        )

    with pytest.raises(IntentRevisionConflict):
        await transact(store, again)
    assert await store.read(lambda c: IntentRepository(c).binding(session, "run-2")) is None


async def test_plain_and_sqlalchemy_statements_commit_and_roll_back_together(
    store: Store,
) -> None:
    key = uuid.uuid4().hex

    async def both(tx: Transaction) -> None:
        await tx.put("note", key, {"n": 1}, expected_version=0)
        # A SQLAlchemy statement after a plain one, in the same transaction.
        await tx.connection.execute(
            update(documents)
            .where(documents.c.kind == "note", documents.c.key == key)
            .values(data={"n": 2})
        )

    await transact(store, both)
    stored = await store.get("note", key)
    assert stored is not None and stored.data == {"n": 2} and stored.version == 1

    async def lost(tx: Transaction) -> None:
        await tx.connection.execute(
            update(documents)
            .where(documents.c.kind == "note", documents.c.key == key)
            .values(data={"n": 3})
        )
        await tx.put("note", key, {"n": 4}, expected_version=7)  # a lost race

    with pytest.raises(Conflict):
        await transact(store, lost)
    stored = await store.get("note", key)
    assert stored is not None and stored.data == {"n": 2} and stored.version == 1

    # And the connection is usable again afterwards, on both kinds of statement.
    async def count(conn: object) -> int:
        rows = await conn.execute(select(intent_revisions.c.id))  # type: ignore[attr-defined]
        return len(rows.all())

    assert await store.read(count) == 0


async def test_a_lease_is_taken_once_and_taken_over_only_when_expired(database_url: str) -> None:
    store = await Store.open(database_url)
    try:
        thread = f"thread-{uuid.uuid4().hex[:8]}"
        first, second = RunLeases(store, ttl=30), RunLeases(store, ttl=30)
        lease, replaced = await first.acquire(thread, "run-1")
        assert replaced is None
        with pytest.raises(LeaseHeld) as held:
            await second.acquire(thread, "run-2")
        assert held.value.lease.run_id == "run-1"

        # An expired lease (its holder died) is taken over, and the old one returned.
        dead = RunLeases(store, ttl=-1)
        await first.release(lease)
        gone, _ = await dead.acquire(thread, "run-3")
        taken, old = await second.acquire(thread, "run-4")
        assert old == gone and taken.holder == second.holder
        assert await first.holder_of(thread) == taken
        await second.release(taken)
        assert await first.holder_of(thread) is None
    finally:
        await store.close()
