"""/health latency while a run's long DuckDB query runs, on one real server (loopback).

    python benchmarks/bench_event_loop.py [--seconds 8]

Starts ``create_app`` under uvicorn on 127.0.0.1 with an agent whose scripted model runs
one query that the data catalog interrupts after ``--seconds``; meanwhile /health is
asked every 20 ms (bounded: it stops when the run ends). Prints p50/p99/max of /health
during the query beside the same with no query running.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from google.adk.agents import LlmAgent

from plangate.adk import setup_plan
from plangate.adk.runner import build_runner
from plangate.data import DataCatalog, DataTools
from plangate.data.adk_tools import data_adk_tools
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.web.server import bind, create_app, freeze_startup_heap

ENDLESS = "SELECT count(*) AS n FROM range(1000000000000) t(x) WHERE x % 7 = 3"


def _serve(app: object) -> tuple[uvicorn.Server, str, threading.Thread]:
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{sock.getsockname()[1]}", thread


def _health_latencies(http: httpx.Client, until: threading.Event, limit: int) -> list[float]:
    latencies: list[float] = []
    while not until.is_set() and len(latencies) < limit:
        start = time.perf_counter()
        assert http.get("/health").status_code == 200
        latencies.append(time.perf_counter() - start)
        time.sleep(0.02)
    return latencies


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def _summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = _p99(latencies)
    return (
        f"p50 {statistics.median(ordered) * 1e3:6.1f} ms  p99 {p99 * 1e3:6.1f} ms  "
        f"max {ordered[-1] * 1e3:6.1f} ms  ({len(ordered)} requests)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = ScriptedLlm()
        model.add([text("warm")])  # a first run creates the session tables
        model.add(
            [call("run_sql_readonly", source="sample", sql=ENDLESS, timeout_s=args.seconds)],
            [text("done")],
        )
        tools = DataTools(DataCatalog(cache_dir=folder / "data", query_timeout_s=60))
        tools.catalog.tables("sample")  # builds the sample database before timing
        agent = setup_plan(LlmAgent(name="orchestrator", model=model, tools=data_adk_tools(tools)))
        runner = build_runner(agent, database_url=f"sqlite:///{folder / 'bench.db'}")
        app = create_app(runner=runner, require_token=False, token=None)
        freeze_startup_heap()  # as ``plangate serve`` does
        server, url, thread = _serve(app)
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                body = {
                    "threadId": "t-warm",
                    "runId": "r-warm",
                    "state": {},
                    "messages": [{"id": "m0", "role": "user", "content": "hello"}],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
                assert http.post("/api/agent", json=body).status_code == 200
                idle = _health_latencies(http, threading.Event(), 100)
                done = threading.Event()
                body.update(
                    threadId="t-bench",
                    runId="r-bench",
                    messages=[{"id": "m1", "role": "user", "content": "count"}],
                )

                def run() -> None:
                    with httpx.Client(base_url=url, timeout=120) as client:
                        client.post("/api/agent", json=body)
                    done.set()

                runner_thread = threading.Thread(target=run)
                runner_thread.start()
                time.sleep(0.5)  # the query starts once the model step is done
                busy = _health_latencies(http, done, int(args.seconds * 60))
                runner_thread.join()
        finally:
            server.should_exit = True
            thread.join(10)
    print(f"/health, idle server:            {_summary(idle)}")
    print(f"/health, {args.seconds:.0f} s query running:     {_summary(busy)} (goal p99 < 20 ms)")
    ratio = _p99(busy) / _p99(idle)
    print(f"p99 while the query runs / idle p99: {ratio:.2f}")


if __name__ == "__main__":
    sys.exit(main())
