"""``RunDisplay``: how one run is drawn in the terminal, read back through a terminal
emulator (pyte) so that lines redrawn in place count once, as a user sees them."""

from __future__ import annotations

import io
from typing import Any

import pyte
from google.adk.events.event import Event
from google.genai import types
from rich.console import Console
from rich.text import Text

from plangate.cli.run_display import WORKING, RunDisplay, merge_partial_arg

COLUMNS, ROWS = 100, 30


class Terminal:
    """A Rich console writing into a terminal emulator."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.console = Console(
            file=self.out, force_terminal=True, width=COLUMNS, height=ROWS, color_system=None
        )
        self.screen = pyte.HistoryScreen(COLUMNS, ROWS, history=500)
        self.stream = pyte.Stream(self.screen)
        self.fed = 0

    def lines(self) -> list[str]:
        """What the terminal shows now (lines scrolled above the screen included)."""
        # Rich's refresh thread may write meanwhile: feed only what was written so far.
        written = self.out.getvalue()
        # The console writes "\n"; a terminal's line discipline makes it "\r\n".
        self.stream.feed(written[self.fed :].replace("\n", "\r\n"))
        self.fed = len(written)
        above = ["".join(line[x].data for x in range(COLUMNS)) for line in self.screen.history.top]
        shown = [line.rstrip() for line in [*above, *self.screen.display]]
        while shown and not shown[-1]:
            shown.pop()
        return shown


def said(text: str, *, partial: bool) -> Event:
    part = types.Part(text=text)
    return Event(author="agent", partial=partial, content=types.Content(role="model", parts=[part]))


def fragment(call_id: str, name: str, path: str, piece: str) -> Event:
    """A partial event carrying one piece of one call's arguments, as ADK's LiteLLM
    adapter sends it."""
    call = types.FunctionCall(
        id=call_id,
        name=name,
        partial_args=[types.PartialArg(json_path=path, string_value=piece, will_continue=True)],
        will_continue=True,
    )
    return Event(
        author="agent",
        partial=True,
        content=types.Content(role="model", parts=[types.Part(function_call=call)]),
    )


def complete(text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> Event:
    parts = [types.Part(text=text)] if text else []
    parts += [
        types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))
        for call_id, name, args in calls
    ]
    return Event(author="agent", content=types.Content(role="model", parts=parts))


def results(calls: list[tuple[str, str, dict[str, Any]]]) -> Event:
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=call_id,
                name=name,
                response={"path": args["path"], "content": "x", "total_lines": 38},
            )
        )
        for call_id, name, args in calls
    ]
    return Event(author="agent", content=types.Content(role="user", parts=parts))


CALLS = [
    ("call_0", "Read", {"path": "inventory/stock.py"}),
    ("call_1", "Read", {"path": "tests/test_stock.py"}),
    ("call_2", "Glob", {"path": "docs/**/*.md"}),
]


def interleaved_fragments() -> list[Event]:
    """The calls' arguments four characters at a time, the calls taking turns."""
    rounds = [
        [
            fragment(call_id, name, "$.path", args["path"][i : i + 4])
            for i in range(0, len(args["path"]), 4)
        ]
        for call_id, name, args in CALLS
    ]
    return [round_[n] for n in range(max(map(len, rounds))) for round_ in rounds if n < len(round_)]


def call_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.lstrip().startswith("⏺")]


def test_a_streamed_step_shows_each_call_once_updated_in_place() -> None:
    term = Terminal()
    with RunDisplay(term.console, Text(WORKING)) as display:
        for chunk in ("I will ", "plan ", "first."):
            display.show(said(chunk, partial=True))
        assert term.lines()[-2:] == ["● I will plan first.", f"⠋ {WORKING}"]

        for event in interleaved_fragments():
            display.show(event)
        live = term.lines()
        assert call_lines(live) == [
            "  ⏺ Read(path='inventory/stock.py')",
            "  ⏺ Read(path='tests/test_stock.py')",
            "  ⏺ Glob(path='docs/**/*.md')",
        ]
        assert live[-5] == "● I will plan first."
        assert live[-1].endswith(WORKING)  # the spinner stays below the streamed output

        # The complete event repeats the text and the calls: each shows once.
        activity = display.show(complete("I will plan first.", CALLS))
        assert activity == "running Glob… (Esc cancels)"
        display.show(results(CALLS))
        for chunk in ("The guard ", "is off\nby one."):
            display.show(said(chunk, partial=True))
        display.show(said("The guard is off\nby one.", partial=False))
    shown = term.lines()
    assert shown[0] == "● I will plan first."
    assert call_lines(shown) == [
        "  ⏺ Read(path='inventory/stock.py')",
        "  ⏺ Read(path='tests/test_stock.py')",
        "  ⏺ Glob(path='docs/**/*.md')",
    ]
    assert shown[-2:] == ["● The guard is off", "by one."]
    assert sum("plan first" in line for line in shown) == 1
    assert not any(WORKING in line for line in shown)  # the spinner is gone, nothing else


def test_a_model_that_does_not_stream_prints_each_event_as_it_comes() -> None:
    term = Terminal()
    with RunDisplay(term.console, Text(WORKING)) as display:
        display.show(complete("I will plan first.", CALLS[:1]))
        display.show(results(CALLS[:1]))
        display.show(said("Done.", partial=False))
    assert term.lines() == [
        "● I will plan first.",
        "  ⏺ Read(path='inventory/stock.py')",
        "    ⎿ read inventory/stock.py (38 lines)",
        "● Done.",
    ]


def test_a_run_cut_off_mid_step_keeps_what_was_shown() -> None:
    term = Terminal()
    with RunDisplay(term.console, Text(WORKING)) as display:
        display.show(said("Looking at", partial=True))
        display.show(fragment("call_0", "Read", "$.path", "inven"))
    assert term.lines() == ["● Looking at", "  ⏺ Read(path='inven') (cut off)"]


def test_streamed_fragments_build_the_arguments() -> None:
    args: dict[str, Any] = {}
    for arg in (
        types.PartialArg(json_path="$.pattern", string_value="on_"),
        types.PartialArg(json_path="$.pattern", string_value="hand"),
        types.PartialArg(json_path="$.limit", number_value=20.0),
        types.PartialArg(json_path="$.ratio", number_value=0.5),
        types.PartialArg(json_path="$.all", bool_value=True),
        types.PartialArg(json_path="$.glob", null_value="NULL_VALUE"),
    ):
        merge_partial_arg(args, arg)
    assert args == {"pattern": "on_hand", "limit": 20, "ratio": 0.5, "all": True, "glob": None}
