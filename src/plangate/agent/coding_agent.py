"""The reference coding agent: workspace tools, sub-agents, todos, all under Plan Mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm

from plangate.adk import PlanOptions, setup_plan
from plangate.agent.todos import todo_write_tool
from plangate.agent.workspace import Workspace, workspace_tools

if TYPE_CHECKING:
    from plangate.data import DataCatalog

__all__ = ["AGENT_NAME", "build_coding_agent"]

AGENT_NAME = "orchestrator"

INSTRUCTION = """You are a careful software engineer working in the project folder you were
given. Use the tools to read and change files and to run commands there. Keep the user
informed in short sentences. After a plan is approved, track its steps with todo_write and
mark them completed as you go."""


def build_coding_agent(
    workspace: str | Path,
    model: BaseLlm | str,
    *,
    options: PlanOptions | None = None,
    name: str = AGENT_NAME,
    data: DataCatalog | None = None,
    allow_network: bool = False,
    policy_file: str | Path | None = None,
) -> LlmAgent:
    """The coding agent under Plan Mode; given a data catalog, also the data tools under
    protocol governance (the reference agent of ``plangate chat`` and ``plangate serve``).

    ``allow_network`` lets its shell commands reach the network once a plan is approved
    (never while planning). ``policy_file`` (default: the workspace's
    ``.plangate/policy.toml`` when there is one) rules the tools that are not plangate's."""
    tools: list = [
        *workspace_tools(Workspace(workspace), allow_network=allow_network),
        todo_write_tool(name),
    ]
    try:
        from plangate.agent.subagents import subagent_tools
    except ImportError:  # sub-agents are optional for the agent to work
        pass
    else:
        tools.extend(subagent_tools(tools))
    agent = LlmAgent(name=name, model=model, instruction=INSTRUCTION, tools=tools)
    options = options or PlanOptions()
    if policy_file is None and options.policy_file is None:
        default = Path(workspace) / ".plangate" / "policy.toml"
        policy_file = default if default.is_file() else None
    if policy_file is not None:
        options = dataclasses.replace(options, policy_file=policy_file)
    if options.workspace is None:
        # The paths of host, policy-file and MCP tools are this workspace's.
        options = dataclasses.replace(options, workspace=workspace)
    setup_plan(agent, options)
    if data is not None:
        from plangate.agent.data_agent import add_data_analysis

        add_data_analysis(agent, data)
    return agent
