"""Session intent repository: immutable revisions, one head per session, run bindings and
branch pins, all inside the caller's transaction.

Every method works on the connection of an open ``Store.transaction()``, so an intent
commit joins the protocol snapshot and journal events of the same run start or
handoff: all of it commits together or none of it does.

Semantics:

* The head moves only by compare-and-set: ``commit`` names the head it expects (``None``
  for "no head yet") and raises ``IntentRevisionConflict`` when another writer moved it.
* A run binding fixes its *base* revision at the first bind; later binds change only the
  active revision and the task relation.
* A session without a head of its own resolves through its fork lineage: its pinned
  fork revision, else its parent's pin, and so on. Ancestors' *heads* are never read,
  so a parent changing its task after a fork never changes a child.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import delete, insert, select, union_all, update
from sqlalchemy.ext.asyncio import AsyncConnection

from plangate.errors import ErrorCode
from plangate.protocol.definitions import ProtocolError, ProtocolRef
from plangate.protocol.intent import IntentTransition, SessionIntent, TaskRelation
from plangate.store.schema import (
    intent_heads,
    intent_revisions,
    run_intent_bindings,
    session_forks,
)
from plangate.store.sql import Sql, changed, fetch_all, fetch_one
from plangate.store.store import Conflict

__all__ = [
    "FORK_KIND",
    "INTENT_CONFLICT",
    "MAX_LINEAGE_DEPTH",
    "IntentRepository",
    "IntentRevision",
    "IntentRevisionConflict",
    "RunBinding",
    "SessionFork",
]

INTENT_CONFLICT = "SESSION_INTENT_REVISION_CONFLICT"
MAX_LINEAGE_DEPTH = 64

FORK_KIND = "fork"
"""The only kind of branch plangate makes: from where the parent is now."""


class _Resolve:
    """Sentinel: pin whatever the parent resolves to at fork time."""


RESOLVE_AT_FORK: Final = _Resolve()


class IntentRevisionConflict(Conflict):
    """The session's intent head moved since it was read: the commit did not happen."""

    code = INTENT_CONFLICT

    def __init__(self, session_key: str, expected: str | None, actual: str | None) -> None:
        super().__init__("session_intent_head", session_key, 0, None)
        self.session_key = session_key
        self.expected_revision = expected
        self.actual_revision = actual
        self.message = (
            f"{INTENT_CONFLICT}:{session_key}: the session's task was changed by another run "
            f"(expected revision {expected or 'none'}, found {actual or 'none'}); "
            "nothing was written"
        )
        # The stable code leads the text, like every governance error.
        self.args = (self.message,)


@dataclass(frozen=True)
class IntentRevision:
    id: str
    intent_id: str
    session_key: str
    previous_revision_id: str | None
    protocol: ProtocolRef
    text: str
    change_kind: str
    source_run_id: str | None
    created_at: float

    def as_intent(self) -> SessionIntent:
        return SessionIntent(
            intent_id=self.intent_id, revision_id=self.id, protocol=self.protocol, text=self.text
        )


@dataclass(frozen=True)
class RunBinding:
    session_key: str
    run_id: str
    base_revision_id: str | None
    """The revision the run started from; fixed at the first bind."""
    active_revision_id: str | None
    """The revision the run works on now (after its route commit or a handoff)."""
    task_relation: TaskRelation


@dataclass(frozen=True)
class SessionFork:
    session_key: str
    parent_session_key: str
    fork_revision_id: str | None
    fork_kind: str
    source_run_id: str | None


_REVISION_COLUMNS = (
    "id, intent_id, session_key, previous_revision_id, protocol_id, protocol_version, "
    "text, change_kind, source_run_id, created_at"
)


def _revision(row: tuple[Any, ...]) -> IntentRevision:
    """A revision from a row of ``_REVISION_COLUMNS``."""
    id_, intent_id, session_key, previous, protocol_id, version, text, kind, source, at = row
    return IntentRevision(
        id=id_,
        intent_id=intent_id,
        session_key=session_key,
        previous_revision_id=previous,
        protocol=ProtocolRef(id=protocol_id, version=version),
        text=text,
        change_kind=kind,
        source_run_id=source,
        created_at=at,
    )


# The statements every run start makes, as plain SQL (``plangate.store.sql``): on a
# SQLite file they run on ``sqlite3`` directly.
_REVISION = Sql(f"SELECT {_REVISION_COLUMNS} FROM plangate_intent_revisions WHERE id = :id")
_REVISIONS = Sql(
    f"SELECT {_REVISION_COLUMNS} FROM plangate_intent_revisions "
    "WHERE session_key = :session_key ORDER BY created_at"
)
_HEAD = Sql("SELECT revision_id FROM plangate_intent_heads WHERE session_key = :session_key")
_FORK = Sql(
    "SELECT session_key, parent_session_key, fork_revision_id, fork_kind, source_run_id "
    "FROM plangate_session_forks WHERE session_key = :session_key"
)
_BINDING = Sql(
    "SELECT session_key, run_id, base_revision_id, active_revision_id, task_relation "
    "FROM plangate_run_intent_bindings WHERE session_key = :session_key AND run_id = :run_id"
)
_INSERT_REVISION = Sql(
    f"INSERT INTO plangate_intent_revisions ({_REVISION_COLUMNS}) VALUES (:id, :intent_id, "
    ":session_key, :previous_revision_id, :protocol_id, :protocol_version, :text, "
    ":change_kind, :source_run_id, :created_at)"
)
# Insert-or-nothing in one statement (no savepoint around a failing insert): no row
# inserted means another writer gave the session a head first.
_FIRST_HEAD = Sql(
    "INSERT INTO plangate_intent_heads (session_key, revision_id, updated_at) "
    "VALUES (:session_key, :revision_id, :updated_at) ON CONFLICT (session_key) DO NOTHING"
)
_MOVE_HEAD = Sql(
    "UPDATE plangate_intent_heads SET revision_id = :revision_id, updated_at = :updated_at "
    "WHERE session_key = :session_key AND revision_id = :expected"
)
# Create or update a binding in one statement, returning the base the first bind fixed.
_BIND = Sql(
    "INSERT INTO plangate_run_intent_bindings (session_key, run_id, base_revision_id, "
    "active_revision_id, task_relation, updated_at) VALUES (:session_key, :run_id, "
    ":base_revision_id, :active_revision_id, :task_relation, :updated_at) "
    "ON CONFLICT (session_key, run_id) DO UPDATE SET "
    "active_revision_id = excluded.active_revision_id, "
    "task_relation = excluded.task_relation, updated_at = excluded.updated_at "
    "RETURNING base_revision_id"
)


class IntentRepository:
    """Intent reads and writes on one open transaction's connection."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    # -- reads ----------------------------------------------------------------------

    async def revision(self, revision_id: str | None) -> IntentRevision | None:
        if revision_id is None:
            return None
        row = await fetch_one(self._conn, _REVISION, {"id": revision_id})
        return _revision(row) if row else None

    async def head(self, session_key: str) -> str | None:
        """The session's *own* head revision id (no lineage)."""
        row = await fetch_one(self._conn, _HEAD, {"session_key": session_key})
        return row[0] if row is not None else None

    async def fork(self, session_key: str) -> SessionFork | None:
        row = await fetch_one(self._conn, _FORK, {"session_key": session_key})
        return SessionFork(*row) if row is not None else None

    async def resolve_revision_id(
        self, session_key: str, *, max_depth: int = MAX_LINEAGE_DEPTH
    ) -> str | None:
        """Own head, else the nearest fork pin up the lineage, else ``None``."""
        own = await self.head(session_key)
        if own is not None:
            return own
        return await self._lineage_pin(session_key, max_depth)

    async def _lineage_pin(
        self, session_key: str, max_depth: int = MAX_LINEAGE_DEPTH
    ) -> str | None:
        """The nearest fork pin up the lineage of ``session_key`` (its own head aside)."""
        seen = {session_key}
        current = session_key
        for _ in range(max_depth):
            fork = await self.fork(current)
            if fork is None:
                return None
            if fork.fork_revision_id is not None:
                return fork.fork_revision_id
            # Forked before the parent had a task of its own: inherit what the parent
            # itself inherited at its fork -- never the parent's later head.
            current = fork.parent_session_key
            if current in seen:
                raise ProtocolError(ErrorCode.SESSION_LINEAGE_CYCLE, f"{session_key}")
            seen.add(current)
        raise ProtocolError(ErrorCode.SESSION_LINEAGE_TOO_DEEP, f"{session_key}:{max_depth}")

    async def resolve(self, session_key: str) -> IntentRevision | None:
        return await self.revision(await self.resolve_revision_id(session_key))

    async def resolve_with_head(self, session_key: str) -> tuple[IntentRevision | None, str | None]:
        """(what the session resolves to, its own head): the head read once for both."""
        own = await self.head(session_key)
        resolved = own if own is not None else await self._lineage_pin(session_key)
        return await self.revision(resolved), own

    async def active_texts(self, session_keys: Collection[str]) -> dict[str, str]:
        """The intent text each of ``session_keys`` works on, for a listed page of
        sessions in one statement; a session without an intent is left out.

        A session's own head, else its fork pin. That is what ``resolve`` answers for
        every branch plangate makes: a fork pins what the parent resolved to then, so a
        branch without a pin had nothing to inherit up its lineage either."""
        if not session_keys:
            return {}
        keys = list(session_keys)
        heads = select(
            intent_heads.c.session_key, intent_heads.c.revision_id.label("revision_id")
        ).where(intent_heads.c.session_key.in_(keys))
        pins = select(
            session_forks.c.session_key, session_forks.c.fork_revision_id.label("revision_id")
        ).where(
            session_forks.c.session_key.in_(keys),
            session_forks.c.fork_revision_id.is_not(None),
            session_forks.c.session_key.not_in(
                select(intent_heads.c.session_key).where(intent_heads.c.session_key.in_(keys))
            ),
        )
        resolved = union_all(heads, pins).subquery()
        rows = await self._conn.execute(
            select(resolved.c.session_key, intent_revisions.c.text).join(
                intent_revisions, intent_revisions.c.id == resolved.c.revision_id
            )
        )
        return {key: text for key, text in rows.all()}

    async def revisions(self, session_key: str) -> list[IntentRevision]:
        rows = await fetch_all(self._conn, _REVISIONS, {"session_key": session_key})
        return [_revision(row) for row in rows]

    async def binding(self, session_key: str, run_id: str) -> RunBinding | None:
        row = await fetch_one(self._conn, _BINDING, {"session_key": session_key, "run_id": run_id})
        return RunBinding(*row) if row is not None else None

    async def resolve_for_run(self, session_key: str, run_id: str) -> IntentRevision | None:
        """The run's own task: its binding's active revision, whatever the head says now."""
        binding = await self.binding(session_key, run_id)
        return await self.revision(binding.active_revision_id) if binding else None

    # -- writes ---------------------------------------------------------------------

    async def commit(
        self,
        session_key: str,
        transition: IntentTransition,
        *,
        expected_head: str | None,
        source_run_id: str | None,
    ) -> IntentRevision:
        """Write a new revision and move the head to it, if the head is ``expected_head``."""
        revision = IntentRevision(
            id=uuid.uuid4().hex,
            intent_id=transition.intent_id or uuid.uuid4().hex,
            session_key=session_key,
            previous_revision_id=transition.previous_revision_id,
            protocol=transition.protocol,
            text=transition.text,
            change_kind=transition.kind,
            source_run_id=source_run_id,
            created_at=time.time(),
        )
        await changed(
            self._conn,
            _INSERT_REVISION,
            {
                "id": revision.id,
                "intent_id": revision.intent_id,
                "session_key": session_key,
                "previous_revision_id": revision.previous_revision_id,
                "protocol_id": revision.protocol.id,
                "protocol_version": revision.protocol.version,
                "text": revision.text,
                "change_kind": revision.change_kind,
                "source_run_id": source_run_id,
                "created_at": revision.created_at,
            },
        )
        await self._move_head(session_key, expected_head, revision.id)
        return revision

    async def _move_head(self, session_key: str, expected: str | None, new: str) -> None:
        values = {"session_key": session_key, "revision_id": new, "updated_at": time.time()}
        if expected is None:
            moved = await changed(self._conn, _FIRST_HEAD, values)
        else:
            moved = await changed(self._conn, _MOVE_HEAD, {**values, "expected": expected})
        if moved != 1:
            raise IntentRevisionConflict(session_key, expected, await self.head(session_key))

    async def bind_run(
        self,
        session_key: str,
        run_id: str,
        *,
        base_revision_id: str | None,
        active_revision_id: str | None,
        task_relation: TaskRelation,
    ) -> RunBinding:
        """Create or update a run's binding; the base is fixed by the first bind.

        One statement (an upsert that returns the stored base): it runs at every run
        start, inside the start's transaction."""
        # Every row fetched (not one): a statement that writes is over only then.
        ((base,),) = await fetch_all(
            self._conn,
            _BIND,
            {
                "session_key": session_key,
                "run_id": run_id,
                "base_revision_id": base_revision_id,
                "active_revision_id": active_revision_id,
                "task_relation": task_relation,
                "updated_at": time.time(),
            },
        )
        return RunBinding(session_key, run_id, base, active_revision_id, task_relation)

    async def commit_run_start(
        self,
        session_key: str,
        run_id: str,
        *,
        expected_base_id: str | None,
        expected_head: str | None,
        transition: IntentTransition | None,
        task_relation: TaskRelation,
    ) -> tuple[RunBinding, IntentRevision | None]:
        """The run's binding and the revision written for it (None: the run works on its
        base revision).

        ``expected_base_id`` and ``expected_head`` are read *before* routing, so the
        classifier call sits inside the compare-and-set window: a concurrent change in
        between makes this raise, even for a route that writes no revision.
        """
        moves_own_head = transition is not None and expected_head is not None
        if not (moves_own_head and expected_head == expected_base_id):
            # Else the head's compare-and-set below checks the same, in one statement:
            # a session with a head of its own resolves to it.
            current = await self.resolve_revision_id(session_key)
            if current != expected_base_id:
                raise IntentRevisionConflict(session_key, expected_base_id, current)
        active = expected_base_id
        relation = task_relation
        revision = None
        if transition is not None:
            revision = await self.commit(
                session_key, transition, expected_head=expected_head, source_run_id=run_id
            )
            active, relation = revision.id, transition.task_relation
        binding = await self.bind_run(
            session_key,
            run_id,
            base_revision_id=expected_base_id,
            active_revision_id=active,
            task_relation=relation,
        )
        return binding, revision

    async def apply_handoff(
        self, session_key: str, run_id: str, transition: IntentTransition
    ) -> IntentRevision:
        """The handoff's intent write: the session must still be on the run's active
        revision; then write the handoff revision and rebind the run to it."""
        binding = await self.binding(session_key, run_id)
        if binding is None:
            raise ProtocolError(ErrorCode.RUN_INTENT_BINDING_NOT_FOUND, f"{run_id}")
        current = await self.resolve_revision_id(session_key)
        if current is not None and current != binding.active_revision_id:
            raise IntentRevisionConflict(session_key, binding.active_revision_id, current)
        revision = await self.commit(
            session_key,
            transition,
            expected_head=await self.head(session_key),
            source_run_id=run_id,
        )
        await self.bind_run(
            session_key,
            run_id,
            base_revision_id=binding.base_revision_id,
            active_revision_id=revision.id,
            task_relation=transition.task_relation,
        )
        return revision

    # -- branches -------------------------------------------------------------------

    async def fork_session(
        self,
        parent_session_key: str,
        child_session_key: str,
        pin_revision: str | _Resolve | None = RESOLVE_AT_FORK,
    ) -> SessionFork:
        """Record a branch, and give it the parent's run bindings (a run paused at the
        fork resumes in the branch on the task it had). Without an explicit pin, the
        parent's resolution *now* is pinned, so later changes of the parent never reach
        the child."""
        if parent_session_key == child_session_key:
            raise ProtocolError(ErrorCode.SESSION_FORK_INVALID, f"{child_session_key}")
        if isinstance(pin_revision, _Resolve):
            pin = await self.resolve_revision_id(parent_session_key)
        else:
            pin = pin_revision
            if pin is not None and await self.revision(pin) is None:
                raise ProtocolError(ErrorCode.SESSION_INTENT_REVISION_UNKNOWN, f"{pin}")
        await self._conn.execute(
            insert(session_forks).values(
                session_key=child_session_key,
                parent_session_key=parent_session_key,
                fork_revision_id=pin,
                fork_kind=FORK_KIND,
                source_run_id=None,
                created_at=time.time(),
            )
        )
        bindings = (
            await self._conn.execute(
                select(run_intent_bindings).where(
                    run_intent_bindings.c.session_key == parent_session_key
                )
            )
        ).all()
        if bindings:
            now = time.time()
            await self._conn.execute(
                insert(run_intent_bindings),
                [
                    {
                        "session_key": child_session_key,
                        "run_id": row.run_id,
                        "base_revision_id": row.base_revision_id,
                        "active_revision_id": row.active_revision_id,
                        "task_relation": row.task_relation,
                        "updated_at": now,
                    }
                    for row in bindings
                ],
            )
        return SessionFork(child_session_key, parent_session_key, pin, FORK_KIND, None)

    async def delete_session(self, session_key: str) -> None:
        """Delete a session's heads, bindings, fork record and revisions.

        Its branches are sessions of their own and stay: each gets what it resolves to
        now as its pin (so it no longer reads through the deleted session), and the
        revisions some branch pins are kept for it."""
        children = (
            await self._conn.execute(
                select(session_forks.c.session_key).where(
                    session_forks.c.parent_session_key == session_key
                )
            )
        ).scalars()
        for child in list(children):
            await self._conn.execute(
                update(session_forks)
                .where(session_forks.c.session_key == child)
                .values(fork_revision_id=await self._lineage_pin(child))
            )
        for table in (intent_heads, run_intent_bindings, session_forks):
            await self._conn.execute(delete(table).where(table.c.session_key == session_key))
        pinned = select(session_forks.c.fork_revision_id).where(
            session_forks.c.fork_revision_id.is_not(None)
        )
        await self._conn.execute(
            delete(intent_revisions).where(
                intent_revisions.c.session_key == session_key,
                intent_revisions.c.id.not_in(pinned),
            )
        )
