"""The protocol phase is part of the one authority of a call (invariant 10).

The plan gate computes the call's authority; the protocol boundary adds the phase in
force to it and decides through it, so the executor that then runs sees the same plan
state and the same phase. Through the real ADK Runner with a scripted model and the real
data tools on the sample DuckDB data; a data tool called around the boundary asks that
authority too and does nothing in a phase that does not allow it.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.agents import LlmAgent

from harness import Harness, tool_results
from plangate.adk import PlanOptions, setup_plan
from plangate.adk.protocols import ProtocolOptions, setup_protocols
from plangate.data import DataCatalog, DataTools, data_adk_tools
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.authority import Authority, ProtocolGrant, current_authority, use_authority
from plangate.policy.effects import read_only
from plangate.protocol import DATA_ANALYSIS_REF
from plangate.protocol.definitions import segment_id_for, start_segment
from protocol_support import ScriptedClassifier, classification

SEEN: list[dict[str, Any]] = []


@read_only
def show_authority() -> dict[str, Any]:
    """Report the authority this call runs under."""
    authority = current_authority()
    seen = {
        "authority": authority is not None,
        "planning": authority.planning if authority else None,
        "phase": authority.protocol.phase if authority and authority.protocol else None,
    }
    SEEN.append(seen)
    return seen


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


async def test_the_executor_sees_the_phase_the_boundary_decided_in(
    database_url: str, catalog: DataCatalog
) -> None:
    SEEN.clear()
    model = ScriptedLlm()
    agent = LlmAgent(
        name="analyst",
        model=model,
        instruction="You analyse data.",
        tools=[*data_adk_tools(DataTools(catalog)), show_authority],
    )
    setup_plan(agent, PlanOptions())
    analysis = classification("data-analysis", "replace", confidence=0.95)
    setup_protocols(agent, ProtocolOptions(classifier=ScriptedClassifier(analysis)))
    harness = Harness(agent, database_url)
    await harness.start()
    model.add(
        [call("show_authority")],
        [call("list_data_sources"), call("inspect_schema", source="sample")],
        [call("show_authority")],
        [text("ok")],
    )
    events = await harness.send("analyze revenue by region")
    assert tool_results(events, "list_data_sources")[0].get("error") is None
    first, second = SEEN
    assert first == {"authority": True, "planning": False, "phase": "scope"}
    # The phase moved with the recorded calls; the next call's authority carries it.
    assert second["phase"] == "semantic_grounding"


def _authority_in(phase: str) -> Authority:
    state = start_segment(DATA_ANALYSIS_REF, segment_id_for("run-1"))
    return Authority(
        planning=False,
        protocol=ProtocolGrant(state.model_copy(update={"phase": phase})),
    )


async def test_a_data_tool_called_around_the_boundary_asks_the_phase(
    catalog: DataCatalog,
) -> None:
    tools = {t.name: t for t in data_adk_tools(DataTools(catalog))}
    run_sql = tools["run_sql_readonly"].func
    with use_authority(_authority_in("scope")):
        refused = await run_sql(source="sample", sql="SELECT 1 AS one")
    assert refused["code"] == "ACTION_NOT_ALLOWED_IN_PHASE"
    assert refused["phase"] == "scope" and refused["execution_status"] == "not_started"
    assert "rows" not in refused
    # Under no protocol (a host without protocol governance) the query runs.
    with use_authority(Authority(planning=False)):
        plain = await run_sql(source="sample", sql="SELECT 1 AS one")
    assert "error" not in plain
