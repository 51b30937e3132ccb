"""Loading and committing a session's plan state: the host side of the pure core."""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from plangate.adk import telemetry
from plangate.adk.options import PlanOptions
from plangate.adk.scope import PlanScope
from plangate.adk.tool_paths import tool_workspace
from plangate.journal.events import JournalEvent
from plangate.plan.record import ApprovalEvent, PlanRecord
from plangate.plan.session_state import (
    CorruptPlanState,
    PlanSessionState,
    Resolution,
    contradicts_itself,
    read_stored,
    salvage,
)
from plangate.plan.transitions import Transition
from plangate.policy.policy_file import PolicyFile, PolicyFileError, parse_policy
from plangate.store.fresh import FreshDocuments
from plangate.store.shared import StoreOfLoop
from plangate.store.store import Document, Store, is_valid_version
from plangate.store.writes import Put, commit

__all__ = ["ARCHIVE_KIND", "CORRUPT_KIND", "STATE_KIND", "Loaded", "PlanRuntime"]

log = logging.getLogger("plangate")

STATE_KIND = "plan_state"
ARCHIVE_KIND = "plan_archive"
CORRUPT_KIND = "plan_state_corrupt"
"""Corrupt plan-state documents a reset replaced, as they were, keyed ``<scope>#<time>``."""


@dataclass
class Loaded:
    state: PlanSessionState
    version: int
    unreadable: str | None = None
    """Why the stored state could not be read; the gate then fails closed."""
    corrupt: Document | None = None
    """The stored row, as read, when the database answered but the row is not one this
    code writes. The gate then runs only what is read-only, and ``reset_corrupt``
    archives this row and replaces it."""


def load_policy_file(path: str | Path | None) -> PolicyFile | None:
    """Read and validate a policy file; raises PolicyFileError naming what is wrong."""
    if path is None:
        return None
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyFileError(f"{file}: cannot be read: {exc}") from None
    return parse_policy(text, str(file))


class PlanRuntime:
    """Options, branch and store access for one mounted agent."""

    def __init__(self, options: PlanOptions, branch: str) -> None:
        self.options = options
        self.branch = branch
        self.policy = options.gate_policy
        self.state_key = options.state_key(branch)
        self.tool_policy = load_policy_file(options.policy_file)
        """The policy file's rules, read once at start (None without a file)."""
        self.workspace = tool_workspace(options)
        """The folder the path arguments of host, policy-file and MCP tools stay in."""
        self.database_url = options.database_url
        """Set by ``build_runner`` when the options name none, so sessions and plans share
        one database."""
        self._states = FreshDocuments(STATE_KIND, self._decode)
        self._plan_selection = (
            options.force_enter_plan_state_value if options.force_enter_plan_state_key else None
        )
        """The selection value that means Plan Mode, if selections are mirrored at all."""
        self._store = StoreOfLoop()

    async def store(self) -> Store:
        # The gate asks for the store before every tool call.
        return await self._store.get(self.database_url)

    @staticmethod
    def now() -> float:
        return time.time()

    async def load(self, scope: PlanScope) -> Loaded:
        """The plan state as stored now. The value is shared: copy it before changing it."""
        try:
            store = self._store.kept(self.database_url) or await self.store()
            # On SQLite without an await (the gate's hot path: coroutines cost here).
            current = self._states.get_now(store, scope.key)
            if current is not None:
                return current
            return await self._states.get(store, scope.key)
        except Exception as exc:  # the database is unreachable: fail closed
            log.exception("plan state unreadable for %s", scope.key)
            return Loaded(PlanSessionState(), -1, f"{type(exc).__name__}: {exc}")

    def _decode(self, key: str, document: Document | None) -> Loaded:
        if document is None:
            return Loaded(PlanSessionState(), 0)
        try:
            if not is_valid_version(document.version):
                raise CorruptPlanState(f"the row has version {document.version!r}")
            state = read_stored(document.data, plan_selection=self._plan_selection)
        except CorruptPlanState as exc:
            log.error("corrupt plan state for %s: %s", key, exc.reason)
            return Loaded(PlanSessionState(), -1, exc.reason, document)
        return Loaded(state, document.version)

    @telemetry.told_when_committed
    async def commit(
        self,
        scope: PlanScope,
        loaded: Loaded,
        state: PlanSessionState,
        transitions: Iterable[Transition] = (),
        events: Iterable[JournalEvent] = (),
    ) -> int:
        """Write ``state`` if nobody else wrote since ``loaded``; journal in the same transaction.

        Raises ``store.Conflict`` when the compare-and-set loses.
        """
        if loaded.unreadable is not None:
            raise ValueError(f"cannot commit over an unreadable plan state ({loaded.unreadable})")
        put = Put(
            STATE_KIND,
            scope.key,
            state.model_dump(mode="json", by_alias=True),
            max(loaded.version, 0),
        )
        puts = [put]
        journaled: list[tuple[str, JournalEvent]] = []
        for transition in transitions:
            if transition.archived is not None:
                puts.append(_archived(scope, transition.archived))
            journaled.extend((scope.key, event) for event in transition.events)
        journaled.extend((scope.key, event) for event in events)
        store = await self.store()
        version = (await commit(store, puts, journaled))[0]
        # The next load reads the row back and finds what was just written: it need not
        # decode it (``state`` is what decoding gives, unless it is one the load would
        # call corrupt, which it then reports as such).
        if contradicts_itself(state, plan_selection=self._plan_selection) is None:
            self._states.learn(store, scope.key, version, put.text, Loaded(state, version))
        return version

    async def reset_corrupt(
        self, scope: PlanScope, loaded: Loaded, *, actor: str, selection: str | None
    ) -> str:
        """Replace a corrupt plan state with a clean "no plan" one, losing nothing.

        In one transaction: the raw document is archived as it was read (kind
        ``plan_state_corrupt``), the row is replaced by compare-and-set against the
        version it was read at, and the reset is journaled. Returns the archive key;
        raises ``store.Conflict`` when the row changed since ``loaded`` was read.
        """
        corrupt = loaded.corrupt
        if corrupt is None:
            raise ValueError("the plan state is not corrupt")
        now = self.now()
        archive_key = f"{scope.key}#{datetime.fromtimestamp(now, UTC).isoformat()}"
        clean = salvage(corrupt.data, selection=selection)
        store = await self.store()
        reset = JournalEvent(
            kind="plan.state.reset",
            from_state="corrupt",
            actor=actor,
            at=now,
            detail={
                "reason": loaded.unreadable,
                "archive_kind": CORRUPT_KIND,
                "archive_key": archive_key,
                "found_version": corrupt.version,
            },
        )
        async with store.transaction() as tx:
            await tx.put(CORRUPT_KIND, archive_key, corrupt.data, expected_version=0)
            await tx.replace(
                STATE_KIND,
                scope.key,
                clean.model_dump(mode="json", by_alias=True),
                found_version=corrupt.version,
            )
            await tx.append(scope.key, reset)
        telemetry.journaled(scope.key, events=(reset,))
        return archive_key

    async def journal(self, scope: PlanScope, event: JournalEvent) -> None:
        try:
            store = await self.store()
            async with store.transaction() as tx:
                await tx.append(scope.key, event)
        except Exception:  # journaling a refusal must never turn it into a crash
            log.exception("could not journal %s", event.kind)
        else:
            telemetry.journaled(scope.key, events=(event,))

    async def notify(self, decisions: Iterable[ApprovalEvent | None], agent_name: str) -> None:
        callback = self.options.on_approval
        if callback is None:
            return
        for decision in decisions:
            if decision is None or decision.kind != "exit":
                continue
            try:
                result = callback(decision.model_copy(update={"agent_name": agent_name}))
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("on_approval callback failed")

    async def archived(self, scope: PlanScope) -> list[PlanRecord]:
        """Earlier plans of this scope, oldest first."""
        from sqlalchemy import select

        from plangate.store.schema import documents

        store = await self.store()
        async with store.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(documents.c.data)
                    .where(
                        documents.c.kind == ARCHIVE_KIND,
                        documents.c.key.startswith(scope.key + "#", autoescape=True),
                    )
                    .order_by(documents.c.updated_at)
                )
            ).all()
        return [PlanRecord.model_validate(row.data) for row in rows]


def _archived(scope: PlanScope, record: PlanRecord) -> Put:
    """A finished plan, kept readable under ``<scope>#<plan id>`` (rewritten if there)."""
    return Put(
        ARCHIVE_KIND,
        f"{scope.key}#{record.id}",
        record.model_dump(mode="json", by_alias=True),
        None,
    )


def with_resolutions(
    state: PlanSessionState, transition: Transition, reply: object | None = None
) -> None:
    for call_id, result in transition.resolutions.items():
        state.resolutions[call_id] = Resolution(result=result, reply=reply)
