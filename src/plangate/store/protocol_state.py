"""Protocol state on the store: runs and their segments as versioned documents, each
segment carrying its action ledger, and the protocol journal.

A *run* is one ADK invocation; it owns an ordered list of *segments* (one per protocol it
ran under; a handoff ends one and starts the next). Both are JSON documents written by
compare-and-set, so two writers never both win, and every write goes with its journal
events -- and, through ``within``, with the run's intent writes -- in one transaction.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from plangate.errors import ErrorCode
from plangate.journal.events import JournalEvent
from plangate.protocol.definitions import LedgerEntry, ProtocolError, ProtocolState
from plangate.protocol.handoff import ProtocolEvent
from plangate.store.fresh import FreshDocuments
from plangate.store.schema import documents
from plangate.store.store import Conflict, Document, Store, Transaction
from plangate.store.writes import Put, commit, put_in, transact

__all__ = [
    "RUN_KIND",
    "SEGMENT_KIND",
    "HandoffRecord",
    "ProtocolStateStore",
    "RunRecord",
    "RunStatus",
    "Versioned",
    "journal_event",
]

SEGMENT_KIND = "protocol_segment"
RUN_KIND = "protocol_run"

RunStatus = Literal["running", "completed", "degraded", "partial", "failed", "interrupted"]
"""``interrupted``: the process executing the run died (its lease expired); a new run
on the thread continues from what was stored."""
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Within = Callable[[Transaction], Awaitable[Any]]
"""Extra writes (intent revision, binding) that must share the transaction."""


class HandoffRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    from_protocol: str
    to_protocol: str
    from_segment_id: str
    to_segment_id: str
    transition_kind: str
    at: float


class RunRecord(BaseModel):
    """One run (ADK invocation) under protocol governance."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    scope_key: str
    session_key: str
    agent: str
    user_input: str = ""
    status: RunStatus = "running"
    outcome_code: str | None = None
    outcome_message: str | None = None
    segment_ids: tuple[str, ...]
    route: dict[str, Any] = Field(default_factory=dict)
    """The router's decision (``RouteDecision`` as JSON): source, reasons, relation."""
    handoffs: tuple[HandoffRecord, ...] = ()
    started_at: float
    ended_at: float | None = None

    @property
    def active_segment_id(self) -> str:
        return self.segment_ids[-1]


@dataclass(frozen=True)
class Versioned(Generic[T]):
    value: T
    version: int


def journal_event(event: ProtocolEvent, *, actor: str = "protocol") -> JournalEvent:
    return JournalEvent(
        kind=event.kind,
        subject=event.subject,
        revision=event.revision,
        actor=actor,
        at=time.time(),
        detail=dict(event.detail),
    )


def _segment_missing(segment_id: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.PROTOCOL_SEGMENT_MISSING,
        segment_id,
        "the run's protocol state was removed from the store; send a new message to start "
        "a new run",
    )


def _segment_key(scope_key: str, segment_id: str) -> str:
    return f"{scope_key}#{segment_id}"


def _run_key(scope_key: str, run_id: str) -> str:
    return f"{scope_key}#{run_id}"


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


def _written(
    documents: FreshDocuments[Any], key: str, value: BaseModel, expected: int
) -> tuple[FreshDocuments[Any], Put, BaseModel]:
    """A document to write (at ``expected``, 0 = new), beside the value it holds."""
    return documents, Put(documents.kind, key, _dump(value), expected), value


def _decoder(model: type[M]) -> Callable[[str, Document | None], Versioned[M] | None]:
    def decode(_key: str, document: Document | None) -> Versioned[M] | None:
        if document is None:
            return None
        return Versioned(model.model_validate(document.data), document.version)

    return decode


# Read at every step and after every tool; decoded once per committed version. The
# values are frozen models, so sharing them is safe.
_runs = FreshDocuments(RUN_KIND, _decoder(RunRecord))
_segments = FreshDocuments(SEGMENT_KIND, _decoder(ProtocolState))


class ProtocolStateStore:
    """Runs, segments and the protocol journal of one store; scoped by a scope key
    (``app/user/session/agent``), the same key the plan journal uses."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # -- reads ----------------------------------------------------------------------

    async def run(self, scope_key: str, run_id: str) -> Versioned[RunRecord] | None:
        return await _runs.get(self.store, _run_key(scope_key, run_id))

    async def segment(self, scope_key: str, segment_id: str) -> Versioned[ProtocolState] | None:
        return await _segments.get(self.store, _segment_key(scope_key, segment_id))

    async def segments(
        self,
        scope_key: str,
        run: RunRecord,
        *,
        active: Versioned[ProtocolState] | None = None,
    ) -> list[Versioned[ProtocolState]]:
        """The run's segments in order; ``active``, the run's active segment as the
        caller just read it, is used rather than read again."""
        found: list[Versioned[ProtocolState]] = []
        for segment_id in run.segment_ids:
            if active is not None and segment_id == active.value.segment_id:
                found.append(active)
                continue
            segment = await self.segment(scope_key, segment_id)
            if segment is None:
                raise _segment_missing(segment_id)
            found.append(segment)
        return found

    async def run_ledger(
        self,
        scope_key: str,
        run: RunRecord,
        *,
        active: Versioned[ProtocolState] | None = None,
    ) -> list[LedgerEntry]:
        """Every action of the run, all segments in order (``active``: as ``segments``)."""
        return [
            entry
            for segment in await self.segments(scope_key, run, active=active)
            for entry in segment.value.ledger
        ]

    async def latest_running_run(self, scope_key: str) -> RunRecord | None:
        """The newest run of a scope still running (for calls made outside its
        invocation, such as a sub-agent spawned by a tool)."""
        query = (
            select(documents.c.data)
            .where(
                documents.c.kind == RUN_KIND,
                documents.c.key.startswith(scope_key + "#", autoescape=True),
            )
            .order_by(documents.c.updated_at.desc())
            .limit(20)
        )

        async def read(conn: Any) -> list[Any]:
            return list((await conn.execute(query)).all())

        rows = await self.store.read(read)
        for row in rows:
            record = RunRecord.model_validate(row.data)
            if record.status == "running":
                return record
        return None

    async def journal(self, scope_key: str) -> list[JournalEvent]:
        return [entry.event for entry in await self.store.journal(scope_key)]

    # -- writes ---------------------------------------------------------------------

    async def write(
        self,
        scope_key: str,
        *,
        segments: Sequence[tuple[ProtocolState, int]] = (),
        run: tuple[RunRecord, int] | None = None,
        events: Iterable[JournalEvent] = (),
        within: Within | None = None,
    ) -> None:
        """One transaction: segment and run documents (each with the version it expects,
        0 = new), journal events, then ``within``. Any ``Conflict`` rolls back all."""
        # (documents, what is written, its decoded value) of each document written.
        written = [
            _written(_segments, _segment_key(scope_key, state.segment_id), state, expected)
            for state, expected in segments
        ]
        if run is not None:
            record, expected = run
            written.append(_written(_runs, _run_key(scope_key, record.run_id), record, expected))
        if within is None:
            # Documents and journal rows only: one hop to the commit thread on SQLite.
            puts = [put for _, put, _ in written]
            versions = await commit(self.store, puts, [(scope_key, event) for event in events])
        else:

            async def work(tx: Transaction) -> list[int]:
                versions = [await put_in(tx, put) for _, put, _ in written]
                await tx.append_all(scope_key, events)
                await within(tx)
                return versions

            # One hop on SQLite: a run start is one commit, whatever it holds.
            versions = await transact(self.store, work)
        # What was just written need not be decoded when read back (the frozen models
        # are the values the reads would give).
        for (cache, put, value), version in zip(written, versions, strict=True):
            cache.learn(self.store, put.key, version, put.text, Versioned(value, version))

    async def create(
        self,
        scope_key: str,
        run: RunRecord,
        segment: ProtocolState,
        events: Iterable[JournalEvent],
        within: Within | None = None,
    ) -> None:
        """A run's start: its record, first segment, route/start events and intent
        binding, atomically. A run that already exists raises ``Conflict``."""
        await self.write(
            scope_key, segments=[(segment, 0)], run=(run, 0), events=events, within=within
        )

    async def update_segment(
        self,
        scope_key: str,
        segment_id: str,
        change: Callable[[ProtocolState], tuple[ProtocolState, Sequence[JournalEvent]]],
        *,
        attempts: int = 20,
    ) -> ProtocolState:
        """Apply ``change`` to the latest segment by compare-and-set, re-reading and
        re-applying on a lost race (parallel tool calls record into one segment)."""
        for attempt in range(attempts):
            current = await self.segment(scope_key, segment_id)
            if current is None:
                raise _segment_missing(segment_id)
            new_state, events = change(current.value)
            try:
                await self.write(scope_key, segments=[(new_state, current.version)], events=events)
            except Conflict:
                # Jittered back-off: a tight loop keeps losing to the same fast writer.
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            return new_state
        raise Conflict(SEGMENT_KIND, segment_id, -1, None)

    async def append(self, scope_key: str, events: Iterable[JournalEvent]) -> None:
        await self.write(scope_key, events=events)
