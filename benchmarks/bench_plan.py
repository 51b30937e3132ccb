"""Plan Mode overhead, measured in one run and reported as ratios.

    python benchmarks/bench_plan.py [--turns 200]

(a) one gate decision: the pure decision, and the full boundary check (plan state read
    from SQLite + decision), against a plain ADK tool call of the same run;
(b) per-turn overhead: the same agent with and without ``setup_plan``, driven through the
    real Runner by a scripted model (one tool call + one answer per turn).
The machine is shared and noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import DatabaseSessionService
from google.genai import types

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


async def bench_boundary_check(folder: Path, n: int = 300) -> float:
    from plangate.adk.callbacks import make_gate
    from plangate.adk.runtime import PlanRuntime

    runtime = PlanRuntime(PlanOptions(database_url=f"sqlite:///{folder / 'gate.db'}"), "agent")

    class _Session:
        app_name, user_id, id = "a", "u", "s"

    class _Context:
        session = _Session()
        state: ClassVar[dict] = {}
        agent_name = "agent"

    class _Tool:
        name = "lookup"

    gate = make_gate(runtime)
    await gate(_Tool(), {}, _Context())
    start = time.perf_counter()
    for _ in range(n):
        await gate(_Tool(), {"key": "k"}, _Context())
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pure = statistics.median(bench_pure_decision() for _ in range(3))
        check = asyncio.run(bench_boundary_check(folder))
        turns = asyncio.run(bench_turns(args.turns, folder))
    per_turn = turns["plain"]
    print(f"(a) pure gate decision:           {pure * 1e6:8.2f} µs")
    print(f"    boundary check (SQLite read): {check * 1e6:8.1f} µs")
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
