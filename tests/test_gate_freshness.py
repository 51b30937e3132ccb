"""The gate's cached plan state is never stale: a write by another process, or a row
rewritten in place, is seen by the very next check through the installed hook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import update

from plangate.adk.callbacks import make_gate
from plangate.adk.options import PlanOptions
from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.plan.session_state import read_stored
from plangate.plan.transitions import force_enter
from plangate.policy.effects import Effect, declare_effect
from plangate.store.schema import documents
from plangate.store.shared import shared_store

HERE = Path(__file__).parent
SCOPE = PlanScope("app", "u", "s", "agent")


def save(content: str) -> dict:
    """Save content."""
    return {"saved": content}


WRITE_TOOL = declare_effect(save, Effect.WRITE)


class _Tool:
    name = "save"

    def __init__(self) -> None:
        self.func = WRITE_TOOL


class _Session:
    app_name, user_id, id = SCOPE.app_name, SCOPE.user_id, SCOPE.session_id


class _Context:
    """The part of ADK's ToolContext the gate reads."""

    agent_name = "agent"

    def __init__(self) -> None:
        self.session = _Session()
        self.state: dict[str, Any] = {}


def _other_process(database_url: str, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "plan_process.py"), "set-mode", database_url, SCOPE.key, mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


async def test_a_write_by_another_process_is_seen_by_the_very_next_check(
    database_url: str,
) -> None:
    runtime = PlanRuntime(PlanOptions(database_url=database_url), SCOPE.branch)
    gate = make_gate(runtime)
    for _ in range(2):
        # Twice, so the second check is answered from the cache.
        assert await gate(_Tool(), {"content": "x"}, _Context()) is None
        assert await gate(_Tool(), {"content": "x"}, _Context()) is None
        assert _other_process(database_url, "plan")["status"] == "exploring"
        refusal = await gate(_Tool(), {"content": "x"}, _Context())
        assert refusal is not None and refusal["error"].startswith("PLAN_MODE_GATE")
        assert await gate(_Tool(), {"content": "x"}, _Context()) == refusal
        assert _other_process(database_url, "off")["status"] == "cancelled"
    assert await gate(_Tool(), {"content": "x"}, _Context()) is None


async def test_a_row_rewritten_in_place_without_a_new_version_is_seen(database_url: str) -> None:
    runtime = PlanRuntime(PlanOptions(database_url=database_url), SCOPE.branch)
    gate = make_gate(runtime)
    loaded = await runtime.load(SCOPE)
    await runtime.commit(SCOPE, loaded, loaded.state)
    assert await gate(_Tool(), {"content": "x"}, _Context()) is None
    planning = loaded.state.model_copy(
        update={"record": force_enter(None, objective="edited", now=1.0).record}
    )
    store = await shared_store(database_url)
    async with store.transaction() as tx:
        await tx.connection.execute(
            update(documents)
            .where(documents.c.kind == "plan_state", documents.c.key == SCOPE.key)
            .values(data=planning.model_dump(mode="json", by_alias=True))
        )
    refusal = await gate(_Tool(), {"content": "x"}, _Context())
    assert refusal is not None and refusal["error"].startswith("PLAN_MODE_GATE")


async def test_a_state_read_is_a_copy_the_caller_may_change(database_url: str) -> None:
    """PlanSession hands out copies; the cache keeps what the database holds."""
    from google.adk.agents import LlmAgent

    from plangate.adk.runner import build_runner
    from plangate.adk.session import PlanSession
    from plangate.adk.setup import setup_plan
    from plangate.models.scripted import ScriptedLlm

    agent = setup_plan(LlmAgent(name="agent", model=ScriptedLlm()), PlanOptions())
    runner = build_runner(agent, database_url=database_url, app_name="copies")
    session = await PlanSession.open(runner, state={"agent_mode": "plan"})
    await session.select_plan()
    state = await session.plan_state()
    state.selection = "tampered"
    assert (await session.plan_state()).selection != "tampered"


async def test_a_state_committed_here_is_read_back_as_written(database_url: str) -> None:
    """The state a commit wrote is what the next load gives, without decoding the row
    again on SQLite; a state the load would call corrupt is still reported corrupt."""
    runtime = PlanRuntime(PlanOptions(database_url=database_url), SCOPE.branch)
    loaded = await runtime.load(SCOPE)
    planning = loaded.state.model_copy(
        update={"record": force_enter(None, objective="kept", now=1.0).record, "selection": "plan"}
    )
    version = await runtime.commit(SCOPE, loaded, planning)
    again = await runtime.load(SCOPE)
    assert again.version == version and again.unreadable is None
    store = await shared_store(database_url)
    stored = await store.get("plan_state", SCOPE.key)
    assert stored is not None
    assert again.state == read_stored(stored.data, plan_selection="plan")
    if store.reader is not None:  # SQLite: the committed value itself
        assert again.state is planning
    # Plan Mode applied without a record: never written by plangate's own transitions,
    # and a load reports it corrupt whoever wrote it.
    contradiction = planning.model_copy(update={"record": None})
    await runtime.commit(SCOPE, again, contradiction)
    corrupt = await runtime.load(SCOPE)
    assert corrupt.unreadable == "Plan Mode is applied but there is no plan record"
