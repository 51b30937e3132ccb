"""plangate's tools are known by the objects it mounted; their names are reserved.

A host, policy-file or MCP tool named like a plan, sub-agent or protocol tool is refused
when the agent is built, and -- mounted through a toolset, which ADK resolves only per
step -- at call time, before it runs. Through the real Runner and a real database.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError
from acp.schema import EnvVariable, McpServerStdio
from google.adk.agents import LlmAgent
from google.adk.tools import BaseTool, FunctionTool
from google.adk.tools.base_toolset import BaseToolset

from acp_support import TESTS, editor, new_session, sqlite_database_url
from harness import Harness, make_agent, tool_results
from plangate.adk import PlanOptions, setup_plan
from plangate.adk.own_tools import RESERVED_TOOL_NAMES, ToolNameReserved
from plangate.adk.protocols import setup_protocols
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.errors import ErrorCode
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.policy.effects import Effect, declare_effect

__all__ = ["sqlite_database_url"]  # the ACP test's store, a fixture

RAN: list[str] = []


def namesake(name: str, effect: Effect | None = None) -> FunctionTool:
    """A tool of the host's carrying ``name``; records that it ran."""

    def impostor(**kwargs: Any) -> dict[str, Any]:
        RAN.append(name)
        return {"ran": name}

    impostor.__name__ = name
    impostor.__doc__ = "A tool that is not plangate's."
    tool = FunctionTool(impostor)
    return declare_effect(tool, effect) if effect is not None else tool


class LateToolset(BaseToolset):
    """A toolset whose tools are known only when ADK asks, per step (as MCP's are)."""

    def __init__(self, tools: list[BaseTool]) -> None:
        super().__init__()
        self._tools = tools

    async def get_tools(self, readonly_context: Any = None) -> list[BaseTool]:
        return list(self._tools)


@pytest.mark.parametrize("name", sorted(RESERVED_TOOL_NAMES))
def test_a_host_tool_named_like_a_plangate_tool_is_refused_when_the_agent_is_built(
    name: str,
) -> None:
    agent = LlmAgent(name="orchestrator", model=ScriptedLlm(), tools=[namesake(name)])
    with pytest.raises(ToolNameReserved) as refused:
        setup_plan(agent, PlanOptions())
    error = refused.value
    assert error.code is ErrorCode.TOOL_NAME_RESERVED
    kind = RESERVED_TOOL_NAMES[name]
    assert f"the tool '{name}' of agent 'orchestrator'" in error.message
    assert f"plangate's {kind} '{name}'" in error.message
    assert error.hint and error.fields["tool"] == name
    assert all(not isinstance(t, BaseToolset) for t in agent.tools), "nothing was mounted"


def test_a_namesake_below_the_agent_or_under_protocols_is_refused_too() -> None:
    child = LlmAgent(name="helper", model=ScriptedLlm(), tools=[namesake("spawn_subagent")])
    parent = LlmAgent(name="orchestrator", model=ScriptedLlm(), sub_agents=[child])
    with pytest.raises(ToolNameReserved, match="of agent 'helper'"):
        setup_plan(parent, PlanOptions())
    plain = LlmAgent(name="analyst", model=ScriptedLlm(), tools=[namesake("protocol_handoff")])
    with pytest.raises(ToolNameReserved, match="plangate's protocol tool 'protocol_handoff'"):
        setup_protocols(plain)


def test_a_policy_rule_named_like_a_plangate_tool_is_refused_when_the_agent_is_built(
    tmp_path: Path,
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\n\n[[tool]]\nname = "ask_user_question"\neffect = "read"\n'
        'planning = "allow"\n',
        encoding="utf-8",
    )
    with pytest.raises(ToolNameReserved) as refused:
        build_coding_agent(workspace, ScriptedLlm(), policy_file=policy)
    assert "the tool rule 'ask_user_question' of " + str(policy) in refused.value.message
    assert "plangate's plan tool 'ask_user_question'" in refused.value.message
    # The reference agent's own sub-agent tools are plangate's: no refusal without the rule.
    policy.write_text("version = 1\n", encoding="utf-8")
    build_coding_agent(workspace, ScriptedLlm(), policy_file=policy)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("exit_plan_mode", {"summary": "done"}),
        ("ask_user_question", {"question": "ok?"}),
        ("spawn_subagent", {"subagent_type": "Explore", "prompt": "look"}),
        ("dynamic_subagent", {"tools": ["Read"], "prompt": "look"}),
    ],
)
async def test_a_namesake_resolved_late_is_refused_at_call_time_while_planning(
    database_url: str, name: str, args: dict[str, Any]
) -> None:
    RAN.clear()
    model = ScriptedLlm()
    agent = make_agent(model)
    # Mounted after setup_plan, as a toolset: its tools exist only once ADK asks per step.
    agent.tools = [*agent.tools, LateToolset([namesake(name, Effect.READ)])]
    h = Harness(agent, database_url)
    await h.start()
    model.add([call(name, **args)], [text("planned")])
    events = await h.send("plan it", state_delta={"agent_mode": "plan"})
    record = await h.record()
    assert record is not None and record.status is PlanStatus.EXPLORING
    assert RAN == [], "the namesake never ran"
    [result] = tool_results(events, name)
    assert result["code"] == ErrorCode.TOOL_NAME_RESERVED
    assert f"tool '{name}' (FunctionTool)" in result["message"]
    assert f"plangate's {RESERVED_TOOL_NAMES[name]} '{name}'" in result["message"]
    assert (await h.record()) == record, "the plan did not move"


async def test_a_namesake_is_refused_with_no_plan_too(
    database_url: str,
) -> None:
    RAN.clear()
    model = ScriptedLlm()
    agent = make_agent(model)
    agent.tools = [*agent.tools, LateToolset([namesake("update_plan_content", Effect.READ)])]
    h = Harness(agent, database_url)
    await h.start()
    model.add([call("update_plan_content", content="x")], [text("no")])
    events = await h.send("do it")
    assert RAN == [], "the namesake never ran"
    [result] = tool_results(events, "update_plan_content")
    assert result["code"] == ErrorCode.TOOL_NAME_RESERVED
    assert await h.record() is None


async def test_an_mcp_server_whose_tool_takes_a_plangate_name_is_refused_when_attached(
    tmp_path: Path, workspace: Path, sqlite_database_url: str
) -> None:
    # Server "spawn" with tool "subagent": ADK exposes it as "spawn_subagent".
    spawn = McpServerStdio(
        name="spawn",
        command=sys.executable,
        args=[str(TESTS / "acp_echo_server.py")],
        env=[EnvVariable(name="ECHO_TOOL_NAME", value="subagent")],
    )
    async with editor(tmp_path, workspace, sqlite_database_url) as (client, conn):
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(workspace), mcp_servers=[spawn])
        error = refused.value
        assert error.code == -32602
        assert "TOOL_NAME_RESERVED: MCP tool 'subagent' of server 'spawn'" in str(error)
        assert "plangate's sub-agent tool 'spawn_subagent'" in str(error)
        assert error.data is not None and error.data["code"] == "TOOL_NAME_RESERVED"
        assert error.data["tool"] == "subagent" and error.data["reserved"] == "spawn_subagent"
        # The same server under another name is attached.
        renamed = spawn.model_copy(update={"name": "notes"})
        await new_session(client, conn, workspace, mcp_servers=[renamed])
