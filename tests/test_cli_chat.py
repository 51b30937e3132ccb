"""``plangate chat`` as a real terminal program, driven through a pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


class Terminal(pexpect.spawn):
    """A pty that answers the cursor position requests a real terminal emulator answers
    (prompt_toolkit draws its bottom toolbar once it knows where the cursor is)."""

    CPR_REQUEST = "\x1b[6n"

    def read_nonblocking(self, size: int = 1, timeout: float | None = -1) -> str:
        data = super().read_nonblocking(size, timeout)
        if self.CPR_REQUEST in data:
            self.send("\x1b[40;1R")
        return data


def spawn(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Terminal:
    environment = dict(os.environ, COLUMNS="120", LINES="50", NO_COLOR="1", **(env or {}))
    child = Terminal(
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


def start(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Terminal, str]:
    """A new session; returns the terminal and the session id from the header."""
    child = spawn(cwd, *args, env=env)
    child.expect(r"session   ([0-9a-f]{12})")
    session_id = child.match.group(1)
    child.expect(PROMPT)
    return child, session_id


PROMPT = "you>"


def transcript(cwd: Path) -> str:
    return ANSI.sub("", (cwd / "terminal.log").read_text())


@pytest.fixture
def editor(tmp_path: Path) -> Path:
    script = tmp_path / "editor.sh"
    script.write_text('#!/bin/sh\nprintf "3. Keep the error message unchanged\\n" >> "$1"\n')
    script.chmod(0o755)
    return script


def test_the_whole_demo_in_the_terminal(tmp_path: Path, editor: Path) -> None:
    child = spawn(tmp_path, env={"EDITOR": str(editor)})
    child.expect("offline demo")
    child.expect("DEMO")
    child.expect(PROMPT)
    child.expect("mode agent │ no plan")  # the bottom toolbar
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
    child.expect(r"\+3\. Keep the error message unchanged")
    child.expect(r"Approve the edited plan\? \[a\]pprove / \[k\]eep editing / \[d\]iscard")
    child.sendline("a")
    child.expect("5 passed")
    child.expect(r"Plan · approved · revision 2")
    child.expect(PROMPT)
    child.sendline("/status")
    child.expect("approved · revision 2")
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert "[demo]" in log
    assert "⛔ refused by plan gate" in log
    fixed = (tmp_path / ".plangate" / "workspace" / "inventory" / "stock.py").read_text()
    assert "if quantity > on_hand:\n" in fixed
    assert "Keep the error message unchanged" in log


def test_restart_with_a_pending_approval_continues(tmp_path: Path) -> None:
    child, session_id = start(tmp_path)
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

    again = spawn(tmp_path, "--session", session_id)
    again.expect(r"Plan · pending_approval · revision 1")
    again.expect(r"Approve this plan\?")
    again.sendline("a")
    again.expect("5 passed")
    again.expect(PROMPT)
    again.sendline("/quit")
    again.expect(pexpect.EOF)
    assert "if quantity > on_hand:\n" in stock.read_text()


def test_plan_command_semantics(tmp_path: Path) -> None:
    child = spawn(tmp_path)
    child.expect(PROMPT)
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
    child.expect(PROMPT)
    child.sendline("/journal")
    child.expect("cancelled")
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert "Enter Plan Mode?" not in log  # a selection enters without the confirmation


def write_script(path: Path, steps: list) -> Path:
    path.write_text(json.dumps(steps))
    return path


def test_two_batched_questions_are_asked_in_turn_and_the_run_resumes_once(
    tmp_path: Path,
) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {
                    "call": "ask_user_question",
                    "args": {"question": "Which database?", "options": ["PostgreSQL", "SQLite"]},
                },
                {"call": "ask_user_question", "args": {"question": "Which port?"}},
            ],
            [{"echo": "answers seen: "}],
        ],
    )
    child, _ = start(tmp_path, "--model", f"script:{script}")
    child.sendline("/plan set up the database")
    child.expect(r"Question \(1 of 2\)")
    child.expect("Which database")
    child.expect(r"option number or text")
    child.sendline("1")
    child.expect(r"Question \(2 of 2\)")
    child.expect("Which port")
    child.expect(r"option number or text")
    child.sendline("5432")
    child.expect("answers seen: ")
    child.expect(PROMPT)
    child.sendline("/status")
    child.expect("plan      exploring")
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert log.count("Question (1 of 2)") == 1 and log.count("Question (2 of 2)") == 1
    seen = log.split("answers seen: ", 1)[1]
    assert seen.index("PostgreSQL") < seen.index("5432")
    assert "waiting" not in log.split("answers seen: ", 1)[1].split("you> ")[1]


def test_a_refused_reply_is_shown_plainly(tmp_path: Path) -> None:
    """A question answered elsewhere while the terminal asks: the reply is refused with
    its code, and the terminal moves on."""
    script = write_script(
        tmp_path / "script.json",
        [
            [
                {"call": "update_plan_content", "args": {"content": "1. do it"}},
            ],
            [
                {"call": "ask_user_question", "args": {"question": "Tabs or spaces?"}},
                {"call": "exit_plan_mode", "args": {"summary": "ready"}},
            ],
            [{"echo": "after approval: "}],
        ],
    )
    child, session_id = start(tmp_path, "--model", f"script:{script}")
    child.sendline("/plan tidy up")
    child.expect(r"Question \(1 of 2\)")
    child.expect(r"option number or text")
    # Answer the question from a second terminal first, then here.
    other = spawn(tmp_path, "--session", session_id, "--model", f"script:{script}")
    other.expect(r"Question \(1 of 2\)")
    other.expect(r"option number or text")
    other.sendline("tabs")
    other.expect(r"Approve this plan\?")
    other.terminate(force=True)
    child.sendline("spaces")
    child.expect("reply not recorded")
    child.expect("ALREADY_ANSWERED")
    child.expect(r"Approve this plan\?")
    child.sendline("a")
    child.expect("after approval: ")
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)


def test_plan_typed_while_the_agent_runs_applies_at_its_next_step(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "script.json",
        [
            [{"call": "Bash", "args": {"command": "sleep 4"}}],
            [{"call": "Write", "args": {"path": "notes.txt", "content": "x"}}],
            [{"text": "stopped to plan"}],
        ],
    )
    child, _ = start(tmp_path, "--model", f"script:{script}")
    child.sendline("write the notes")
    child.expect("Bash")
    child.sendline("/plan")
    child.expect(r"Entering plan mode \(applies from the next step\)")
    child.expect("refused by plan gate")
    child.expect("stopped to plan")
    child.expect(PROMPT)
    child.sendline("/status")
    child.expect("mode      plan")
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    assert not (tmp_path / ".plangate" / "workspace" / "notes.txt").exists()
    assert "StaleSession" not in transcript(tmp_path)


def test_the_header_says_what_contains_the_agents_commands(tmp_path: Path) -> None:
    sandboxed = spawn(tmp_path)
    sandboxed.expect("you>")
    sandboxed.sendline("/quit")
    sandboxed.expect(pexpect.EOF)
    off = spawn(tmp_path, env={"PLANGATE_SANDBOX": "off"})
    off.expect("you>")
    off.sendline("/quit")
    off.expect(pexpect.EOF)
    text = " ".join(transcript(tmp_path).split())
    from plangate.sandbox import sandbox_status

    if sandbox_status().available:
        assert "sandbox: bubblewrap (read-only while planning" in text
    assert "⚠ sandbox off (PLANGATE_SANDBOX=off)" in text
