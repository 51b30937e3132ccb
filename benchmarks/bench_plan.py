"""Plan Mode overhead, measured in one run and reported as ratios.

    python benchmarks/bench_plan.py [--turns 200]

(a) one gate decision: the pure decision beside a set lookup, and the check through the
    installed hook (plan state read from SQLite + decision) beside a raw ``sqlite3``
    point read of the same row shape, interleaved in one run (best of 7 rounds);
(b) per-turn overhead: the same agent with and without ``setup_plan``, driven through the
    real Runner by a scripted model (one tool call + one answer per turn).
(c) with ``--long N``: the time spent inside what ``setup_plan`` installed, per turn, at
    turns 6-15 of a new session and in the last 10 of N of a long one, turn by turn in
    alternation (so both see the same machine), with the sessions kept by plangate's session
    service and by ADK's ``DatabaseSessionService`` on the same file. With plangate's,
    the session commits are made on the connection the plan state is read on, so a read
    after them is served from the cache; ADK's commit on a connection of their own,
    after which SQLite reads the row from the file again.
The machine is shared and noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.adk.tools import FunctionTool
from google.genai import types
from served_support import quiet_adk_logs

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.runner import build_app, build_runner
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import GatePolicy, ToolCall, decide
from plangate.plan import transitions as t
from plangate.policy.effects import Effect, read_only


@read_only
def lookup(key: str) -> dict:
    """Look a key up."""
    return {"key": key, "value": len(key)}


def bench_pure_decision(n: int = 20_000) -> float:
    record = t.update_content(
        t.force_enter(None, objective="x", now=0.0).record, content="1. a", now=0.0
    ).record
    policy = GatePolicy()
    calls = [
        ToolCall("Write", {"path": "a"}, Effect.WRITE),
        ToolCall("Read", {"path": "a"}, Effect.READ),
    ]
    start = time.perf_counter()
    for i in range(n):
        decide(calls[i % 2], record, policy)
    return (time.perf_counter() - start) / n


async def run_turns(runner: Runner, turns: int, model: ScriptedLlm, state: dict | None) -> float:
    session = await runner.session_service.create_session(
        app_name=runner.app_name, user_id="u", state=state
    )
    for _ in range(turns):
        model.add([call("lookup", key="k")], [text("ok")])
    start = time.perf_counter()
    for i in range(turns):
        message = types.Content(role="user", parts=[types.Part(text=f"turn {i}")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    return (time.perf_counter() - start) / turns


async def bench_turns(turns: int, folder: Path) -> dict[str, float]:
    plain_model, plan_model, planning_model = ScriptedLlm(), ScriptedLlm(), ScriptedLlm()
    url = f"sqlite:///{folder / 'bench.db'}"
    plain = LlmAgent(name="agent", model=plain_model, tools=[lookup])
    plain_runner = Runner(
        app=build_app(plain, "plain"),
        session_service=DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{folder / 'bench.db'}"),
    )
    governed = setup_plan(LlmAgent(name="agent", model=plan_model, tools=[lookup]), PlanOptions())
    governed_runner = build_runner(governed, database_url=url, app_name="governed")
    planning = setup_plan(
        LlmAgent(name="agent", model=planning_model, tools=[lookup]), PlanOptions()
    )
    planning_runner = build_runner(planning, database_url=url, app_name="planning")
    # Warm up engines and imports once, outside the timings.
    await run_turns(plain_runner, 3, plain_model, None)
    await run_turns(governed_runner, 3, plan_model, None)
    await run_turns(planning_runner, 3, planning_model, {"agent_mode": "plan"})
    return {
        "plain": await run_turns(plain_runner, turns, plain_model, None),
        "plan_mode_idle": await run_turns(governed_runner, turns, plan_model, None),
        "plan_mode_planning": await run_turns(
            planning_runner, turns, planning_model, {"agent_mode": "plan"}
        ),
    }


class _RawPointRead:
    """The floor: one point read of a plan-state row with plain ``sqlite3`` (WAL)."""

    def __init__(self, folder: Path) -> None:
        self.conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS documents (kind TEXT, key TEXT, version INTEGER, "
            "data TEXT, updated_at REAL, PRIMARY KEY (kind, key))"
        )
        self.conn.execute(
            "INSERT OR REPLACE INTO documents VALUES ('plan_state', 'a/u/s/agent', 1, ?, 0)",
            ('{"record": null}',),
        )

    def time(self, n: int) -> float:
        query = "SELECT version, data FROM documents WHERE kind = ? AND key = ?"
        conn = self.conn
        start = time.perf_counter()
        for _ in range(n):
            conn.execute(query, ("plan_state", "a/u/s/agent")).fetchone()
        return (time.perf_counter() - start) / n


async def bench_gate(folder: Path, rounds: int = 7, n: int = 3000) -> dict[str, float]:
    """The installed hook (plan state read + decision) for a read-only tool while
    planning and with no plan, beside a raw point read; rounds interleave, best kept."""
    from plangate.adk.callbacks import make_gate
    from plangate.adk.runtime import PlanRuntime
    from plangate.adk.scope import PlanScope

    runtime = PlanRuntime(PlanOptions(database_url=f"sqlite:///{folder / 'gate.db'}"), "agent")
    planning_scope = PlanScope("a", "u", "planning", "agent")
    loaded = await runtime.load(planning_scope)
    entered = t.force_enter(None, objective="x", now=0.0)
    await runtime.commit(
        planning_scope, loaded, loaded.state.model_copy(update={"record": entered.record})
    )

    class _Session:
        app_name, user_id = "a", "u"

        def __init__(self, session_id: str) -> None:
            self.id = session_id

    class _Context:
        state: ClassVar[dict] = {}
        agent_name = "agent"

        def __init__(self, session_id: str) -> None:
            self.session = _Session(session_id)

    gate = make_gate(runtime)
    tool = FunctionTool(lookup)
    raw = _RawPointRead(folder)
    best: dict[str, float] = {}

    async def timed(context: _Context) -> float:
        assert await gate(tool, {"key": "k"}, context) is None
        start = time.perf_counter()
        for _ in range(n):
            await gate(tool, {"key": "k"}, context)
        return (time.perf_counter() - start) / n

    for _ in range(rounds):
        figures = {
            "point": raw.time(n),
            "planning": await timed(_Context("planning")),
            "no_plan": await timed(_Context("none")),
        }
        for name, value in figures.items():
            best[name] = min(best.get(name, value), value)
    return best


def bench_set_lookup(n: int = 200_000) -> float:
    """The floor of a pure decision: one frozenset membership test, same loop shape."""
    names = frozenset({"Write", "Edit"})
    calls = ["Write", "Read"]
    start = time.perf_counter()
    for i in range(n):
        calls[i % 2] in names  # noqa: B015
    return (time.perf_counter() - start) / n


class HookTimer:
    """Time spent inside what ``setup_plan`` installed, measured where it runs: the step
    boundary, the gate, the plugin's callbacks, the plan toolset and its tools'
    declarations. Ends-to-end turn times on a shared machine are too noisy to show a
    fraction of a millisecond; this is the cost itself."""

    def __init__(self) -> None:
        self.total = 0.0
        self.by_hook: dict[str, float] = {}

    def _add(self, name: str, seconds: float) -> None:
        self.total += seconds
        self.by_hook[name] = self.by_hook.get(name, 0.0) + seconds

    def wrap(self, fn, name: str = ""):  # type: ignore[no-untyped-def]
        name = name or getattr(fn, "__name__", "hook")
        if inspect.iscoroutinefunction(fn):

            async def timed_async(*args, **kwargs):  # type: ignore[no-untyped-def]
                start = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self._add(name, time.perf_counter() - start)

            return timed_async

        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._add(name, time.perf_counter() - start)

        return timed

    def install(self, agent: LlmAgent, runner: Runner) -> None:
        from plangate.adk.boundary import boundary_of
        from plangate.adk.plugin import PlanPlugin
        from plangate.adk.tools import PlanToolSet

        callbacks = agent.before_model_callback
        assert isinstance(callbacks, list)
        agent.before_model_callback = [self.wrap(c) for c in callbacks]
        boundary = boundary_of(agent)
        assert boundary is not None
        boundary.checks = [(order, self.wrap(check)) for order, check in boundary.checks]
        for toolset in agent.tools:
            if isinstance(toolset, PlanToolSet):
                toolset.get_tools = self.wrap(toolset.get_tools)  # type: ignore[method-assign]
                for tool in toolset._tools:
                    tool.process_llm_request = self.wrap(  # type: ignore[method-assign]
                        tool.process_llm_request, "plan tool declarations"
                    )
        for plugin in runner.plugin_manager.plugins:
            if isinstance(plugin, PlanPlugin):
                for name in ("on_event_callback", "on_user_message_callback"):
                    setattr(plugin, name, self.wrap(getattr(plugin, name)))


async def bench_long_session(
    turns: int, folder: Path, state: dict | None, plan_tools: bool = False, sessions: str = "adk"
) -> dict[str, float]:
    """The cost ``setup_plan`` adds per turn at turns 6-15 of a session and at the last 10
    of ``turns``, measured side by side.

    One session is driven to ``turns - 10`` turns first. Then a new session's first 15
    turns and the long one's last 10 alternate, turn by turn, in the same process: the
    two differ only in the session's length, not in when they ran on a shared machine
    (measured one after the other, a neighbour's burst lands in one of them).

    ``plan_tools``: the first turn of each session writes the plan with
    ``update_plan_content``, so from then on every step matches the history's calls and
    replies to their ids. ``sessions``: who keeps the ADK sessions in the same SQLite
    file (``build_runner``'s choice)."""
    model = ScriptedLlm()
    agent = setup_plan(LlmAgent(name="agent", model=model, tools=[lookup]), PlanOptions())
    runner = build_runner(
        agent,
        database_url=f"sqlite:///{folder / f'long-{sessions}.db'}",
        app_name="long",
        sessions=sessions,  # type: ignore[arg-type]
    )
    timer = HookTimer()
    timer.install(agent, runner)

    async def new_session() -> str:
        created = await runner.session_service.create_session(
            app_name=runner.app_name, user_id="u", state=state
        )
        return created.id

    async def turn(session_id: str, index: int) -> float:
        if plan_tools and index == 0:
            model.add([call("update_plan_content", content="1. look things up")], [text("ok")])
        else:
            model.add([call("lookup", key="k")], [text("ok")])
        before = timer.total
        message = types.Content(role="user", parts=[types.Part(text=f"turn {index}")])
        async for _ in runner.run_async(user_id="u", session_id=session_id, new_message=message):
            pass
        return timer.total - before

    long_id = await new_session()
    for index in range(turns - 10):
        await turn(long_id, index)
    timer.by_hook.clear()
    fresh_id = await new_session()
    early: list[float] = []
    late: list[float] = []
    for index in range(15):
        spent = await turn(fresh_id, index)
        if index >= 5:  # the first turns open the store and build declarations
            early.append(spent)
            late.append(await turn(long_id, turns - 15 + index))
    print(
        "    per turn by hook: "
        + ", ".join(f"{k} {v / 20 * 1e3:.3f} ms" for k, v in sorted(timer.by_hook.items()))
    )
    return {
        "early": min(early),
        "late": min(late),
        "early_median": statistics.median(early),
        "late_median": statistics.median(late),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--long", type=int, default=0, help="also time setup_plan's hooks over a session this long"
    )
    args = parser.parse_args()
    if 0 < args.long < 15:
        parser.error("--long needs at least 15 turns: it compares turns 6-15 with the last 10")
    # A line logged per model call would land in the timed turns (and flood the output).
    quiet_adk_logs()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pure = min(bench_pure_decision() for _ in range(5))
        floor = min(bench_set_lookup() for _ in range(5))
        gate = asyncio.run(bench_gate(folder))
        turns = asyncio.run(bench_turns(args.turns, folder)) if args.turns else None
        long = (
            {
                f"{name}, {sessions} sessions": asyncio.run(
                    bench_long_session(args.long, folder, state, plan_tools, sessions)
                )
                for sessions in ("plangate", "adk")
                for name, state, plan_tools in (
                    ("no plan", None, False),
                    ("planning", {"agent_mode": "plan"}, False),
                    ("planning, plan written", {"agent_mode": "plan"}, True),
                )
            }
            if args.long
            else {}
        )
    check, point = gate["planning"], gate["point"]
    print(
        f"(a) pure gate decision:           {pure * 1e6:8.2f} µs (set lookup {floor * 1e6:.2f} µs)"
    )
    print(f"    gate via installed hook:      {check * 1e6:8.1f} µs planning (read-only tool)")
    print(f"                                  {gate['no_plan'] * 1e6:8.1f} µs no plan")
    print(f"    raw sqlite3 point read:       {point * 1e6:8.1f} µs (floor, same run)")
    print(f"    gate / point read:            {check / point:8.2f} planning (goal <= 2)")
    print(f"                                  {gate['no_plan'] / point:8.2f} no plan")
    for name, figures in long.items():
        print(
            f"(c) setup_plan's own hooks, {name}: turn 6-15 {figures['early'] * 1e3:.3f} ms "
            f"(median {figures['early_median'] * 1e3:.3f}), last 10 of {args.long} "
            f"{figures['late'] * 1e3:.3f} ms (median {figures['late_median'] * 1e3:.3f}, "
            f"{figures['late_median'] / figures['early_median']:.2f}x); "
            "goal <= 0.3 ms, same early and late"
        )
    if turns is None:
        return
    per_turn = turns["plain"]
    print(f"    boundary check / plain turn:  {check / per_turn:8.4f}")
    print(f"(b) {args.turns} turns, scripted model, one tool call per turn")
    print(f"    plain agent:                  {per_turn * 1e3:8.2f} ms/turn")
    print(
        f"    with setup_plan, no plan:     {turns['plan_mode_idle'] * 1e3:8.2f} ms/turn "
        f"(ratio {turns['plan_mode_idle'] / per_turn:.2f})"
    )
    print(
        f"    with setup_plan, planning:    {turns['plan_mode_planning'] * 1e3:8.2f} ms/turn "
        f"(ratio {turns['plan_mode_planning'] / per_turn:.2f})"
    )


if __name__ == "__main__":
    main()
