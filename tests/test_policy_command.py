"""``plangate policy check``: a policy file validated, and what it decides per tool and
mode once every matching rule is applied; a bad file is exit 2 and one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plangate.cli.main import main

POLICY = """
version = 1

[[tool]]
name = "*"
effect = "read"
planning = "allow"
acting = "allow"

[[tool]]
name = "mcp_github_*"
effect = "network"
planning = "deny"
acting = "ask"
justification = "talks to GitHub"

[[tool]]
name = "save_report"
effect = "write"
acting = "allow"
paths = { arg = "path", allow = ["reports/**"], deny = ["**/.env"] }
"""


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["policy", "check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_resolved_rules_per_tool_and_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "policy.toml"
    file.write_text(POLICY)
    code, out, err = _check(capsys, str(file), "--tool", "mcp_github_create_issue")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"ok {file}: 3 rule(s).")
    assert lines[1].split() == ["tool", "effect", "planning", "acting", "rules", "paths"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    # "*" allows everything, but the stricter GitHub rule wins for GitHub tools.
    assert rows["*"][:4] == ["*", "read", "allow", "allow"]
    assert rows["mcp_github_create_issue"][:4] == [
        "mcp_github_create_issue",
        "network",
        "deny",
        "ask",
    ]
    assert rows["save_report"][:4] == ["save_report", "write", "deny", "allow"]
    assert "path: allow reports/**; deny **/.env" in out


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "policy.toml"
    file.write_text(POLICY)
    code, out, _ = _check(capsys, str(file), "--json", "--tool", "other")
    assert code == 0
    tools = {t["tool"]: t for t in json.loads(out)["tools"]}
    assert tools["mcp_github_*"]["rules"] == ["*", "mcp_github_*"]
    assert tools["other"] == {
        "tool": "other",
        "effect": "read",
        "planning": "allow",
        "acting": "allow",
        "rules": ["*"],
        "paths": "",
    }


def test_the_workspace_file_is_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".plangate").mkdir()
    (tmp_path / ".plangate" / "policy.toml").write_text('[[tool]]\nname = "x"\neffect = "read"\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = _check(capsys)
    assert code == 0 and out.startswith("ok .plangate/policy.toml: 1 rule(s).")
    assert out.splitlines()[2].split()[:4] == ["x", "read", "deny", "ask"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version = 1\n[[tool]\n", "not valid TOML"),
        ('[[tool]]\nname = "x"\neffect = "read"\nacting = "maybe"\n', "invalid tool.0.acting"),
        ('[[tool]]\nname = "x"\neffect = "spawn"\n', "effect must be read, write"),
        ("version = 2\n", "invalid version"),
        ('[[tool]]\nname = "x"\neffect = "read"\nmode = "yolo"\n', "invalid tool.0.mode"),
        (b"\xff\xfe not text", "cannot be read"),
    ],
)
def test_a_bad_file_is_exit_2_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, expected: str
) -> None:
    file = tmp_path / "policy.toml"
    if isinstance(text, bytes):
        file.write_bytes(text)
    else:
        file.write_text(text)
    code, out, err = _check(capsys, str(file))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error {file}: ") and expected in err


def test_a_missing_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _check(capsys, str(tmp_path / "absent.toml"))
    assert (code, out) == (2, "")
    assert err == f"error {tmp_path / 'absent.toml'}: cannot be read: No such file or directory\n"


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """``plangate policy check --json | head``: the pipe closes mid-write."""
    import subprocess
    import sys

    rules = "".join(
        f'[[tool]]\nname = "tool_{i}"\neffect = "read"\njustification = "reads"\n\n'
        for i in range(1500)  # well over a pipe's 64 KiB buffer
    )
    (tmp_path / ".plangate").mkdir()
    (tmp_path / ".plangate" / "policy.toml").write_text(f"version = 1\n\n{rules}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "plangate.cli.main", "policy", "check", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"{\n"
    proc.stdout.close()  # what head does after its first line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141  # 128 + SIGPIPE, like any Unix filter
    assert stderr == ""
