"""The reference agent of ``plangate chat`` / ``plangate serve`` -- the coding agent with
the data tools under protocol governance -- plays both offline demos in ONE session:
first the planned code fix, then the data analysis, whose new task replaces the coding
task in the session intent."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import agreeing_reply
from plangate.adk.protocols import get_protocol_state
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.data import DataCatalog
from plangate.models.demo import DemoModel
from plangate.models.demo_data import quarter_sql
from plangate.plan import PlanStatus
from test_data_demo import direct, reported


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


async def run(session: PlanSession, message) -> str:
    texts = []
    async for event in session.run(message):
        for part in (event.content.parts if event.content else []) or []:
            if part.text:
                texts.append(part.text)
    return texts[-1] if texts else ""


async def test_code_fix_then_data_analysis_in_one_session(
    tmp_path: Path, database_url: str, catalog: DataCatalog
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    agent = build_coding_agent(workspace, DemoModel(), data=catalog)
    session = await PlanSession.open(build_runner(agent, database_url=database_url))

    await run(session, "Fix the failing test")
    while pending := await session.pending():
        answer = await run(session, agreeing_reply(pending[0]))
    assert "5 passed" in answer
    assert (await session.record()).status is PlanStatus.APPROVED
    assert "if quantity > on_hand:\n" in (workspace / "inventory" / "stock.py").read_text()

    answer = await run(session, "revenue by region last quarter")
    state = get_protocol_state(await session.session(), agent.name)
    assert answer.startswith("DATA_ACTIONS_REJECTED_BY_PROTOCOL")
    assert state["run_status"] == "failed"
    assert state["intent"]["text"] == "revenue by region last quarter"
    assert state["route"]["task_relation"] == "replace"

    answer = await run(session, "try again")
    state = get_protocol_state(await session.session(), agent.name)
    assert state["protocol"] == "data-analysis" and state["run_status"] == "completed"
    expected = {region: float(v) for region, v in direct(catalog, quarter_sql(), tmp_path)}
    assert reported(answer) == expected

    answer = await run(session, "break it down by month")
    state = get_protocol_state(await session.session(), agent.name)
    assert state["intent"]["change_kind"] == "refine"
    assert len(reported(answer)) == 15
