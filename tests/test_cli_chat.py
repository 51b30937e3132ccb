"""``plangate chat`` as a real terminal program, driven through a pseudo-terminal."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def spawn(cwd: Path, *args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
    environment = dict(os.environ, COLUMNS="120", LINES="50", NO_COLOR="1", **(env or {}))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "plangate.cli.main", "chat", *args],
        cwd=str(cwd),
        env=environment,
        encoding="utf-8",
        timeout=90,
        dimensions=(50, 120),
    )
    child.logfile_read = (cwd / "terminal.log").open("a")
    return child


def transcript(cwd: Path) -> str:
    return ANSI.sub("", (cwd / "terminal.log").read_text())


@pytest.fixture
def editor(tmp_path: Path) -> Path:
    script = tmp_path / "editor.sh"
    script.write_text('#!/bin/sh\nprintf "3. Keep the error message unchanged\\n" >> "$1"\n')
    script.chmod(0o755)
    return script


def test_the_whole_demo_in_the_terminal(tmp_path: Path, editor: Path) -> None:
    child = spawn(tmp_path, "--session", "demo", env={"EDITOR": str(editor)})
    child.expect("offline demo")
    child.expect("DEMO")
    child.expect("you> ")
    child.sendline("Fix the failing test")
    child.expect(r"Enter Plan Mode\?")
    child.sendline("y")
    child.expect("refused by plan gate")
    child.expect(r"option number or text")
    child.sendline("1")
    child.expect(r"Plan · pending_approval · revision 1")
    child.expect(r"Approve this plan\?")
    child.sendline("e")
    child.expect("Your edits")
    child.expect("5 passed")
    child.expect(r"Plan · approved · revision 2")
    child.expect("you> ")
    child.sendline("/status")
    child.expect("approved · revision 2")
    child.expect("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert "[demo]" in log
    assert "⛔ refused by plan gate" in log
    fixed = (tmp_path / ".plangate" / "workspace" / "inventory" / "stock.py").read_text()
    assert "if quantity > on_hand:\n" in fixed
    assert "Keep the error message unchanged" in log


def test_restart_with_a_pending_approval_continues(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--session", "resume-me")
    child.expect("you> ")
    child.sendline("Fix the failing test")
    child.expect(r"Enter Plan Mode\?")
    child.sendline("y")
    child.expect(r"option number or text")
    child.sendline("Raise an error")
    child.expect(r"Approve this plan\?")
    child.terminate(force=True)
    child.wait()
    stock = tmp_path / ".plangate" / "workspace" / "inventory" / "stock.py"
    assert "on_hand + 1" in stock.read_text()

    again = spawn(tmp_path, "--session", "resume-me")
    again.expect(r"Plan · pending_approval · revision 1")
    again.expect(r"Approve this plan\?")
    again.sendline("a")
    again.expect("5 passed")
    again.expect("you> ")
    again.sendline("/quit")
    again.expect(pexpect.EOF)
    assert "if quantity > on_hand:\n" in stock.read_text()


def test_plan_command_semantics(tmp_path: Path) -> None:
    child = spawn(tmp_path)
    child.expect("you> ")
    child.sendline("/plan off")
    child.expect("Plan mode is already inactive.")
    child.sendline("/plan")
    child.expect(r"Entering plan mode \(applies from the next step\)")
    child.sendline("/status")
    child.expect(r"pending: plan at the next step")
    child.sendline("/plan off")
    child.expect("Plan mode entry cancelled.")
    child.sendline("/plan Fix the failing test")
    child.expect("Plan Mode is on")
    child.expect(r"option number or text")
    child.sendline("/plan off")
    child.expect("Left plan mode: the plan was cancelled")
    child.expect("you> ")
    child.sendline("/journal")
    child.expect("cancelled")
    child.expect("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert "Enter Plan Mode?" not in log  # a selection enters without the confirmation
