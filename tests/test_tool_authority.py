"""The approved scope reaches every tool, not only plangate's own (invariant 10).

Through the real ADK Runner with a scripted model: a policy-file tool with a path
argument, a host tool declared ``Effect.WRITE`` and a network tool are judged by the one
authority the gate computes per call -- the scope (an amendment for a path outside it),
the protected paths, the workspace, "no network" -- and a write tool that names no path
is refused under a scoped plan instead of writing anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.adk.tools import FunctionTool

from harness import Harness, make_agent, tool_results
from plangate.adk import PlanOptions
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.effects import Effect, declare_effect, declare_write_paths

POLICY = """
version = 1

[[tool]]
name = "save_report"
effect = "write"
acting = "allow"
paths = { arg = "path" }

[[tool]]
name = "fetch_page"
effect = "network"
acting = "allow"
"""


def _tools(workspace: Path, etc: Path) -> list[Any]:
    """Tools that really write: a policy-file tool, a host tool with a declared path, one
    without, and a network tool (which records that it ran)."""

    def save_report(path: str, text: str) -> dict[str, Any]:
        """Save a report."""
        target = workspace / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return {"saved": path}

    def export_file(path: str, text: str) -> dict[str, Any]:
        """Export a file (a host tool declaring its path argument)."""
        target = Path(path) if path.startswith("/") else workspace / path
        target.write_text(text)
        return {"exported": path}

    def dump_config(file: str, text: str) -> dict[str, Any]:
        """A host tool declared as writing, with no path declared."""
        (etc / file).write_text(text)
        return {"dumped": file}

    def fetch_page(url: str) -> dict[str, Any]:
        """Fetch a web page."""
        (workspace / "fetched.log").write_text(url)
        return {"fetched": url}

    export = declare_write_paths(declare_effect(FunctionTool(export_file), Effect.WRITE), ("path",))
    dump = declare_effect(FunctionTool(dump_config), Effect.WRITE)
    return [save_report, export, dump, fetch_page]


async def _acting(
    tmp_path: Path, scope: dict[str, Any] | None
) -> tuple[Harness, ScriptedLlm, PlanSession, Path, Path]:
    """An agent with those tools whose plan (scoped or not) is approved; the next
    script runs after the approval."""
    workspace = tmp_path / "ws"
    etc = tmp_path / "etc"
    workspace.mkdir()
    etc.mkdir()
    (workspace / ".git" / "hooks").mkdir(parents=True)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    model = ScriptedLlm()
    options = PlanOptions(policy_file=policy, workspace=workspace)
    harness = Harness(
        make_agent(model, options, tools=_tools(workspace, etc)), f"sqlite:///{tmp_path / 'p.db'}"
    )
    await harness.start({"agent_mode": "plan"})
    update = {"content": "1. Write the report\n"}
    if scope is not None:
        update["scope"] = scope  # type: ignore[assignment]
    model.add([call("update_plan_content", **update)], [call("exit_plan_mode", summary="ok")])
    await harness.send("write the report")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    return harness, model, session, workspace, etc


async def _approve(harness: Harness, session: PlanSession) -> list[Any]:
    (request,) = await session.pending()
    return await harness.send(PlanSession.approve(request))


SCOPE = {"write": ["reports/"]}


async def test_a_policy_file_tool_outside_the_scope_waits_for_an_amendment(
    tmp_path: Path,
) -> None:
    harness, model, session, workspace, _ = await _acting(tmp_path, SCOPE)
    model.add(
        [call("save_report", path="reports/q1.md", text="in scope")],
        [call("save_report", path="notes/q1.md", text="outside")],
    )
    await _approve(harness, session)
    assert (workspace / "reports" / "q1.md").read_text() == "in scope"
    (request,) = await session.pending()
    assert request.kind == "amendment" and request.payload["wants"]["write"] == ["notes/q1.md"]
    assert not (workspace / "notes").exists()
    # Approved, it writes what the card showed.
    model.add([text("done")])
    waiting = await session.submit(PlanSession.approve(request))
    assert waiting.message is not None
    await harness.send(waiting.message)
    assert (workspace / "notes" / "q1.md").read_text() == "outside"


async def test_tools_cannot_write_protected_paths_or_leave_the_workspace(
    tmp_path: Path,
) -> None:
    # No scope: the whole workspace is granted, and still not git's program files.
    harness, model, session, workspace, _ = await _acting(tmp_path, None)
    model.add(
        [call("save_report", path=".git/hooks/pre-commit", text="#!/bin/sh\nevil\n")],
        [call("save_report", path="reports/../.plangate/policy.toml", text="x")],
        [call("export_file", path="/etc-not-here/passwd", text="x")],
        [call("export_file", path="../outside.txt", text="x")],
        [call("export_file", text="x")],
        [call("save_report", path="ok.md", text="fine")],
        [text("done")],
    )
    events = await _approve(harness, session)
    hook, plangate, absolute = (
        *tool_results(events, "save_report")[:2],
        tool_results(events, "export_file")[0],
    )
    assert hook["code"] == "PROTECTED_PATH" and ".git" in hook["message"]
    assert plangate["code"] == "PROTECTED_PATH" and ".plangate" in plangate["message"]
    assert absolute["code"] == "PATH_OUTSIDE_WORKSPACE"
    outside, missing = tool_results(events, "export_file")[1:]
    assert outside["code"] == "PATH_OUTSIDE_WORKSPACE" and missing["code"] == "INVALID_ARGS"
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert not (workspace / ".plangate").exists() and not (tmp_path / "outside.txt").exists()
    assert (workspace / "ok.md").read_text() == "fine"


async def test_a_write_tool_with_no_declared_path_is_refused_under_a_scope(
    tmp_path: Path,
) -> None:
    harness, model, session, _, etc = await _acting(tmp_path, SCOPE)
    model.add([call("dump_config", file="hosts", text="evil")], [text("done")])
    (result,) = tool_results(await _approve(harness, session), "dump_config")
    assert result["code"] == "PATHS_UNDECLARED" and "names no path argument" in result["message"]
    assert not (etc / "hosts").exists()
    assert await session.pending() == []


async def test_a_write_tool_with_no_declared_path_runs_without_a_scope(tmp_path: Path) -> None:
    harness, model, session, _, etc = await _acting(tmp_path, None)
    model.add([call("dump_config", file="hosts", text="ok")], [text("done")])
    await _approve(harness, session)
    assert (etc / "hosts").read_text() == "ok"


async def test_a_network_tool_is_refused_under_no_network(tmp_path: Path) -> None:
    harness, model, session, workspace, _ = await _acting(tmp_path, SCOPE)
    model.add([call("fetch_page", url="https://example.com")], [text("done")])
    (result,) = tool_results(await _approve(harness, session), "fetch_page")
    assert result["code"] == "OUTSIDE_SCOPE" and "no network" in result["message"]
    assert not (workspace / "fetched.log").exists()


async def test_a_network_tool_runs_when_the_scope_grants_the_network(tmp_path: Path) -> None:
    harness, model, session, workspace, _ = await _acting(tmp_path, {**SCOPE, "network": True})
    model.add([call("fetch_page", url="https://example.com")], [text("done")])
    await _approve(harness, session)
    assert (workspace / "fetched.log").read_text() == "https://example.com"
