"""What a served run costs beside the same run on bare ADK, measured in one sitting.

    python benchmarks/bench_served.py [--runs 60] [--shapes trivial tool] [--profile DIR]
                                      [--loop auto|asyncio]

Each row runs ``--runs`` runs one after another, each on a new thread/session, after a
warm-up, and reports per run: CPU time of the process doing the work, wall time, SQL
statements and SQL statements per model step.

- served: the agent ``plangate serve`` builds (coding agent + data tools + protocol
  governance + Plan Mode) under ``create_app``/uvicorn in a child process, driven over
  real HTTP on 127.0.0.1 as AG-UI runs (SSE); CPU is the server process's own.
- bare ADK: a ``Runner`` over an ``LlmAgent`` with the same workspace tools and model,
  ``create_session`` + ``run_async`` in this process; CPU is this process's.

Both sit on the same kind of ADK session store: ADK's ``InMemorySessionService``
(``memory``) or its ``DatabaseSessionService`` on a SQLite file (``sqlite``; plangate
serve's default, on the same file as the plans and journal).

Shapes: ``trivial`` is one model step answering text; ``tool`` is a step calling
``Read`` (gate-checked on plangate) and a step answering text. The served runs also make
one classifier call (the protocol router asks the model), counted as a model step.

Statements are counted with a ``sqlite3`` trace callback on every connection, labelled
``reader`` (plangate's lock-free point reads in the event loop's thread), ``writer``
(plangate's one-hop commits) and ``async`` (SQLAlchemy over aiosqlite: ADK's sessions and
plangate's async store; each statement is a hop to a worker thread). The machine is
shared and noisy: compare the ratios, not the absolute figures. The rows run in rounds,
one after another; a row's CPU is its median round, and its ratio over bare ADK the
median of the ratios of rounds run side by side.

``--loop``: the event loop of the server and of this process, so that bare ADK runs on
the same one. ``auto`` (the default) is uvicorn's choice, as ``plangate serve`` makes it:
uvloop and httptools when they are installed (plangate does not require them), else the
standard library's loop and h11, which ``asyncio`` forces.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from served_support import (
    LOOPS,
    SESSIONS,
    SHAPES,
    Tally,
    bare_run,
    bare_runner,
    count_sqlite_statements,
    model_calls,
    plangate_runner,
    quiet_adk_logs,
    run_on,
    served_round,
    served_run,
    start_server,
    statements,
)

from plangate.adk.run_config import run_config
from plangate.adk.session import PlanSession

WARMUP = 5


async def _local_round(tally: Tally, runs: int, run: Callable[[], Awaitable[None]]) -> None:
    """Runs in this process: its CPU time, its statement counters."""
    sql_before, calls_before = Counter(statements), model_calls[0]
    walls: list[float] = []
    cpu_start = time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        await run()
        walls.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu_start
    sql = Counter(statements)
    sql.subtract(sql_before)
    tally.add(runs, cpu, walls, sql, model_calls[0] - calls_before)


async def compare(
    shape: str,
    sessions: str,
    folder: Path,
    runs: int,
    rounds: int,
    profile: Path | None,
    loop: str,
) -> list[Tally]:
    """Bare ADK, plangate in this process and plangate served, in interleaved rounds."""
    bare = bare_runner(shape, folder / "bare", sessions)
    local = plangate_runner(shape, folder / "local", sessions)

    async def bare_once() -> None:
        await bare_run(bare)

    async def bare_same_telemetry_once() -> None:
        # plangate asks ADK for its stable GenAI conventions when nothing records them
        # (``plangate.adk.run_config``): bare ADK with the same choice, for comparison.
        await bare_run(bare, run_config=run_config(None))

    async def local_once() -> None:
        session = await PlanSession.open(local, session_id=f"t-{uuid.uuid4().hex[:16]}")
        async for _ in session.run("hello"):
            pass

    tallies = [
        Tally(f"bare ADK, {sessions}"),
        Tally(f"plangate in-process, {sessions}"),
        Tally(f"plangate served, {sessions}"),
        Tally(f"bare ADK, {sessions}, same telemetry"),
    ]
    server = start_server(shape, folder / "served", sessions, profile=profile, loop=loop)
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            for _ in range(WARMUP):
                await bare_once()
                await bare_same_telemetry_once()
                await local_once()
                assert await served_run(client, server.url) is None
            per_round = max(1, runs // rounds)
            for _ in range(rounds):
                await _local_round(tallies[0], per_round, bare_once)
                await _local_round(tallies[1], per_round, local_once)
                await served_round(tallies[2], per_round, server, client)
                await _local_round(tallies[3], per_round, bare_same_telemetry_once)
    finally:
        server.stop()
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument("--sessions", nargs="+", choices=SESSIONS, default=list(SESSIONS))
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write a cProfile of each served row's server into this folder",
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default="auto",
        help="event loop of the server and of the in-process rows (auto: as plangate serve)",
    )
    args = parser.parse_args()
    run_on(args.loop, measure(args))


async def measure(args: argparse.Namespace) -> None:
    count_sqlite_statements()
    quiet_adk_logs()
    print(
        f"per run, {args.runs} runs each, new thread per run (ratio: CPU over bare ADK on "
        "the same session store, median of the rounds' ratios)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            print(f"{shape}:")
            for sessions in args.sessions:
                profile = None
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    profile = args.profile / f"served-{shape}-{sessions}.prof"
                folder = Path(tmp) / f"{shape}-{sessions}"
                bare, local, served, same = await compare(
                    shape, sessions, folder, args.runs, args.rounds, profile, args.loop
                )
                print(bare.line(None))
                for row in (local, served):
                    print(row.line(bare))
                print(same.line(bare))
                print(
                    f"    over bare ADK with the same telemetry choice: in-process "
                    f"{local.over(same):.1f}x, served {served.over(same):.1f}x"
                )


if __name__ == "__main__":
    main()
