"""The reference coding agent: workspace tools, sub-agents, todos, all under Plan Mode."""

from __future__ import annotations

from pathlib import Path

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm

from plangate.adk import PlanOptions, setup_plan
from plangate.agent.todos import todo_write_tool
from plangate.agent.workspace import Workspace, workspace_tools

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
) -> LlmAgent:
    tools: list = [*workspace_tools(Workspace(workspace)), todo_write_tool(name)]
    try:
        from plangate.agent.subagents import subagent_tools
    except ImportError:  # sub-agents are optional for the agent to work
        pass
    else:
        tools.extend(subagent_tools(tools))
    agent = LlmAgent(name=name, model=model, instruction=INSTRUCTION, tools=tools)
    return setup_plan(agent, options or PlanOptions())
