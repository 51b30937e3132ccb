"""Several ``plangate serve`` processes on one PostgreSQL database: run starts/s and
commits/s with 1, 4 and 8 processes, as ratios to one process, measured in one run.

    PLANGATE_BENCH_POSTGRES_URL=postgresql://user:pw@127.0.0.1:5432/postgres \\
        python benchmarks/bench_scale.py [--servers 1 4 8] [--seconds 20] [--clients 16]

For each count a fresh database is made and the processes are started on it (the real
``plangate serve``, demo model, 127.0.0.1 only). ``--clients`` closed-loop clients then
send runs back to back, each a new thread saying "hello", spread round-robin over the
processes, for ``--seconds`` after a warm-up run on each process. Reported:

- run starts/s: runs accepted (``RUN_STARTED`` received) per second;
- runs/s: runs that finished (``RUN_FINISHED``);
- commits/s: transactions PostgreSQL committed in that database (``pg_stat_database``:
  every plangate, ADK and lease write, and the reads that run in a transaction);
- journal rows/s: plangate's governance journal rows written.

The clients share the machine with the servers and the database: on a 2-core box more
processes mostly share the same two cores, so the ratios say what scaling out costs
or gains on one machine, not across machines. Everything is bounded in time and count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx

URL_LINE = re.compile(r"plangate web UI: (http://127\.0\.0\.1:\d+)/")
ENV = "PLANGATE_BENCH_POSTGRES_URL"


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str = ""


def start(folder: Path, database_url: str) -> Server:
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plangate.cli.main",
            "serve",
            "--port",
            "0",
            "--database-url",
            database_url,
        ],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=(folder / "stderr.txt").open("w"),
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return Server(process)


def wait_ready(server: Server, timeout: float = 300) -> None:
    assert server.process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = server.process.stdout.readline()
        if not line:
            raise RuntimeError(f"serve exited {server.process.wait()}")
        if found := URL_LINE.search(line):
            server.url = found.group(1)
            threading.Thread(target=server.process.stdout.read, daemon=True).start()
            return
    raise RuntimeError("serve did not start in time")


def stop(server: Server) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        try:
            server.process.wait(20)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


def body(thread: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": f"run-{uuid.uuid4().hex}",
        "state": {},
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def one_run(client: httpx.AsyncClient, url: str, counts: dict[str, int]) -> None:
    """A run on a new thread; counts its start, its end, or its failure."""
    try:
        async with client.stream(
            "POST", f"{url}/api/agent", json=body(f"b-{uuid.uuid4().hex[:12]}")
        ) as response:
            if response.status_code != 200:
                counts["errors"] += 1
                return
            async for line in response.aiter_lines():
                if '"type":"RUN_STARTED"' in line:
                    counts["started"] += 1
                elif '"type":"RUN_FINISHED"' in line:
                    counts["finished"] += 1
                    return
                elif '"type":"RUN_ERROR"' in line:
                    counts["errors"] += 1
                    return
    except httpx.HTTPError:
        counts["errors"] += 1


async def database_counts(admin: str, name: str) -> tuple[int, int]:
    """Committed transactions of database ``name`` and its journal rows."""
    server = await asyncpg.connect(admin)
    try:
        # Statistics are sent to the collector at the end of each transaction and read
        # from a snapshot: clear it so this read sees the latest.
        await server.execute("SELECT pg_stat_clear_snapshot()")
        commits = await server.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", name
        )
    finally:
        await server.close()
    database = await asyncpg.connect(admin.rsplit("/", 1)[0] + f"/{name}")
    try:
        rows = await database.fetchval("SELECT count(*) FROM plangate_journal")
    finally:
        await database.close()
    return int(commits), int(rows)


async def measure(urls: list[str], admin: str, name: str, seconds: float, clients: int) -> dict:
    counts = {"started": 0, "finished": 0, "errors": 0}
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        for url in urls:  # warm-up: each process's first run builds what it caches
            await one_run(client, url, {"started": 0, "finished": 0, "errors": 0})
        await asyncio.sleep(1.0)  # the statistics of the warm-up settle
        commits_before, rows_before = await database_counts(admin, name)
        targets = itertools.cycle(urls)
        stop_at = time.monotonic() + seconds

        async def client_loop() -> None:
            while time.monotonic() < stop_at:
                await one_run(client, next(targets), counts)

        begin = time.monotonic()
        await asyncio.gather(*(client_loop() for _ in range(clients)))
        elapsed = time.monotonic() - begin
    await asyncio.sleep(1.0)
    commits_after, rows_after = await database_counts(admin, name)
    return {
        "starts/s": counts["started"] / elapsed,
        "runs/s": counts["finished"] / elapsed,
        "commits/s": (commits_after - commits_before) / elapsed,
        "journal rows/s": (rows_after - rows_before) / elapsed,
        "errors": counts["errors"],
    }


async def admin_execute(admin: str, statement: str) -> None:
    connection = await asyncpg.connect(admin)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def scale(count: int, admin: str, seconds: float, clients: int, folder: Path) -> dict:
    name = f"plangate_scale_{uuid.uuid4().hex[:8]}"
    asyncio.run(admin_execute(admin, f'CREATE DATABASE "{name}"'))
    database_url = admin.rsplit("/", 1)[0] + f"/{name}"
    # The first process prepares the database; the rest start together on it.
    servers = [start(folder / f"{count}-0", database_url)]
    try:
        wait_ready(servers[0])
        servers += [start(folder / f"{count}-{i}", database_url) for i in range(1, count)]
        for server in servers[1:]:
            wait_ready(server)
        return asyncio.run(measure([s.url for s in servers], admin, name, seconds, clients))
    finally:
        for server in servers:
            server.process.send_signal(signal.SIGINT)
        for server in servers:
            stop(server)
        with contextlib.suppress(Exception):
            asyncio.run(admin_execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    admin = os.environ.get(ENV) or os.environ.get("PLANGATE_TEST_POSTGRES_URL")
    if not admin:
        raise SystemExit(f"set {ENV}=postgresql://user:pw@127.0.0.1:5432/postgres")
    admin = admin.replace("postgresql+asyncpg://", "postgresql://")
    print(f"{args.clients} clients, {args.seconds:.0f} s per count, {os.cpu_count()} cores")
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="plangate-scale-") as folder:
        for count in args.servers:
            results[count] = scale(count, admin, args.seconds, args.clients, Path(folder))
            shown = "  ".join(
                f"{key} {value:7.1f}" if isinstance(value, float) else f"{key} {value}"
                for key, value in results[count].items()
            )
            print(f"{count} process(es): {shown}", flush=True)
    base = results[args.servers[0]]
    print(f"\nratios to {args.servers[0]} process(es):")
    for count, figures in results.items():
        ratios = "  ".join(
            f"{key} x{figures[key] / base[key]:.2f}" if base[key] else f"{key} -"
            for key in ("starts/s", "runs/s", "commits/s", "journal rows/s")
        )
        print(f"  {count}: {ratios}")


if __name__ == "__main__":
    main()
