"""The policy file: rules for tools that are not plangate's, checked at the one boundary.

Through the real Runner with a scripted model: a bad file is an error at start; deny
beats any allow; ``ask`` pauses the call for the user; the file gives undeclared tools
an effect; path rules deny and ask; a server's ``readOnlyHint`` is shown, never trusted
alone; every verdict is journaled.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.adk.tools import FunctionTool

from harness import Harness, make_agent, tool_results
from plangate.adk import PlanOptions
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.policy_file import PolicyFileError

CALLS: list[tuple[str, dict[str, Any]]] = []


def deploy(target: str) -> dict[str, Any]:
    """Deploy the service."""
    CALLS.append(("deploy", {"target": target}))
    return {"deployed": target}


def save_report(path: str, text: str) -> dict[str, Any]:
    """Save a report."""
    CALLS.append(("save_report", {"path": path}))
    return {"saved": path}


def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    CALLS.append(("lookup", {"key": key}))
    return {"value": key}


POLICY = """
version = 1

[[tool]]
name = "*"
effect = "read"
planning = "allow"
acting = "allow"

[[tool]]
name = "deploy"
effect = "network"
planning = "deny"
acting = "ask"
justification = "it reaches production"

[[tool]]
name = "save_report"
effect = "write"
acting = "allow"
paths = { arg = "path", allow = ["reports/**"], deny = ["**/.env"] }
"""


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def _harness(tmp_path: Path, policy: str, tools: list[Any]) -> tuple[Harness, ScriptedLlm]:
    file = tmp_path / "policy.toml"
    file.write_text(policy)
    model = ScriptedLlm()
    agent = make_agent(model, PlanOptions(policy_file=file), tools=tools)
    return Harness(agent, f"sqlite:///{tmp_path / 'p.db'}"), model


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("version = 1\n[[tool]\n", "not valid TOML"),
        ('[[tool]]\nname = "x"\neffect = "read"\nacting = "maybe"\n', "invalid tool.0.acting"),
        ('[[tool]]\nname = "x"\neffect = "spawn"\n', "effect must be read, write"),
        ('[[tool]]\nname = "x"\neffect = "read"\nmode = "yolo"\n', "invalid tool.0.mode"),
        ("version = 2\n", "invalid version"),
        ('[[tool]]\nname = " "\neffect = "read"\n', "non-empty name"),
    ],
)
def test_a_bad_policy_file_is_a_clear_error_at_start(
    tmp_path: Path, policy: str, expected: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    (workspace / ".plangate").mkdir(exist_ok=True)
    (workspace / ".plangate" / "policy.toml").write_text(policy)
    with pytest.raises(PolicyFileError, match=expected) as caught:
        build_coding_agent(workspace, ScriptedLlm())
    assert "policy.toml" in str(caught.value)


def test_a_missing_policy_file_named_explicitly_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError, match="cannot be read"):
        make_agent(ScriptedLlm(), PlanOptions(policy_file=tmp_path / "absent.toml"))


async def test_deny_beats_any_allow_and_is_journaled(tmp_path: Path) -> None:
    harness, model = _harness(tmp_path, POLICY, [deploy, lookup])
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("deploy", target="prod")],
        [call("lookup", key="a")],
        [text("done")],
    )
    events = await harness.send("look")
    (denied,) = tool_results(events, "deploy")
    assert denied["error"].startswith("POLICY_DENIED: tool 'deploy' is denied")
    assert "it reaches production" in denied["error"]
    # The file made the undeclared lookup read-only, so it runs while planning.
    assert tool_results(events, "lookup") == [{"value": "a"}]
    assert CALLS == [("lookup", {"key": "a"})]
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    kinds = [(e.event.kind, e.event.detail.get("tool")) for e in await session.journal()]
    assert ("policy.deny", "deploy") in kinds and ("policy.allow", "lookup") in kinds


async def test_ask_pauses_the_call_until_the_user_allows_it(tmp_path: Path) -> None:
    harness, model = _harness(tmp_path, POLICY, [deploy, lookup])
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. deploy")],
        [call("exit_plan_mode")],
    )
    await harness.send("plan")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    (exit_request,) = await session.pending()
    model.add([call("deploy", target="prod")])
    await harness.send(PlanSession.approve(exit_request))
    (request,) = await session.pending()
    assert request.kind == "tool" and request.tool_name == "deploy"
    assert "it reaches production" in request.payload["message"]
    assert CALLS == []
    model.add([call("deploy", target="staging")])
    waiting = await session.submit(PlanSession.approve(request))
    assert waiting.message is not None
    await harness.send(waiting.message)
    assert CALLS == [("deploy", {"target": "prod"})]
    # Allowing one call allows only that one: the next asks again, and refusing it
    # answers the model with the refusal.
    (second,) = await session.pending()
    model.add([text("ok")])
    waiting = await session.submit(PlanSession.reject(second, note="not today"))
    assert waiting.message is not None
    events = await harness.send(waiting.message)
    assert tool_results(events, "deploy")[-1]["error"].startswith("TOOL_CALL_REFUSED: ")
    assert CALLS == [("deploy", {"target": "prod"})]


async def test_ask_without_a_plan_is_refused_with_the_reason(tmp_path: Path) -> None:
    harness, model = _harness(tmp_path, POLICY, [deploy])
    await harness.start()
    model.add([call("deploy", target="prod")], [text("ok")])
    (result,) = tool_results(await harness.send("go"), "deploy")
    assert result["error"].startswith("POLICY_ASK: ") and CALLS == []


async def test_path_rules_deny_and_ask(tmp_path: Path) -> None:
    harness, model = _harness(tmp_path, POLICY, [save_report])
    await harness.start()
    model.add(
        [call("save_report", path="reports/q1.md", text="x")],
        [call("save_report", path="reports/.env", text="x")],
        [call("save_report", path="../outside.md", text="x")],
        [call("save_report", path="notes.md", text="x")],
        [text("done")],
    )
    results = tool_results(await harness.send("go"), "save_report")
    assert results[0] == {"saved": "reports/q1.md"}
    assert "matches a denied path" in results[1]["error"]
    assert "outside the workspace" in results[2]["error"]
    # Not an allowed path: asked for, and without a plan there is nowhere to ask.
    assert results[3]["error"].startswith("POLICY_ASK: ")
    assert CALLS == [("save_report", {"path": "reports/q1.md"})]


async def test_read_only_hint_is_shown_but_not_trusted(tmp_path: Path) -> None:
    tool = FunctionTool(lookup)
    tool._mcp_tool = SimpleNamespace(annotations=SimpleNamespace(readOnlyHint=True))  # type: ignore[attr-defined]
    harness, model = _harness(
        tmp_path, 'version = 1\n[[tool]]\nname = "other"\neffect = "read"\n', [tool]
    )
    await harness.start({"agent_mode": "plan"})
    model.add([call("lookup", key="a")], [text("done")])
    (result,) = tool_results(await harness.send("look"), "lookup")
    assert result["error"].startswith("PLAN_MODE_GATE")
    assert "readOnlyHint" in result["error"] and CALLS == []


WRITE_ASKS = """
version = 1

[[tool]]
name = "Write"
effect = "write"
acting = "ask"
justification = "writes are reviewed"
"""
STOCK_PLAN = "1. Fix the rounding in inventory/stock.py\n"


async def _scoped_plan(tmp_path: Path) -> tuple[Harness, ScriptedLlm, PlanSession, Path]:
    """A coding agent under a policy that asks for every Write, its scoped plan approved."""
    workspace = copy_sample_workspace(tmp_path / "ws")
    policy = tmp_path / "policy.toml"
    policy.write_text(WRITE_ASKS)
    model = ScriptedLlm()
    agent = build_coding_agent(workspace, model, policy_file=policy)
    harness = Harness(agent, f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content=STOCK_PLAN, scope={"write": ["inventory/"]})],
        [call("exit_plan_mode", summary="ready")],
    )
    await harness.send("fix it")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    return harness, model, session, workspace


async def _answer(harness: Harness, session: PlanSession, approve: bool) -> list[Any]:
    (request,) = await session.pending()
    reply = PlanSession.approve(request) if approve else PlanSession.reject(request, note="no")
    waiting = await session.submit(reply)
    assert waiting.message is not None
    return await harness.send(waiting.message)


async def test_fix_14_a_policy_ask_does_not_skip_the_scope(tmp_path: Path) -> None:
    """Allowing a call the policy asks for is not an amendment: a write outside the scope
    asks once for both, and only that answer lets it run."""
    harness, model, session, workspace = await _scoped_plan(tmp_path)
    (exit_request,) = await session.pending()
    ci = workspace / ".github" / "ci.yml"
    model.add([call("Write", path=".github/ci.yml", content="on: push\n")])
    await harness.send(PlanSession.approve(exit_request))
    (request,) = await session.pending()
    # One request, an amendment, that names the policy's reason as well.
    assert request.kind == "amendment"
    assert "writes are reviewed" in request.payload["message"]
    assert "`.github/ci.yml`" in request.payload["message"]
    model.add([call("Write", path=".github/ci.yml", content="again\n")])
    events = await _answer(harness, session, approve=False)
    refused, waiting = tool_results(events, "Write")
    assert refused["error"].startswith("SCOPE_AMENDMENT_REFUSED: ")
    assert waiting["status"] == "pending_amendment"
    assert not ci.exists()
    # Asked again for the next call; approving the amendment runs it and widens the scope.
    (again,) = await session.pending()
    assert again.kind == "amendment"
    model.add([call("Write", path="inventory/new.py", content="x = 1\n")])
    await _answer(harness, session, approve=True)
    assert ci.read_text() == "again\n"
    # In scope, the policy still asks (as a tool call), and refusing leaves it unwritten.
    (in_scope,) = await session.pending()
    assert in_scope.kind == "tool" and "writes are reviewed" in in_scope.payload["message"]
    model.add([text("ok")])
    events = await _answer(harness, session, approve=False)
    assert tool_results(events, "Write")[-1]["error"].startswith("TOOL_CALL_REFUSED: ")
    assert not (workspace / "inventory" / "new.py").exists()


async def test_fix_14_a_call_allowed_while_planning_still_needs_the_scope(
    tmp_path: Path, sandbox: None
) -> None:
    """A command the policy asked for while planning (one the read-only sandbox would
    contain), allowed in the same answer as the plan: when it runs the approved scope
    governs, and that allowance did not cover it."""
    workspace = copy_sample_workspace(tmp_path / "ws")
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'version = 1\n[[tool]]\nname = "Bash"\neffect = "shell"\n'
        'planning = "ask"\nacting = "allow"\n'
    )
    model = ScriptedLlm()
    harness = Harness(
        build_coding_agent(workspace, model, policy_file=policy), f"sqlite:///{tmp_path / 'p.db'}"
    )
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content=STOCK_PLAN, scope={"commands": ["python -m pytest"]})],
        [call("Bash", command="python -c 'print(1)'"), call("exit_plan_mode", summary="ready")],
    )
    await harness.send("fix it")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    asked, approval = sorted(await session.pending(), key=lambda r: r.kind != "tool")
    assert (asked.kind, approval.kind) == ("tool", "exit")
    await session.submit(PlanSession.approve(asked))
    model.add([text("ok")])
    waiting = await session.submit(PlanSession.approve(approval))
    assert waiting.message is not None
    events = await harness.send(waiting.message)
    (result,) = tool_results(events, "Bash")
    assert result["code"] == "OUTSIDE_SCOPE" and "run `python -c" in result["message"]
    assert await session.pending() == []
