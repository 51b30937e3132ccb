"""Protocol routing and session-intent commit costs, measured in one run.

    python benchmarks/bench_protocol.py [--calls 20000] [--commits 300]

(a) router latency of the deterministic paths (restored segment, explicit selection,
    inherited intent for a weak follow-up, analytic accelerator), per call in µs;
(b) intent-commit throughput on an embedded SQLite file (WAL, BEGIN IMMEDIATE): a bare
    head compare-and-set commit, and the full atomic run start (run record + segment +
    route journal + intent revision + run binding in one transaction), in commits/s;
    plus two concurrent writers racing on one session head, retrying lost CAS rounds.
The machine is shared and noisy: compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from plangate.journal.events import JournalEvent
from plangate.protocol import (
    DATA_ANALYSIS_REF,
    GENERAL_TASK_REF,
    IntentTransition,
    SessionIntent,
    route_protocol,
    segment_id_for,
    start_segment,
)
from plangate.store.intents import IntentRepository, IntentRevision, IntentRevisionConflict
from plangate.store.protocol_state import ProtocolStateStore, RunRecord
from plangate.store.store import Store, Transaction
from plangate.store.writes import transact

AUTHORIZED = (GENERAL_TASK_REF, DATA_ANALYSIS_REF)
INTENT = SessionIntent(
    intent_id="i1", revision_id="r1", protocol=DATA_ANALYSIS_REF, text="revenue by region"
)


async def router_latency(calls: int) -> dict[str, float]:
    cases = {
        "restored": dict(restored=DATA_ANALYSIS_REF),
        "explicit": dict(explicit=DATA_ANALYSIS_REF),
        "inherited (weak follow-up)": dict(intent=INTENT),
        "analytic accelerator": {},
    }
    texts = {
        "restored": "",
        "explicit": "sales by region",
        "inherited (weak follow-up)": "try again",
        "analytic accelerator": "analyze revenue by region for last quarter",
    }
    results = {}
    for name, kwargs in cases.items():
        message = texts[name]
        for _ in range(200):  # warm up
            await route_protocol(message, authorized=AUTHORIZED, **kwargs)
        start = time.perf_counter()
        for _ in range(calls):
            await route_protocol(message, authorized=AUTHORIZED, **kwargs)
        results[name] = (time.perf_counter() - start) / calls * 1e6
    return results


def refine(previous: str | None, intent_id: str | None, n: int) -> IntentTransition:
    return IntentTransition(
        kind="refine" if previous else "initial",
        intent_id=intent_id,
        previous_revision_id=previous,
        protocol=DATA_ANALYSIS_REF,
        text=f"revenue by region (requirement {n})",
        task_relation="refine" if previous else "replace",
    )


async def bare_commits(store: Store, count: int) -> float:
    session = f"bench/u/{uuid.uuid4().hex}"
    head: str | None = None
    intent_id: str | None = None
    start = time.perf_counter()
    for n in range(count):
        # The store's transaction path, as a run start's: the ratio is then what the
        # start's other statements cost, not a difference between two paths.
        async def move(
            tx: Transaction, n: int = n, head: str | None = head, intent_id: str | None = intent_id
        ) -> IntentRevision:
            return await IntentRepository(tx.connection).commit(
                session, refine(head, intent_id, n), expected_head=head, source_run_id=f"r{n}"
            )

        revision = await transact(store, move)
        head, intent_id = revision.id, revision.intent_id
    return count / (time.perf_counter() - start)


async def run_starts(store: Store, count: int) -> float:
    states = ProtocolStateStore(store)
    session = f"bench/u/{uuid.uuid4().hex}"
    scope = f"{session}/analyst"
    head: str | None = None
    intent_id: str | None = None
    start = time.perf_counter()
    for n in range(count):
        run_id = f"run-{n}"
        segment = start_segment(DATA_ANALYSIS_REF, segment_id_for(run_id))
        record = RunRecord(
            run_id=run_id,
            scope_key=scope,
            session_key=session,
            agent="analyst",
            user_input="more",
            segment_ids=(segment.segment_id,),
            started_at=time.time(),
        )
        transition = refine(head, intent_id, n)

        bound = []

        async def bind(tx, transition=transition, run_id=run_id, base=head, bound=bound) -> None:
            binding, _ = await IntentRepository(tx.connection).commit_run_start(
                session,
                run_id,
                expected_base_id=base,
                expected_head=base,
                transition=transition,
                task_relation=transition.task_relation,
            )
            bound.append(binding)

        events = [
            JournalEvent(kind=k, subject=run_id, at=time.time())
            for k in ("protocol.route.resolved", "protocol.run.started")
        ]
        await states.create(scope, record, segment, events, within=bind)
        head = bound[0].active_revision_id
        if intent_id is None:  # the same intent from then on: read it once
            async with store.engine.connect() as conn:
                intent_id = (await IntentRepository(conn).resolve(session)).intent_id
    return count / (time.perf_counter() - start)


async def racing_commits(store: Store, count: int) -> tuple[float, int]:
    """Two writers on one head; each re-reads and retries a lost round."""
    session = f"bench/u/{uuid.uuid4().hex}"
    conflicts = 0

    async def writer(n: int) -> None:
        nonlocal conflicts
        done = 0
        while done < n:

            async def read(conn: Any) -> tuple[str | None, IntentRevision | None]:
                repo = IntentRepository(conn)
                head = await repo.head(session)
                return head, await repo.revision(head)

            head, current = await store.read(read)

            transition = refine(head, current.intent_id if current else None, done)

            async def move(
                tx: Transaction, head: str | None = head, transition: Any = transition
            ) -> None:
                await IntentRepository(tx.connection).commit(
                    session, transition, expected_head=head, source_run_id=None
                )

            try:
                await transact(store, move)
                done += 1
            except IntentRevisionConflict:
                conflicts += 1

    start = time.perf_counter()
    await asyncio.gather(writer(count // 2), writer(count // 2))
    return (count // 2 * 2) / (time.perf_counter() - start), conflicts


async def main(calls: int, commits: int) -> None:
    print(f"(a) router, deterministic paths ({calls} calls each)")
    latency = await router_latency(calls)
    for name, micros in latency.items():
        print(f"    {name:<28} {micros:8.1f} µs/call")
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        print(f"(b) intent commits on SQLite ({commits} each, interleaved in chunks of 20)")
        # The disk's flush time swings from minute to minute on a shared machine: the two
        # are measured side by side, chunk by chunk, and compared by total time.
        chunks = max(commits // 20, 1)
        spent_bare = spent_full = 0.0
        for _ in range(chunks):
            spent_bare += 20 / await bare_commits(store, 20)
            spent_full += 20 / await run_starts(store, 20)
        bare, full = chunks * 20 / spent_bare, chunks * 20 / spent_full
        racing, conflicts = await racing_commits(store, commits)
        print(f"    bare head CAS commit        {bare:8.0f} commits/s")
        print(f"    atomic run start            {full:8.0f} commits/s")
        print(f"    2 racing writers, one head  {racing:8.0f} commits/s ({conflicts} lost rounds)")
        print(f"    run start / bare commit     {full / bare:8.2f}x throughput")
        await store.close()
    fastest = min(latency.values())
    print(
        f"    router vs one bare commit   {1e6 / bare / fastest:8.0f}x (commit time / route time)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--commits", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.commits))
