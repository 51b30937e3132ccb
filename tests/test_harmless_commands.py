"""Harmless commands a model types while planning run: the sandbox runs all of them,
the parser alone those it proves read-only.

The table holds the issue's false positives, each form it names counted once (24): a
``find -exec`` of a read-only program, ``git ls-remote`` of a local repository, quoted
regular expressions ending in ``$``, git's listing subcommands, ``od``, ``base64``,
``tac`` and ``test`` of a quoted variable. They go through the real Runner and the real
``Bash`` tool in a git workspace while a plan is being made.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness import Harness, tool_results
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.shell import ShellKind, classify_command

SANDBOX_ONLY = ["git ls-remote ."]
"""Not provable (it starts git-upload-pack), but no write and no network: the read-only
sandbox runs it; without one it is refused."""

PROVEN = [
    "find . -name '*.py' -exec grep -l def {} +",
    "find . -name '*.md' -exec wc -l {} \\;",
    "grep -n 'def$' README.md",
    'grep -n "def$" README.md',
    "grep -rnE '^(def|class) .*:$' inventory",
    "sed -n '/:$/p' inventory/stock.py",
    "git rev-list --count HEAD",
    "git cat-file -p HEAD",
    "git cat-file -t HEAD",
    "git ls-tree -r HEAD",
    "git describe --always",
    "git tag -l",
    "git tag --list 'v*'",
    "git remote -v",
    "git stash list",
    "git reflog",
    "git reflog show HEAD",
    "od -c README.md | head -3",
    "base64 README.md | head -3",
    "tac README.md",
    '[ -n "$HOME" ]',
    'test -z "$HOME" || echo set',
    "echo aGkK | base64 -d",
]
COMMANDS = PROVEN + SANDBOX_ONLY


def test_the_table_holds_the_issues_24_commands() -> None:
    assert len(COMMANDS) == len(set(COMMANDS)) == 24


@pytest.mark.parametrize("command", PROVEN)
def test_the_parser_proves_them_read_only(command: str) -> None:
    verdict = classify_command(command)
    assert verdict.kind is ShellKind.READ_ONLY, verdict


@pytest.mark.parametrize("command", SANDBOX_ONLY)
def test_the_rest_is_no_write_and_runs_in_the_sandbox(command: str) -> None:
    assert classify_command(command).kind is ShellKind.UNPROVEN


@pytest.mark.parametrize(
    "command",
    [
        "find . -exec rm {} +",
        "find . -exec sh -c 'touch x' \\;",
        "find . -exec sed -n 'w out' {} \\;",
        "find . -exec git -c core.pager=x log \\;",
        "find . -execdir python3 {} \\;",
        "find -- -o -exec sort {} +",
        "find . -exec sed {} \\;",
        "git ls-remote 'ext::sh -c touch% x'",
        "git ls-remote",
        "git --exec-path=/tmp rev-list HEAD",
        "git cat-file --textconv HEAD:README.md",
        "git cat-file --filters HEAD:README.md",
        "git rev-list --output=x HEAD",
        "git describe --dirty",
        "git tag v1",
        "git remote add x y",
        "git stash",
        "git reflog expire --all",
        "echo $'\\x41'",
        '[ -v "$HOME" ]',
        '[ "$A" -eq 1 ]',
    ],
)
def test_their_dangerous_neighbours_are_not(command: str) -> None:
    assert classify_command(command).kind is not ShellKind.READ_ONLY


async def test_they_run_while_planning(tmp_path: Path, sandbox_mode: str) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a"}
    env |= {"GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"}
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-qm", "sample")):
        subprocess.run(["git", *args], cwd=workspace, env=env, check=True)
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add([call("Bash", command=c) for c in COMMANDS], [text("done")])
    results = dict(zip(COMMANDS, tool_results(await harness.send("look"), "Bash"), strict=True))
    for command in COMMANDS:
        result = results[command]
        if sandbox_mode == "parser-only" and command in SANDBOX_ONLY:
            assert result["code"] == "PLAN_MODE_GATE", (command, result)
            continue
        assert "error" not in result and "exit_code" in result, (command, result)
    assert results["git rev-list --count HEAD"]["stdout"] == "1\n"
    assert results["git cat-file -t HEAD"]["stdout"] == "commit\n"
    assert results["echo aGkK | base64 -d"]["stdout"] == "hi\n"
    readme = (workspace / "README.md").read_text().splitlines()
    assert results["tac README.md"]["stdout"].splitlines() == readme[::-1]
    assert results['[ -n "$HOME" ]']["exit_code"] == 0
    assert "stock.py" in results["find . -name '*.py' -exec grep -l def {} +"]["stdout"]
    if sandbox_mode == "sandbox":
        ls_remote = results["git ls-remote ."]
        assert ls_remote["exit_code"] == 0 and "HEAD" in ls_remote["stdout"], ls_remote
