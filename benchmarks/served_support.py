"""Shared parts of the served-run benchmarks: the model, the agents, a server process
with counters, and a client that runs one AG-UI run.

A benchmark server is a child process (``python benchmarks/served_support.py --shape …``)
so its CPU time is its own: the client's work never counts. Besides the app it answers
``GET /__bench__`` with its process CPU time, the model calls so far and the SQL
statements so far, by connection kind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import AsyncGenerator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

SESSIONS = ("memory", "sqlite", "plangate")
"""ADK's in-memory sessions, ADK's DatabaseSessionService on SQLite, plangate's
StoreSessionService on SQLite."""

SHAPES = ("trivial", "tool")
LOOPS = ("auto", "asyncio")
"""The event loop (and HTTP parser) of the server and of this process: ``auto`` is what
``plangate serve`` runs on (uvloop and httptools if installed, which plangate does not
require), ``asyncio`` the standard library's loop and h11."""


def run_on(loop: str, main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on the event loop ``loop`` names (see ``LOOPS``)."""
    if loop == "auto":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(main)
            return
    asyncio.run(main)


"""``trivial``: one model step answering text. ``tool``: a step that calls ``Read`` (which
passes the plan gate on plangate) and a step answering text."""

CLASSIFICATION = json.dumps(
    {
        "protocolId": "general-task",
        "protocolVersion": 1,
        "confidence": 0.95,
        "reasonCodes": ["BENCH"],
        "taskRelation": "replace",
    }
)

# -- counters ------------------------------------------------------------------------------

statements: Counter[str] = Counter()
"""SQL statements run on SQLite connections of this process, by who opened them."""
model_calls = [0]
_SQL_LOG = open(os.environ["BENCH_SQL_LOG"], "a") if os.environ.get("BENCH_SQL_LOG") else None  # noqa: SIM115


def quiet_adk_logs() -> None:
    """Models without usage metadata would log on every call."""
    import logging

    logging.getLogger("google_adk.google.adk.telemetry._metrics").setLevel(logging.ERROR)


def count_sqlite_statements() -> None:
    """Trace every ``sqlite3`` connection opened from now on, labelled by its opener:
    ``reader`` (plangate's lock-free reads), ``writer`` (plangate's commit thread) or
    ``async`` (SQLAlchemy over aiosqlite: ADK's sessions and plangate's async store, one
    worker-thread hop per statement)."""
    original = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        label = {"plangate.store.fresh": "reader", "plangate.store.writes": "writer"}.get(
            caller, "async"
        )
        conn = original(*args, **kwargs)

        def trace(sql: str) -> None:
            statements[label] += 1
            if _SQL_LOG is not None:
                _SQL_LOG.write(f"{label}\t{' '.join(sql.split())[:160]}\n")

        conn.set_trace_callback(trace)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


# -- the model and the agents -----------------------------------------------------------------


class BenchModel(BaseLlm):
    """Stateless: answers from the request alone, so any number of runs can share it."""

    model: str = "bench"
    shape: str = "trivial"
    delay: float = 0.0
    """Seconds each call waits, like a real model's network round trip."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        model_calls[0] += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if not (llm_request.config and llm_request.config.tools):
            # plangate's protocol router asks the agent's model to classify the message.
            yield _reply(types.Part(text=CLASSIFICATION))
            return
        last = llm_request.contents[-1] if llm_request.contents else None
        answered = last is not None and any(p.function_response for p in last.parts or [])
        if self.shape == "tool" and not answered:
            call = types.FunctionCall(name="Read", args={"path": "inventory/stock.py"})
            yield _reply(types.Part(function_call=call))
            return
        yield _reply(types.Part(text="Hello."))


def _reply(part: types.Part) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[part]))


def plangate_runner(shape: str, folder: Path, sessions: str, delay: float = 0.0) -> Any:
    """The agent ``plangate serve`` builds (coding agent, data tools, protocol governance)
    on the bench model, sessions in ``sessions`` (``sqlite``: ADK's DatabaseSessionService
    on plangate's file; ``memory``: ADK's in-memory one)."""
    from google.adk.sessions import InMemorySessionService

    from plangate.adk.runner import build_runner
    from plangate.agent.coding_agent import build_coding_agent
    from plangate.agent.workspace import copy_sample_workspace
    from plangate.data import DataCatalog

    root = copy_sample_workspace(folder / "ws")
    model = BenchModel(shape=shape, delay=delay)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        agent = build_coding_agent(root, model, data=DataCatalog(cache_dir=folder / "data"))
        service = InMemorySessionService() if sessions == "memory" else None
        return build_runner(
            agent,
            database_url=f"sqlite:///{folder / 'plangate.db'}",
            session_service=service,
            sessions="plangate" if sessions == "plangate" else "adk",
        )


def bare_runner(shape: str, folder: Path, sessions: str, delay: float = 0.0) -> Any:
    """Bare ADK: an ``LlmAgent`` with the tools of the served agent that are not
    plangate's (workspace, todos, sub-agents, data), its instruction and the same model;
    no Plan Mode, no protocols, no plugin."""
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import DatabaseSessionService, InMemorySessionService

    from plangate.agent.coding_agent import AGENT_NAME, INSTRUCTION
    from plangate.agent.data_agent import DATA_INSTRUCTION
    from plangate.agent.subagents import subagent_tools
    from plangate.agent.todos import todo_write_tool
    from plangate.agent.workspace import Workspace, copy_sample_workspace, workspace_tools
    from plangate.data import DataCatalog, DataTools
    from plangate.data.adk_tools import data_adk_tools

    root = copy_sample_workspace(folder / "ws")
    tools: list[Any] = [*workspace_tools(Workspace(root)), todo_write_tool(AGENT_NAME)]
    tools.extend(subagent_tools(tools))
    tools.extend(data_adk_tools(DataTools(DataCatalog(cache_dir=folder / "data"))))
    agent = LlmAgent(
        name=AGENT_NAME,
        model=BenchModel(shape=shape, delay=delay),
        instruction=f"{INSTRUCTION}\n\n{DATA_INSTRUCTION}",
        tools=tools,
    )
    if sessions == "memory":
        service: Any = InMemorySessionService()
    elif sessions == "plangate":
        from plangate.adk.session_service import StoreSessionService

        service = StoreSessionService(f"sqlite:///{folder / 'adk.db'}")
    else:
        service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{folder / 'adk.db'}")
    return Runner(app_name="bare", agent=agent, session_service=service)


async def bare_run(runner: Any, text: str = "hello", run_config: Any = None) -> None:
    """One bare ADK run on a new session, as a server would do it."""
    session = await runner.session_service.create_session(app_name="bare", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(
        user_id="user", session_id=session.id, new_message=message, run_config=run_config
    ):
        pass


# -- the server process --------------------------------------------------------------------


def _with_counters(app: Any, profile: Path | None) -> Any:
    import cProfile

    # CPU time of the event loop's thread: waiting for the GIL or the disk is not cost.
    profiler = cProfile.Profile(time.thread_time) if profile is not None else None
    calls = [0]

    async def bench_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/__bench__":
            calls[0] += 1
            if profiler is not None:
                # Profile what runs between the first and the second look at the counters.
                if calls[0] == 1:
                    profiler.enable()
                elif calls[0] == 2:
                    profiler.disable()
                    profiler.dump_stats(profile)
            body = json.dumps(
                {
                    "cpu": time.process_time(),
                    "model_calls": model_calls[0],
                    "statements": dict(statements),
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return bench_app


def serve_main(argv: list[str]) -> None:
    import uvicorn

    from plangate.web.server import bind, create_app, freeze_startup_heap

    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=SHAPES, default="trivial")
    parser.add_argument("--sessions", choices=SESSIONS, default="sqlite")
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--loop", choices=LOOPS, default="auto")
    args = parser.parse_args(argv)
    count_sqlite_statements()
    runner = plangate_runner(args.shape, args.folder, args.sessions, args.delay)
    quiet_adk_logs()
    app = create_app(runner=runner, require_token=False, token=None)
    sock = bind("127.0.0.1", 0)
    freeze_startup_heap()  # as ``plangate serve`` does
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(
            _with_counters(app, args.profile),
            log_level="warning",
            lifespan="on",
            backlog=2048,
            # "auto", as ``plangate serve``: uvloop and httptools when installed.
            loop=args.loop,
            http="h11" if args.loop == "asyncio" else "auto",
        )
    )
    server.run(sockets=[sock])


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str

    def stats(self) -> dict[str, Any]:
        return httpx.get(f"{self.url}/__bench__", timeout=30).json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(
    shape: str,
    folder: Path,
    sessions: str = "sqlite",
    delay: float = 0.0,
    profile: Path | None = None,
    loop: str = "auto",
    source: Path | None = None,
) -> Server:
    """The bench server in a child process; ``source``: a ``src`` folder whose
    ``plangate`` it runs instead of the installed one (another checkout, say)."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        __file__,
        "--shape",
        shape,
        "--sessions",
        sessions,
        "--folder",
        str(folder),
        "--delay",
        str(delay),
    ]
    if profile is not None:
        command += ["--profile", str(profile)]
    command += ["--loop", loop]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if source is not None:
        # Ahead of the installed (editable) package on the import path.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH")]))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"the bench server did not start: {line!r}")
    # Keep reading its stdout so the child never blocks on a full pipe.
    threading.Thread(target=process.stdout.read, daemon=True).start()
    return Server(process, f"http://127.0.0.1:{int(line.split()[1])}")


# -- the client ------------------------------------------------------------------------------


def run_body(text: str = "hello") -> dict[str, Any]:
    return {
        "threadId": f"t-{uuid.uuid4().hex[:16]}",
        "runId": f"r-{uuid.uuid4().hex[:8]}",
        "state": {},
        "messages": [{"id": "m0", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def served_run(client: httpx.AsyncClient, url: str) -> str | None:
    """One AG-UI run on a new thread; None when it finished, else what went wrong."""
    last = ""
    try:
        async with client.stream("POST", f"{url}/api/agent", json=run_body()) as response:
            if response.status_code != 200:
                return f"HTTP {response.status_code}"
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    last = line
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if '"RUN_FINISHED"' not in last:
        return f"ended with {last[:200]}"
    return None


@dataclass
class Tally:
    """What the runs of one row cost, round by round."""

    name: str
    cpu: list[float] = field(default_factory=list)
    """CPU per run, one figure per round."""
    walls: list[float] = field(default_factory=list)
    sql: Counter[str] = field(default_factory=Counter)
    steps: int = 0
    runs: int = 0

    def add(self, runs: int, cpu: float, walls: list[float], sql: Counter[str], steps: int) -> None:
        self.cpu.append(cpu / runs)
        self.walls.extend(walls)
        self.sql.update(+sql)
        self.steps += steps
        self.runs += runs

    @property
    def cpu_ms(self) -> float:
        # The median round: the machine is shared, and a neighbour's burst lands in one.
        return statistics.median(self.cpu) * 1e3

    def over(self, base: Tally) -> float:
        """CPU over ``base``'s: the median of the ratios of rounds run side by side, so
        that a burst of a neighbour's, which moves one round of both, cancels out."""
        return statistics.median(a / b for a, b in zip(self.cpu, base.cpu, strict=True))

    def line(self, base: Tally | None) -> str:
        ratio = f"{self.over(base):5.1f}x" if base is not None else "     "
        sql_total = sum(self.sql.values()) / self.runs
        steps = self.steps / self.runs
        kinds = " ".join(f"{k} {v / self.runs:.1f}" for k, v in sorted(self.sql.items()))
        return (
            f"  {self.name:<36} cpu {self.cpu_ms:7.2f} ms {ratio}  wall p50 "
            f"{statistics.median(self.walls) * 1e3:7.2f} ms  steps {steps:3.1f}  "
            f"SQL/run {sql_total:5.1f} ({kinds or '-'})  SQL/step {sql_total / steps:4.1f}"
        )


async def served_round(tally: Tally, runs: int, server: Server, client: httpx.AsyncClient) -> None:
    """Runs over HTTP: the server process's CPU time and counters."""
    before = server.stats()
    walls: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        failure = await served_run(client, server.url)
        walls.append(time.perf_counter() - start)
        assert failure is None, failure
    after = server.stats()
    sql = Counter(after["statements"])
    sql.subtract(Counter(before["statements"]))
    steps = after["model_calls"] - before["model_calls"]
    tally.add(runs, after["cpu"] - before["cpu"], walls, sql, steps)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


if __name__ == "__main__":
    serve_main(sys.argv[1:])
