"""An approval grants exactly what its card showed, once (invariant 11).

Through the real ADK Runner, the real workspace tools and a scripted model: an approved
command amendment grants that command, not every command it starts; an approval binds
the call id and the call's arguments and is spent when the call runs; a reply that is
not a documented shape changes nothing; a model step and a plan may ask for only so many
amendments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.adk.tools import FunctionTool

from harness import Harness, make_agent, tool_results
from plangate.adk import PlanOptions
from plangate.adk.runner import function_reply
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.subagents import subagent_tools
from plangate.agent.workspace import copy_sample_workspace
from plangate.errors import ErrorCode
from plangate.models.scripted import ScriptedLlm, call, last_tool_result, text
from plangate.plan.amendments import MAX_AMENDMENTS_PER_STEP
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.plan.scope import Scope

PLAN = "1. Fix the stock rounding in inventory/stock.py\n2. Add a test\n"
SCOPE = {
    "write": ["inventory/stock.py", "tests/test_stock.py"],
    "commands": ["python -m pytest"],
}


async def _approved(
    tmp_path: Path, **choices: Any
) -> tuple[Harness, ScriptedLlm, PlanSession, Path]:
    """A coding agent whose scoped plan waits for approval; the next script runs once
    it is approved with ``choices``."""
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content=PLAN, scope=SCOPE)],
        [call("exit_plan_mode", summary="ready")],
    )
    await harness.send("fix the rounding")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    return harness, model, session, workspace


async def _approve_plan(harness: Harness, session: PlanSession, **choices: Any) -> list[Any]:
    (request,) = await session.pending()
    assert request.kind == "exit"
    return await harness.send(PlanSession.approve(request, **choices))


async def _allow(harness: Harness, session: PlanSession) -> list[Any]:
    (request,) = await session.pending()
    waiting = await session.submit(PlanSession.approve(request))
    assert waiting.ready and waiting.message is not None
    return await harness.send(waiting.message)


# -- an amendment grants the command it showed -------------------------------------------


def test_an_exact_command_covers_that_argv_and_nothing_longer() -> None:
    scope = Scope(exact_commands=["rm -rf build"])
    assert scope.allows_command("rm -rf build", [("rm", "-rf", "build")])
    assert not scope.allows_command("rm -rf build inventory", [("rm", "-rf", "build", "inventory")])
    assert not scope.allows_command("rm -rf", [("rm", "-rf")])
    # A prefix the reviewer wrote still covers what starts with it.
    assert Scope(commands=["rm -rf build"]).allows_command(
        "rm -rf build x", [("rm", "-rf", "build", "x")]
    )
    # A scope without exact commands hashes as it did before they existed.
    assert Scope(**SCOPE).canonical() == (
        '{"commands":["python -m pytest"],"network":false,'
        '"write":["inventory/stock.py","tests/test_stock.py"]}'
    )


async def test_an_approved_command_amendment_does_not_grant_longer_commands(
    tmp_path: Path,
) -> None:
    harness, model, session, _ = await _approved(tmp_path)
    model.add([call("Bash", command="rm -rf build")])
    await _approve_plan(harness, session)
    (request,) = await session.pending()
    assert request.kind == "amendment"
    assert request.payload["wants"]["commands"] == ["rm -rf build"]
    model.add([call("Bash", command="rm -rf build inventory tests README.md")])
    await _allow(harness, session)
    record = await session.record()
    assert record is not None and record.scope is not None
    assert record.scope.exact_commands == ("rm -rf build",)
    assert record.scope.commands == ("python -m pytest",)
    assert "run exactly `rm -rf build`" in record.scope.summary()
    # The longer command was not granted: it waits for its own amendment.
    (second,) = await session.pending()
    assert second.kind == "amendment"
    assert second.payload["wants"]["commands"] == ["rm -rf build inventory tests README.md"]


async def test_a_reviewer_may_grant_a_prefix_by_sending_it_in_the_scope(tmp_path: Path) -> None:
    harness, model, session, _ = await _approved(tmp_path)
    model.add([call("Bash", command="rm -rf build")])
    await _approve_plan(harness, session)
    (request,) = await session.pending()
    model.add([call("Bash", command="rm -rf build dist")], [text("done")])
    chosen = {**SCOPE, "commands": ["python -m pytest", "rm -rf build"]}
    waiting = await session.submit(PlanSession.approve(request, scope=chosen))
    assert waiting.message is not None
    await harness.send(waiting.message)
    assert await session.pending() == []
    record = await session.record()
    assert record is not None and record.scope == Scope(**chosen)


# -- an approval binds the call id and the arguments, once --------------------------------


async def test_a_sub_agent_cannot_reuse_an_edit_approval_by_its_call_id(
    tmp_path: Path,
) -> None:
    harness, model, session, workspace = await _approved(tmp_path)
    target = workspace / "tests" / "test_stock.py"
    stock = workspace / "inventory" / "stock.py"
    before = stock.read_text()
    model.add([call("Write", call_id="w1", path="tests/test_stock.py", content="x = 1\n")])
    await _approve_plan(harness, session, permission="ask_each_edit")
    (request,) = await session.pending()
    assert request.kind == "edit" and request.call_id == "w1"
    # The child's run has a session of its own, where "w1" is a new id: the id alone
    # must not carry the parent's (spent) approval over to the child's call.
    model.add(
        [call("dynamic_subagent", tools=["Write"], prompt="finish the fix")],
        [call("Write", call_id="w1", path="inventory/stock.py", content="# child\n")],
        [text("child done")],
        [text("done")],
    )
    await _allow(harness, session)
    assert target.read_text() == "x = 1\n"  # the reviewed write ran, once
    assert stock.read_text() == before
    child = [
        last_tool_result(r, "Write") for r in model.requests if "finish the fix" in str(r.contents)
    ]
    refusals = [r for r in child if r is not None and "error" in r]
    assert [r["code"] for r in refusals] == ["APPROVAL_USED"]
    assert "already used" in refusals[0]["error"]


DEPLOYS: list[str] = []


def deploy(target: str) -> dict[str, Any]:
    """Deploy the service."""
    DEPLOYS.append(target)
    return {"deployed": target}


ASK_DEPLOY = """
version = 1

[[tool]]
name = "deploy"
effect = "network"
planning = "deny"
acting = "ask"
justification = "it reaches production"
"""


async def test_a_sub_agent_cannot_reuse_a_policy_ask_approval_by_its_call_id(
    tmp_path: Path,
) -> None:
    DEPLOYS.clear()
    policy = tmp_path / "policy.toml"
    policy.write_text(ASK_DEPLOY)
    model = ScriptedLlm()
    tool = FunctionTool(deploy)
    agent = make_agent(
        model, PlanOptions(policy_file=policy), tools=[tool, *subagent_tools([tool])]
    )
    harness = Harness(agent, f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. deploy")], [call("exit_plan_mode")])
    await harness.send("plan")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    model.add([call("deploy", call_id="d1", target="staging")])
    await _approve_plan(harness, session)
    (request,) = await session.pending()
    assert request.kind == "tool"
    model.add(
        [call("dynamic_subagent", tools=["deploy"], prompt="ship it")],
        [call("deploy", call_id="d1", target="prod")],
        [text("child done")],
        [text("ok")],
    )
    await _allow(harness, session)
    assert DEPLOYS == ["staging"]
    child = [last_tool_result(r, "deploy") for r in model.requests if "ship it" in str(r.contents)]
    refusals = [r for r in child if r is not None and "error" in r]
    assert [r["code"] for r in refusals] == ["APPROVAL_USED"]


# -- strict replies -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"sha265": "x"}, "sha265"),
        ({"grant_everything": True}, "grant_everything"),
        ({"revision": True}, "revision"),
        ({"revision": "1"}, "revision"),
        ({"reviewer_note": 7}, "reviewer_note"),
        ({"approval_id": ["a"]}, "approval_id"),
    ],
)
async def test_a_reply_with_an_unknown_or_mistyped_field_changes_nothing(
    tmp_path: Path, extra: dict[str, Any], field: str
) -> None:
    harness, _, session, _ = await _approved(tmp_path)
    (request,) = await session.pending()
    response = {"status": "approved", "approval_id": request.approval_id, **extra}
    with pytest.raises(ReplyError) as caught:
        await session.submit(function_reply(request.call_id, request.tool_name, response))
    assert caught.value.code is ReplyErrorCode.INVALID_REPLY
    assert repr(field) in caught.value.message
    assert [p.call_id for p in await session.pending()] == [request.call_id]
    record = await harness.record()
    assert record is not None and record.status.value == "pending_approval"


async def test_documented_reply_shapes_are_still_accepted(tmp_path: Path) -> None:
    _, model, session, _ = await _approved(tmp_path)
    (request,) = await session.pending()
    model.add([text("ok")])
    # The README's ADK shape, with the binding fields shown.
    response = {
        "status": "approved",
        "approval_id": request.approval_id,
        "revision": request.revision,
        "sha256": request.sha256,
    }
    waiting = await session.submit(function_reply(request.call_id, request.tool_name, response))
    assert waiting.ready


# -- caps on amendment requests -------------------------------------------------------------


async def test_one_step_may_ask_for_only_a_few_amendments(tmp_path: Path) -> None:
    harness, model, session, _ = await _approved(tmp_path)
    asked = MAX_AMENDMENTS_PER_STEP + 2
    model.add([call("Bash", command=f"touch made{i}.txt") for i in range(asked)])
    events = await _approve_plan(harness, session)
    pending = await session.pending()
    assert len(pending) == MAX_AMENDMENTS_PER_STEP
    refused = [
        r for r in tool_results(events, "Bash") if str(r.get("error", "")).startswith("AMENDMENT")
    ]
    assert len(refused) == asked - MAX_AMENDMENTS_PER_STEP
    assert refused[0]["error"].startswith(f"{ErrorCode.AMENDMENT_LIMIT}: ")


def test_an_unspent_approval_binds_the_arguments_it_was_given_for() -> None:
    from plangate.plan.amendments import call_sha256
    from plangate.plan.session_state import Resolution

    shown = call_sha256({"path": "a.py", "content": "x"})
    approval = Resolution(result={"status": "approved"}, decides_call=True, args_sha256=shown)
    # Key order does not change the hash; any other value does.
    assert approval.refuses(call_sha256({"content": "x", "path": "a.py"})) is None
    other = approval.refuses(call_sha256({"path": "a.py", "content": "y"}))
    assert other is not None and other["code"] == "APPROVAL_USED"
    assert "other arguments" in other["error"]
