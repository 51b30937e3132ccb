"""The offline data-analysis demo through the real ADK Runner on the shipped DuckDB data:
routing, the completion gate, inheritance with a handoff, and a refinement -- with the
numbers in the answers checked against a direct SQL query."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest

from harness import Harness, final_text, tool_results
from plangate.adk.protocols import get_protocol_state
from plangate.agent.data_agent import build_data_agent
from plangate.data import DataCatalog
from plangate.models.demo import DemoModel
from plangate.models.demo_data import quarter_sql


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


def direct(catalog: DataCatalog, sql: str, tmp_path: Path) -> list[tuple]:
    """The query on a plain DuckDB connection to a copy of the file, outside the
    catalog and its tools (DuckDB will not open one file twice with other settings)."""
    copy = tmp_path / "direct.duckdb"
    if not copy.exists():
        shutil.copy(catalog.source("sample").path, copy)
    connection = duckdb.connect(str(copy), read_only=True)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def reported(answer: str) -> dict[str, float]:
    return {
        label: float(value.replace(",", ""))
        for label, value in re.findall(r"^- (.+): ([\d,]+\.\d\d)$", answer, re.MULTILINE)
    }


async def test_the_data_demo_routes_gates_hands_off_and_refines(
    database_url: str, catalog: DataCatalog, tmp_path: Path
) -> None:
    agent = build_data_agent(DemoModel(), catalog)
    h = Harness(agent, database_url)
    await h.start()

    # 1. An unsure classifier routes to general-task; the refused data call fails the run.
    events = await h.send("revenue by region last quarter")
    assert final_text(events).startswith("DATA_ACTIONS_REJECTED_BY_PROTOCOL")
    state = get_protocol_state(await h.session(), agent.name)
    assert state["protocol"] == "general-task" and state["run_status"] == "failed"
    assert state["route"]["source"] == "default"
    assert state["intent"]["text"] == "revenue by region last quarter"

    # 2. "try again" inherits the task, hands off to data-analysis and does the work.
    events = await h.send("try again")
    state = get_protocol_state(await h.session(), agent.name)
    assert state["route"]["reason_codes"] == ["SESSION_INTENT_INHERITED"]
    assert tool_results(events, "protocol_handoff")[0]["status"] == "accepted"
    assert state["protocol"] == "data-analysis" and state["run_status"] == "completed"
    assert state["intent"]["change_kind"] == "handoff"
    assert len(state["handoffs"]) == 1
    # The requirements extracted from the task, each reported by the agent as met.
    [report] = tool_results(events, "analysis_requirements_commit")
    assert report["requirements"] == {
        "metric:revenue": "satisfied",
        "dimension:region": "satisfied",
        "time:last-quarter": "satisfied",
    }
    answer = final_text(events)
    assert answer.startswith("[demo] Completed revenue by region, 2026-Q3")
    expected = {
        region: float(revenue) for region, revenue in direct(catalog, quarter_sql(), tmp_path)
    }
    assert reported(answer) == expected
    assert expected == {
        "North": 97979.81,
        "East": 95016.68,
        "South": 83800.54,
        "West": 71066.94,
        "Central": 30216.51,
    }

    # 3. "break it down by month" refines the recorded task.
    events = await h.send("break it down by month")
    state = get_protocol_state(await h.session(), agent.name)
    assert state["route"]["source"] == "classifier"
    assert state["route"]["task_relation"] == "refine"
    assert state["intent"]["change_kind"] == "refine"
    assert "break it down by month" in state["intent"]["text"]
    assert state["run_status"] == "completed"
    monthly = reported(final_text(events))
    rows = direct(catalog, quarter_sql(by_month=True), tmp_path)
    assert monthly == {f"{region} {month}": float(revenue) for region, month, revenue in rows}
    assert len(monthly) == 15
    for region, total in expected.items():
        months = [v for k, v in monthly.items() if k.startswith(region + " ")]
        assert sum(months) == pytest.approx(total, abs=0.05)
