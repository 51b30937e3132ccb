"""The shell through the gate: in a plan, proven read-only commands run; unproven ones run\nonly inside the read-only sandbox; explicit writes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Harness, tool_results
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.shell import ShellKind, classify_command


@pytest.mark.parametrize(
    ("command", "refused_part"),
    [
        ("echo pwned > owned.txt", "redirection"),
        ("ls 1> owned.txt", "redirection"),
        ("python3 -c \"open('owned.txt','w').write('x')\"", "python3"),
        ("git commit -am x", "commit"),
        ("sed -i s/on_hand/x/ inventory/stock.py", "-i"),
        ("find . -name '*.py' -exec rm {} \\;", "-exec"),
        ("ls | xargs rm", "xargs"),
        ("cat $(touch owned.txt)", "substitution"),
        ("env X=1 touch owned.txt", "env"),
        ("bash -c 'touch owned.txt'", "bash"),
    ],
)
async def test_write_capable_commands_are_refused_in_a_plan(
    tmp_path: Path, database_url: str, command: str, refused_part: str, sandbox_mode: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    before = (workspace / "inventory" / "stock.py").read_text()
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), database_url)
    await harness.start({"agent_mode": "plan"})
    model.add([call("Bash", command=command)], [text("refused")])
    events = await harness.send("look around")
    result = tool_results(events, "Bash")[0]
    verdict = classify_command(command)
    if verdict.kind is ShellKind.UNPROVEN and sandbox_mode == "sandbox":
        # Not provable, but the read-only sandbox holds it: it runs and changes nothing.
        assert "error" not in result and result["sandbox"].startswith("read-only")
    else:
        error = result["error"]
        assert error.startswith("PLAN_MODE_GATE") and refused_part in error
        if verdict.kind is ShellKind.WRITES:
            assert "has side effects" in error
        else:
            assert "not provably read-only" in error and "no sandbox" in error
    assert not (workspace / "owned.txt").exists()
    assert (workspace / "inventory" / "stock.py").read_text() == before


async def test_read_only_commands_run_in_a_plan_and_anything_runs_after(
    tmp_path: Path, database_url: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), database_url)
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("Bash", command="grep -n on_hand inventory/stock.py | head -3")],
        [call("Bash", command="git status 2>/dev/null; ls -la")],
        [text("explored")],
    )
    events = await harness.send("look around")
    results = tool_results(events, "Bash")
    assert results[0]["exit_code"] == 0 and "on_hand" in results[0]["stdout"]
    assert "error" not in results[1]
    model.add([call("Bash", command="echo ok > made.txt")], [text("done")])
    await harness.send("now write", state_delta={"agent_mode": "agent"})
    assert (workspace / "made.txt").read_text() == "ok\n"
