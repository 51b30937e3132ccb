"""Nothing blocks the event loop: the server answers /health while a long DuckDB query
of a run is still going, and a long shell command is parsed on a worker thread (no
timing thresholds: each is shown by what happened first)."""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import httpx
from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool

from plangate.adk import setup_plan
from plangate.adk.runner import build_runner
from plangate.data import DataCatalog, DataTools
from plangate.data.adk_tools import data_adk_tools
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.web.server import create_app
from web_support import run_input, user_message

BASE = "http://127.0.0.1"
# Runs far longer than its time limit, so it always ends by the catalog interrupting it.
ENDLESS = "SELECT count(*) AS n FROM range(1000000000000) t(x) WHERE x % 7 = 3"


async def test_health_answers_while_a_long_query_of_a_run_is_running(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    ended: list[dict[str, Any]] = []
    tools = DataTools(DataCatalog(cache_dir=tmp_path / "data"))
    original = tools.run_sql_readonly

    @functools.wraps(original)
    def watched(*args: Any, **kwargs: Any) -> dict[str, Any]:
        loop.call_soon_threadsafe(started.set)
        result = original(*args, **kwargs)
        ended.append(result)
        return result

    tools.run_sql_readonly = watched  # type: ignore[method-assign]
    model = ScriptedLlm()
    model.add([call("run_sql_readonly", source="sample", sql=ENDLESS, timeout_s=3)], [text("done")])
    agent = setup_plan(LlmAgent(name="orchestrator", model=model, tools=data_adk_tools(tools)))
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'loop.db'}")
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        run = asyncio.create_task(
            http.post("/api/agent", json=run_input("t-long", messages=[user_message("count")]))
        )
        await asyncio.wait_for(started.wait(), 120)
        health = await http.get("/health")
        assert health.status_code == 200
        assert ended == []  # answered while the query was still running
        response = await asyncio.wait_for(run, 120)
    assert response.status_code == 200
    assert len(ended) == 1 and "QUERY_TIMEOUT" in str(ended[0])


def _judging_elsewhere() -> bool:
    """Whether a thread other than this one is inside the shell parser right now."""
    from plangate.policy.shell import classify_command

    target = classify_command.__code__
    here = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        while ident != here and frame is not None:
            if frame.f_code is target:
                return True
            frame = frame.f_back
    return False


async def test_the_shell_check_of_a_long_command_runs_off_the_event_loop(tmp_path: Path) -> None:
    from plangate.adk.callbacks import make_gate
    from plangate.adk.options import PlanOptions
    from plangate.adk.runtime import PlanRuntime
    from plangate.adk.scope import PlanScope
    from plangate.plan.transitions import force_enter
    from plangate.policy.effects import Effect, declare_effect

    def Bash(command: str) -> dict:
        """Run a command."""
        return {"ran": command}

    class _Session:
        app_name, user_id, id = "app", "u", "s"

    class _Context:
        agent_name = "agent"
        session = _Session()
        state: ClassVar[dict[str, Any]] = {}

    runtime = PlanRuntime(PlanOptions(database_url=f"sqlite:///{tmp_path / 'g.db'}"), "agent")
    scope = PlanScope("app", "u", "s", "agent")
    loaded = await runtime.load(scope)
    entered = force_enter(None, objective="look", now=0.0).record
    await runtime.commit(scope, loaded, loaded.state.model_copy(update={"record": entered}))
    gate = make_gate(runtime)
    tool = FunctionTool(declare_effect(Bash, Effect.SHELL))
    check = asyncio.create_task(gate(tool, {"command": "echo " + "a" * 400_000}, _Context()))
    seen = False
    while not check.done() and not seen:
        await asyncio.sleep(0.001)
        seen = _judging_elsewhere()
    assert seen, "the command was judged on the event loop's thread"
    assert await check is None  # proven read-only: it runs, even while planning
