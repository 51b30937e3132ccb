"""One run per thread across every process sharing the database.

Every surface takes the thread before a run: the web server (several of them behind a
load balancer) with ``ThreadRuns.start``, the terminal and the editor with ``hold``. It
takes the thread's lease or raises ``LeaseHeld``. While the run goes on ``keep`` has
the lease renewed from a thread of its own (see ``LeaseKeeper``); if the lease was lost
(this process stalled past the lease time and another took the thread over) it calls
back so the run is stopped rather than run twice. ``sweep`` marks the runs of dead
holders ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.runners import Runner

from plangate.adk.boundary import install_boundary
from plangate.adk.setup import plan_runtime
from plangate.store.fence import Fence, current_fence, fence_writes, unfenced
from plangate.store.lease_keeper import LeaseKeeper
from plangate.store.leases import Lease, LeaseHeld, RunLeases
from plangate.store.recovery import (
    interrupt_runs,
    release_closing_runs,
    stale_runs,
    sweep_lease,
)
from plangate.store.shared import shared_store

__all__ = ["INTERRUPTED_REASON", "Lease", "LeaseHeld", "ThreadRuns"]

logger = logging.getLogger(__name__)

ENDED_REASON = (
    "the run ended without closing (a new message superseded it while it waited, or an "
    "error ended it); send a message to continue"
)

INTERRUPTED_REASON = (
    "the server running it stopped before the run ended; send a message to continue"
)


class ThreadRuns:
    def __init__(self, runner: Runner, user_id: str, *, ttl: float | None = None) -> None:
        self.runner = runner
        self.user_id = user_id
        self._ttl = ttl
        self._leases: RunLeases | None = None
        self._keeper: LeaseKeeper | None = None
        self._fences: dict[tuple[str, str], Fence] = {}
        agent = runner.agent
        if isinstance(agent, LlmAgent):
            # First of all checks: a run that lost its thread calls no tool at all.
            install_boundary(agent).add(self._check_fence, order=-1000)

    async def leases(self) -> RunLeases:
        if self._leases is None:
            agent = self.runner.agent
            runtime = plan_runtime(agent) if isinstance(agent, LlmAgent) else None
            store = await (runtime.store() if runtime is not None else shared_store())
            self._leases = RunLeases(store, ttl=self._ttl)
        return self._leases

    def thread_key(self, thread_id: str) -> str:
        return f"{self.runner.app_name}/{self.user_id}/{thread_id}"

    async def start(self, thread_id: str, run_id: str) -> Lease:
        """Take the thread; ``LeaseHeld`` if a run holds it anywhere."""
        leases = await self.leases()
        key = self.thread_key(thread_id)
        lease, expired = await leases.acquire(key, run_id)
        if expired is not None:
            # The previous holder died mid-run: its run is over, say so before ours.
            await self._interrupt(key, ignore_leases=True)
        return lease

    async def keep(self, lease: Lease, on_lost: Callable[[], None]) -> None:
        """Renew ``lease`` (from the keeper's thread) until ``finish``; ``on_lost`` runs
        on this event loop if another process took the thread over.

        From here on every write of the calling task (and of what it starts) and every
        tool call it makes is fenced by the lease: refused with ``RUN_LEASE_LOST`` once
        another holder took the thread, even before the heartbeat noticed."""
        leases = await self.leases()
        if self._keeper is None:
            self._keeper = LeaseKeeper(leases.store.url, leases.ttl)
        loop = asyncio.get_running_loop()
        fence = Fence(lease.thread_key, lease.holder, lease.run_id)
        self._fences[(lease.thread_key, lease.run_id)] = fence
        fence_writes(fence)

        def lost() -> None:
            fence.lost = True  # no write from now on, whichever comes first
            loop.call_soon_threadsafe(on_lost)

        self._keeper.hold(lease, lost)

    @contextlib.asynccontextmanager
    async def hold(self, thread_id: str, run_id: str | None = None) -> AsyncIterator[Lease]:
        """Hold the thread for one run (the terminal and editor surfaces): ``LeaseHeld``
        if a run holds it anywhere -- a server, another terminal. Should the lease be
        lost meanwhile, the task running the block is cancelled rather than run twice."""
        lease = await self.start(thread_id, run_id or f"run-{uuid.uuid4().hex}")
        task = asyncio.current_task()

        def stop_the_run() -> None:
            if task is not None:
                task.cancel()

        try:
            await self.keep(lease, stop_the_run)
            yield lease
        finally:
            await self.finish(lease)

    async def finish(self, lease: Lease) -> None:
        fence = self._fences.pop((lease.thread_key, lease.run_id), None)
        if current_fence() is fence:
            fence_writes(None)  # the release below is not the run's write
        if self._keeper is not None:
            self._keeper.drop(lease)
        if fence is not None and fence.lost:
            # The thread is another holder's now: nothing of ours to release.
            logger.error(
                "stopped run %s on thread %s: another server took the thread over while "
                "this one stalled; nothing more was written for it",
                lease.run_id,
                lease.thread_key,
            )
            return
        store = (await self.leases()).store
        with unfenced():
            await release_closing_runs(store, lease, actor="plangate", reason=ENDED_REASON)

    async def _check_fence(
        self, tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        """Before each tool call of a run holding a lease: stop the run (``LeaseLost``)
        if another holder took the thread meanwhile -- the tool must not run twice."""
        await self.check_lease()
        return None

    async def check_lease(self) -> None:
        """Raise ``LeaseLost`` if the calling run holds a lease another holder took."""
        fence = current_fence()
        if fence is not None:
            await (await self.leases()).check_fence(fence)

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()

    async def running_elsewhere(self, thread_id: str) -> bool:
        return await (await self.leases()).holder_of(self.thread_key(thread_id)) is not None

    async def sweep(self) -> list[str]:
        """Claim expired leases and mark their runs interrupted; returns the run keys.
        Each claim and its marks are one compare-and-set on the lease row as read."""
        leases = await self.leases()
        keeper = self._keeper
        marked: list[str] = []
        for seen in await leases.expired():
            if keeper is not None and keeper.keeps(seen):
                # A run of this very process, still going: its heartbeat is late (a
                # loaded machine, a file locked by another writer), not gone. Another
                # process cannot tell the two apart; this one can, and claiming the lease
                # would stop its own live run.
                continue
            with unfenced():
                marked += await sweep_lease(
                    leases.store, seen, actor="plangate", reason=INTERRUPTED_REASON
                )
        return marked

    async def _interrupt(self, session_key: str, *, ignore_leases: bool = False) -> list[str]:
        leases = await self.leases()
        runs = await stale_runs(leases.store, session_key=session_key, ignore_leases=ignore_leases)
        with unfenced():
            return await interrupt_runs(
                leases.store, runs, actor="plangate", reason=INTERRUPTED_REASON
            )
