"""How ``plangate chat`` shows a streaming model: text as it arrives, one line per tool
call updated in place while its arguments stream, the spinner below, nothing wiped.

The terminal test drives the real program against the OpenAI-compatible stand-in
(``provider_standins``) streaming server-sent events, and reads the final screen through
a terminal emulator (pyte), so in-place rewrites count as what a user sees, not as lines.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from conftest import require_service
from protocol_support import classification
from provider_standins import API_KEY, Reply, StandIn, Wire, serve

ROWS, COLUMNS = 50, 120

PLAN_FIRST = "I will plan first."
ANSWER = "The guard in inventory/stock.py lets one item too many through."
CALLS: list[tuple[str, dict[str, str]]] = [
    ("Glob", {"pattern": "**/*.py"}),
    ("Read", {"path": "inventory/stock.py"}),
    ("Grep", {"pattern": "on_hand", "path": "inventory"}),
    ("Read", {"path": "tests/test_stock.py"}),
]


class Screen(pexpect.spawn):
    """A pseudo-terminal running ``plangate chat``, read through a terminal emulator: the
    screen (and the lines scrolled above it) is what a user would see, after every cursor
    move and erased line."""

    CPR_REQUEST = "\x1b[6n"

    def __init__(self, cwd: Path, *args: str, env: dict[str, str]) -> None:
        self.screen = pyte.HistoryScreen(COLUMNS, ROWS, history=1000)
        self.stream = pyte.Stream(self.screen)
        super().__init__(
            sys.executable,
            ["-m", "plangate.cli.main", "chat", *args],
            cwd=str(cwd),
            env=dict(os.environ, COLUMNS=str(COLUMNS), LINES=str(ROWS), **env),
            encoding="utf-8",
            timeout=60,
            dimensions=(ROWS, COLUMNS),
            # poll(), not select(): late in a long run this process holds over 1,024 files.
            use_poll=True,
        )
        self.logfile_read = (cwd / "terminal.log").open("a")

    def read_nonblocking(self, size: int = 1, timeout: float | None = -1) -> str:
        data = super().read_nonblocking(size, timeout)
        for piece in data.split(self.CPR_REQUEST)[:-1]:
            # prompt_toolkit asks where the cursor is before it draws the bottom toolbar.
            self.stream.feed(piece)
            self.send(f"\x1b[{self.screen.cursor.y + 1};{self.screen.cursor.x + 1}R")
        self.stream.feed(data.split(self.CPR_REQUEST)[-1])
        return data

    def lines(self) -> list[str]:
        """Every line on screen and above it, as the terminal shows them now."""
        above = ["".join(line[x].data for x in range(COLUMNS)) for line in self.screen.history.top]
        return [line.rstrip() for line in [*above, *self.screen.display]]


@pytest.fixture
def stand_in() -> StandIn:
    if importlib.util.find_spec("litellm") is None:
        require_service("the models extra (litellm) is not installed")
    return StandIn()


def test_a_streamed_step_leaves_its_text_and_one_line_per_call_on_screen(
    tmp_path: Path, stand_in: StandIn
) -> None:
    # Arguments four characters at a time, the four calls taking turns (by index).
    stand_in.wire = Wire(fragment=4, interleave=True)
    stand_in.side_answer = classification("general-task", "new")
    stand_in.script(Reply(PLAN_FIRST, CALLS), Reply(ANSWER))
    with serve(stand_in):
        env = {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": f"{stand_in.base_url}/v1"}
        term = Screen(tmp_path, "--model", "openai:gpt-4o-mini", env=dict(env, NO_COLOR="1"))
        term.expect("you>")
        term.sendline("Why does the stock test fail?")
        term.expect("lets one item too many")
        term.expect("you>")
        term.sendline("/quit")
        term.expect(pexpect.EOF)
    assert [r.body["stream"] for r in stand_in.step_requests()] == [True, True]
    shown = term.lines()
    screen = "\n".join(shown)
    asked = shown.index("you> Why does the stock test fail?")
    assert shown[asked + 1 : asked + 6] == [
        f"● {PLAN_FIRST}",
        "  ⏺ Glob(pattern='**/*.py')",
        "  ⏺ Read(path='inventory/stock.py')",
        "  ⏺ Grep(pattern='on_hand', path='inventory')",
        "  ⏺ Read(path='tests/test_stock.py')",
    ], screen
    assert sum("⏺" in line for line in shown) == len(CALLS), screen
    assert sum("⎿" in line for line in shown) == len(CALLS), screen
    assert sum(PLAN_FIRST in line for line in shown) == 1, screen
    assert [line for line in shown if ANSWER in line] == [f"● {ANSWER}"], screen
    assert "working…" not in screen  # the spinner left, and took nothing with it
