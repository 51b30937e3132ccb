"""Branching a conversation into a new one, and deleting one.

A branch (``fork_session``) is a new session with its own id that starts where the source
is now: the same conversation history and session state, the same plan state (plan,
pending requests, resolutions, mode selection, archived plans), the same protocol runs
and segments, and the source's session intent *pinned* as it resolves at the fork (see
``store.intents``). From then on the two diverge: nothing written to one reaches the
other, and a later change of the source's task never changes the branch's.

``delete_session`` removes a session, its plan and protocol state and its intents. The
governance journal is an audit trail and is kept; the deletion is journaled in it.
Branches made from a deleted session keep working: what they pinned is kept for them.

Neither may run while a run of the session is in progress (``RUN_IN_PROGRESS``): the
history and the plan state would not be of the same moment.
"""

from __future__ import annotations

import uuid
from typing import Any

from google.adk.events import Event
from sqlalchemy import delete, select

from plangate.adk import telemetry
from plangate.adk.protocols import protocol_runtime
from plangate.adk.runtime import ARCHIVE_KIND, CORRUPT_KIND, STATE_KIND
from plangate.adk.session import PlanSession
from plangate.errors import CodedError, ErrorCode
from plangate.journal.events import JournalEvent
from plangate.store.intents import IntentRepository
from plangate.store.protocol_state import RUN_KIND, SEGMENT_KIND
from plangate.store.schema import documents
from plangate.store.store import Store, Transaction

__all__ = ["BRANCH_OF_KEY", "BranchError", "delete_session", "fork_session"]

BRANCH_OF_KEY = "plangate:branch_of"
"""Session state of a branch: the id of the session it was branched from (for lists)."""

_COPIED_KINDS = (STATE_KIND, ARCHIVE_KIND, RUN_KIND, SEGMENT_KIND)
"""What a branch takes along; a corrupt state's raw archive stays with its source."""
_DELETED_KINDS = (*_COPIED_KINDS, CORRUPT_KIND)

_SHARED_STATE_PREFIXES = ("app:", "user:", "temp:")
"""Session state that is not the session's own (shared, or never stored)."""


class BranchError(CodedError):
    """A branch or deletion that cannot be made: no such session, or a run in progress."""


async def fork_session(source: PlanSession, new_session_id: str | None = None) -> PlanSession:
    """A new session that starts as ``source`` is now; raises ``BranchError``."""
    if source.running:
        raise BranchError(
            ErrorCode.RUN_IN_PROGRESS,
            f"session {source.session_id!r} has a run in progress",
            "wait for the run to end (or stop it), then branch",
        )
    stored = await source.session()
    if stored is None:
        raise BranchError(ErrorCode.NO_THREAD, f"no session {source.session_id!r}")
    new_id = new_session_id or uuid.uuid4().hex
    runner = source.runner
    service = runner.session_service
    state = {k: v for k, v in stored.state.items() if not k.startswith(_SHARED_STATE_PREFIXES)}
    state[BRANCH_OF_KEY] = source.session_id
    branch = await service.create_session(
        app_name=runner.app_name, user_id=source.user_id, session_id=new_id, state=state
    )
    try:
        for event in stored.events:
            if not event.partial:
                await service.append_event(branch, _history_copy(event))
        forked = PlanSession(runner, user_id=source.user_id, session_id=new_id)
        await _copy_governance(source, forked)
    except BaseException:
        # The store copy is one transaction (all or nothing); take the history back too.
        await service.delete_session(
            app_name=runner.app_name, user_id=source.user_id, session_id=new_id
        )
        raise
    return forked


async def delete_session(session: PlanSession) -> None:
    """Delete ``session`` with its plan, protocol and intent state; raises ``BranchError``."""
    if session.running:
        raise BranchError(
            ErrorCode.RUN_IN_PROGRESS,
            f"session {session.session_id!r} has a run in progress",
            "stop the run first, then delete",
        )
    if await session.session(events=False) is None:
        raise BranchError(ErrorCode.NO_THREAD, f"no session {session.session_id!r}")
    key = session.scope.session_key
    event = JournalEvent(
        kind="session.deleted", subject=session.session_id, actor="user", at=_now(session)
    )
    for index, (store, intents) in enumerate(await _stores(session)):
        async with store.transaction() as tx:
            await _delete_documents(tx, key)
            if intents:
                await IntentRepository(tx.connection).delete_session(key)
            if index == 0:  # the plan store keeps the journal
                await tx.append(session.scope.key, event)
    telemetry.journaled(session.scope.key, events=(event,))
    await session.runner.session_service.delete_session(
        app_name=session.runner.app_name, user_id=session.user_id, session_id=session.session_id
    )


# -- internals ---------------------------------------------------------------------------


def _history_copy(event: Event) -> Event:
    """The event as the branch keeps it: its state change is already in the branch's
    starting state, so applying it again is left out."""
    copy = event.model_copy(deep=True)
    copy.actions.state_delta = {}
    return copy


def _now(session: PlanSession) -> float:
    return session.runtime.now()


async def _stores(session: PlanSession) -> list[tuple[Store, bool]]:
    """The plan store, and the protocol store when it is another one; each with whether
    it holds the session intents (the protocol store does)."""
    plan_store = await session.runtime.store()
    protocols = protocol_runtime(session.agent)
    if protocols is None:
        return [(plan_store, False)]
    protocol_store = await protocols.store()
    if protocol_store is plan_store:
        return [(plan_store, True)]
    return [(plan_store, False), (protocol_store, True)]


async def _copy_governance(source: PlanSession, forked: PlanSession) -> None:
    """Plan and protocol documents, intent pin and run bindings, in one transaction per
    store, and the branch journaled on both sides."""
    old, new = source.scope.session_key, forked.scope.session_key
    forked_event = JournalEvent(
        kind="session.forked",
        subject=forked.session_id,
        actor="user",
        at=_now(source),
        detail={"from": source.session_id, "to": forked.session_id},
    )
    scopes = (source.scope.key, forked.scope.key)
    for index, (store, intents) in enumerate(await _stores(source)):
        async with store.transaction() as tx:
            await _copy_documents(tx, old, new)
            if intents:
                await IntentRepository(tx.connection).fork_session(old, new)
            if index == 0:  # the plan store keeps the journal
                for scope in scopes:
                    await tx.append(scope, forked_event)
    for scope in scopes:
        telemetry.journaled(scope, events=(forked_event,))


def _rekeyed(kind: str, data: Any, old: str, new: str) -> Any:
    if kind == RUN_KIND and isinstance(data, dict):
        run: dict[str, Any] = dict(data)  # pyright: ignore[reportUnknownArgumentType]
        for field in ("scope_key", "session_key"):
            value = run.get(field)
            if isinstance(value, str) and (value == old or value.startswith(old + "/")):
                run[field] = new + value[len(old) :]
        return run
    return data


async def _copy_documents(tx: Transaction, old: str, new: str) -> None:
    rows = (
        await tx.connection.execute(
            select(documents.c.kind, documents.c.key, documents.c.data).where(
                documents.c.kind.in_(_COPIED_KINDS),
                documents.c.key.startswith(old + "/", autoescape=True),
            )
        )
    ).all()
    for row in rows:
        key = new + row.key[len(old) :]
        await tx.put(row.kind, key, _rekeyed(row.kind, row.data, old, new), expected_version=0)


async def _delete_documents(tx: Transaction, key: str) -> None:
    await tx.connection.execute(
        delete(documents).where(
            documents.c.kind.in_(_DELETED_KINDS),
            documents.c.key.startswith(key + "/", autoescape=True),
        )
    )
