"""The reference data-analysis agent: DuckDB data tools under protocol governance and,
optionally, Plan Mode; and ``add_data_analysis`` to give another agent (the coding agent)
the same tools and governance."""

from __future__ import annotations

from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.protocols import ProtocolOptions, setup_protocols
from plangate.data import REVENUE_DEFINITION, DataCatalog, DataTools, data_adk_tools

__all__ = ["DATA_AGENT_NAME", "DATA_INSTRUCTION", "add_data_analysis", "build_data_agent"]

DATA_AGENT_NAME = "analyst"

DATA_INSTRUCTION = f"""You are a careful data analyst. Answer questions about the registered
data sources with the data tools: list_data_sources, inspect_schema (read the table and
column comments: they define the metrics), lookup_values (learn exact codes before
filtering), plan_query, run_sql_readonly, validate_result and bind_evidence. Aggregate in
SQL, validate every result before using it, and bind the rows behind each number you
report. Only report numbers that came out of a query in this conversation.
Sample data definition: {REVENUE_DEFINITION}"""


def build_data_agent(
    model: BaseLlm | str,
    catalog: DataCatalog | None = None,
    *,
    plan: bool = True,
    protocols: bool = True,
    workspace: str | Path | None = None,
    plan_options: PlanOptions | None = None,
    protocol_options: ProtocolOptions | None = None,
    name: str = DATA_AGENT_NAME,
) -> LlmAgent:
    """The data tools (+ workspace tools when ``workspace`` is given), protocol
    governance and Plan Mode. Plan Mode is mounted first; the two share the one
    authorization boundary, where a plan deny wins."""
    tools: list = list(data_adk_tools(DataTools(catalog)))
    instruction = DATA_INSTRUCTION
    if workspace is not None:
        from plangate.agent.workspace import Workspace, workspace_tools

        tools = [*workspace_tools(Workspace(workspace)), *tools]
        instruction += "\nYou can also read and change files in the project folder."
    agent = LlmAgent(name=name, model=model, instruction=instruction, tools=tools)
    if plan:
        setup_plan(agent, plan_options or PlanOptions())
    if protocols:
        setup_protocols(agent, protocol_options or ProtocolOptions())
    return agent


def add_data_analysis(
    agent: LlmAgent,
    catalog: DataCatalog | None = None,
    *,
    options: ProtocolOptions | None = None,
) -> LlmAgent:
    """Give an existing agent (e.g. ``build_coding_agent(...)``) the data tools and
    protocol governance: its own tools become the protocols' common actions, the data
    tools are governed by the data-analysis phases."""
    agent.tools = [*agent.tools, *data_adk_tools(DataTools(catalog))]
    if isinstance(agent.instruction, str):
        agent.instruction = f"{agent.instruction}\n\n{DATA_INSTRUCTION}"
    return setup_protocols(agent, options or ProtocolOptions())
