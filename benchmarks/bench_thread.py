"""A thread as it grows: what a turn costs at its start and after many turns.

    python benchmarks/bench_thread.py [--turns 300]

Three threads advance together, a turn each in turn (one tool call and one answer per
turn, a scripted model, the real ``Runner``), so a neighbour's burst lands on all three:

- bare ADK on ADK's in-memory sessions (its ``get_session`` deep-copies the thread);
- bare ADK on plangate's ``StoreSessionService`` (SQLite);
- Plan Mode: ``setup_plan`` and ``build_runner``, on plangate's sessions.

Printed: the median CPU of turns 6-15 and of the last 10, and each beside bare ADK
in memory at the same turns. Every turn reads the whole thread back (ADK's runner starts
with ``get_session``), and ADK builds the model's request from all of it, so a turn
costs more as the thread grows on any store. Then the cost of reading the thread back,
per event: by a service that never read it (every event decoded) and again by the same
one (events it decoded before are copied, not decoded). The machine is shared and noisy:
compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_plan import lookup
from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from served_support import quiet_adk_logs

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.runner import build_runner
from plangate.adk.session_service import StoreSessionService
from plangate.models.scripted import ScriptedLlm, call, text


class Thread:
    def __init__(self, name: str, runner: Runner, model: ScriptedLlm) -> None:
        self.name = name
        self.runner = runner
        self.model = model
        self.session_id = ""
        self.cpu: list[float] = []

    async def open(self) -> None:
        session = await self.runner.session_service.create_session(
            app_name=self.runner.app_name, user_id="u"
        )
        self.session_id = session.id

    async def turn(self, n: int) -> None:
        self.model.add([call("lookup", key=f"k{n}")], [text("ok")])
        message = types.Content(role="user", parts=[types.Part(text=f"turn {n}")])
        start = time.process_time()
        async for _ in self.runner.run_async(
            user_id="u", session_id=self.session_id, new_message=message
        ):
            pass
        self.cpu.append(time.process_time() - start)


def _threads(folder: Path) -> list[Thread]:
    threads = []
    for name, service in (
        ("bare ADK, in-memory sessions", InMemorySessionService()),
        ("bare ADK, plangate sessions", StoreSessionService(f"sqlite:///{folder / 'bare.db'}")),
    ):
        model = ScriptedLlm()
        agent = LlmAgent(name="agent", model=model, tools=[lookup])
        threads.append(
            Thread(name, Runner(app_name="t", agent=agent, session_service=service), model)
        )
    model = ScriptedLlm()
    agent = setup_plan(LlmAgent(name="agent", model=model, tools=[lookup]), PlanOptions())
    runner = build_runner(agent, database_url=f"sqlite:///{folder / 'plan.db'}", app_name="t")
    threads.append(Thread("Plan Mode, plangate sessions", runner, model))
    return threads


async def _read_back(thread: Thread, folder: Path) -> tuple[float, float, int]:
    """Seconds per event to read the thread back: fresh service, then the same again."""
    url = f"sqlite:///{folder / 'plan.db'}"
    service: Any = StoreSessionService(url)
    spent, events = [], 0
    for _ in range(2):
        start = time.perf_counter()
        session = await service.get_session(
            app_name=thread.runner.app_name, user_id="u", session_id=thread.session_id
        )
        spent.append(time.perf_counter() - start)
        assert session is not None
        events = len(session.events)
    return spent[0] / events, spent[1] / events, events


async def main(turns: int) -> None:
    quiet_adk_logs()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        threads = _threads(folder)
        for thread in threads:
            await thread.open()
        for n in range(turns):
            for thread in threads:
                await thread.turn(n)
        base = threads[0]
        print(f"CPU per turn, one tool call per turn, {turns} turns (ratio: over {base.name})")
        for thread in threads:
            figures = []
            early = slice(min(5, turns // 2), min(15, turns))
            late = slice(max(turns - 10, 0), None)
            for name, part in (("turns 6-15", early), ("last 10", late)):
                mine = statistics.median(thread.cpu[part]) * 1e3
                ratio = statistics.median(
                    a / b for a, b in zip(thread.cpu[part], base.cpu[part], strict=True)
                )
                figures.append(f"{name} {mine:7.2f} ms ({ratio:4.2f}x)")
            print(f"  {thread.name:<32} " + "   ".join(figures))
        fresh, again, events = await _read_back(threads[2], folder)
        print(
            f"reading the Plan Mode thread back ({events} events): {fresh * 1e6:.1f} us/event "
            f"decoded, {again * 1e6:.1f} us/event kept ({again / fresh:.2f}x)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    asyncio.run(main(parser.parse_args().turns))
