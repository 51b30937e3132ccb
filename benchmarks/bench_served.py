"""What a served run costs beside the same run on bare ADK, measured in one sitting.

    python benchmarks/bench_served.py [--runs 60] [--shapes trivial tool] [--profile DIR]

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
shared and noisy: compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
from served_support import (
    SHAPES,
    bare_run,
    bare_runner,
    count_sqlite_statements,
    model_calls,
    quiet_adk_logs,
    served_run,
    start_server,
    statements,
)

WARMUP = 5


class Row:
    def __init__(
        self, name: str, runs: int, cpu: float, walls: list[float], sql: Counter[str], steps: int
    ) -> None:
        self.name = name
        self.cpu_ms = cpu / runs * 1e3
        self.wall_ms = statistics.median(walls) * 1e3
        self.sql = {k: v / runs for k, v in sql.items()}
        self.sql_total = sum(sql.values()) / runs
        self.steps = steps / runs

    def line(self, base: Row | None) -> str:
        ratio = f"{self.cpu_ms / base.cpu_ms:5.1f}x" if base is not None else "     "
        per_step = self.sql_total / self.steps if self.steps else 0.0
        kinds = " ".join(f"{k} {v:.1f}" for k, v in sorted(self.sql.items()))
        return (
            f"  {self.name:<28} cpu {self.cpu_ms:7.2f} ms {ratio}  wall p50 {self.wall_ms:7.2f} ms"
            f"  steps {self.steps:3.1f}  SQL/run {self.sql_total:5.1f} ({kinds or '-'})"
            f"  SQL/step {per_step:4.1f}"
        )


async def _bare(shape: str, sessions: str, folder: Path, runs: int) -> Row:
    runner = bare_runner(shape, folder, sessions)
    for _ in range(WARMUP):
        await bare_run(runner)
    sql_before, calls_before = Counter(statements), model_calls[0]
    walls: list[float] = []
    cpu_start = time.process_time()
    for _ in range(runs):
        start = time.perf_counter()
        await bare_run(runner)
        walls.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu_start
    sql = Counter(statements)
    sql.subtract(sql_before)
    return Row(f"bare ADK, {sessions}", runs, cpu, walls, +sql, model_calls[0] - calls_before)


async def _served(shape: str, sessions: str, folder: Path, runs: int, profile: Path | None) -> Row:
    server = start_server(shape, folder, sessions, profile=profile)
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            for _ in range(WARMUP):
                failure = await served_run(client, server.url)
                assert failure is None, failure
            before = server.stats()
            walls: list[float] = []
            for _ in range(runs):
                start = time.perf_counter()
                failure = await served_run(client, server.url)
                walls.append(time.perf_counter() - start)
                assert failure is None, failure
            after = server.stats()
    finally:
        server.stop()
    sql = Counter(after["statements"])
    sql.subtract(Counter(before["statements"]))
    steps = after["model_calls"] - before["model_calls"]
    return Row(
        f"plangate served, {sessions}", runs, after["cpu"] - before["cpu"], walls, +sql, steps
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    parser.add_argument(
        "--sessions", nargs="+", choices=("memory", "sqlite"), default=["memory", "sqlite"]
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write a cProfile of each served row's server into this folder",
    )
    args = parser.parse_args()
    count_sqlite_statements()
    quiet_adk_logs()
    print(
        f"per run, {args.runs} runs each, new thread per run (ratio: CPU over bare ADK on "
        "the same session store)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes:
            print(f"{shape}:")
            for sessions in args.sessions:
                folder = Path(tmp) / f"{shape}-{sessions}"
                bare = await _bare(shape, sessions, folder / "bare", args.runs)
                profile = None
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    profile = args.profile / f"served-{shape}-{sessions}.prof"
                served = await _served(shape, sessions, folder / "served", args.runs, profile)
                print(bare.line(None))
                print(served.line(bare))


if __name__ == "__main__":
    asyncio.run(main())
