"""One run on the terminal while it streams.

What is finished is printed once, for good; what is still arriving -- the line of text
being written, the tool calls whose arguments still stream -- is drawn in place in a
live area at the bottom, with the spinner under it (Rich's ``Live``: a print goes above
the area, the area is redrawn below it, so the spinner never erases what was said).

A streaming model sends each step twice: as partial events (text chunks, call
fragments) and then as one complete event repeating all of it. Partial events only
change the live area, except that each finished line of text is printed as it ends; the
complete event ends the step: its calls are printed once, in place of their live lines,
and its text only if none streamed. A model that does not stream sends only complete
events, which print as they come.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from google.adk.events.event import Event
from google.genai import types
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from plangate.cli.render import (
    call_line,
    is_confirmation,
    render_call,
    render_result,
    render_todos,
)

__all__ = ["WORKING", "RunDisplay", "merge_partial_arg"]

WORKING = "working… (Esc cancels)"

TEXT_MARK = ("● ", "bold")
"""What starts the agent's text on screen (as a complete text event prints it)."""


@dataclass
class _StreamingCall:
    """A tool call whose arguments are still arriving."""

    name: str = ""
    args: dict[str, Any] = field(default_factory=dict)


def merge_partial_arg(args: dict[str, Any], arg: types.PartialArg) -> None:
    """Add one streamed fragment to ``args``: a string value arrives in pieces to append,
    any other value whole. A nested path keeps its dotted name (this is for display)."""
    key = (arg.json_path or "").removeprefix("$.")
    if not key:
        return
    if arg.string_value is not None:
        before = args.get(key)
        args[key] = (before if isinstance(before, str) else "") + arg.string_value
    elif arg.number_value is not None:
        number = arg.number_value
        args[key] = int(number) if number.is_integer() else number
    elif arg.bool_value is not None:
        args[key] = arg.bool_value
    elif arg.null_value is not None:
        args[key] = None


class RunDisplay:
    """One run on screen: enter it for the run and give it each event (:meth:`show`).
    Other prints during the run go through ``console`` as usual and land above the live
    area."""

    def __init__(self, console: Console, status: Text) -> None:
        self.console = console
        self._spinner = Spinner("dots", text=status, style="status.spinner")
        # Redrawn on every change (below) and by Rich's timer, which turns the spinner.
        self._live = Live(console=console, refresh_per_second=12.5, transient=True)
        self._tail = ""
        """The line of text still arriving."""
        self._streamed = False
        """Text of this step has streamed (the complete event must not repeat it)."""
        self._printed = False
        """A line of this step's text is on screen for good (it carries the mark)."""
        self._calls: dict[str, _StreamingCall] = {}

    def __enter__(self) -> RunDisplay:
        self._live.start()
        self._redraw()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        # A run cut off mid-step (cancelled, failed) keeps what the user already saw.
        self._print_tail()
        for call in self._calls.values():
            self.console.print(
                call_line(call.name, call.args, streaming=True).append(" (cut off)", "dim")
            )
        self._calls.clear()
        self._live.stop()

    def show(self, event: Event) -> str | None:
        """Show one event of the run; returns what the run does now, for the spinner, when
        that changed (a tool started, results came back)."""
        parts = (event.content.parts if event.content else []) or []
        if event.partial:
            self._stream(parts)
            return None
        if not parts:
            return None  # a state change, not something said: the step may still stream
        # The complete event of a streamed step repeats its text, which is on screen.
        streamed = self._end_step()
        activity: str | None = None
        for part in parts:
            if part.text and not part.thought:
                if not streamed:
                    # Model text is never Rich markup: "[demo]" or "[a]" must print as typed.
                    self.console.print(Text.assemble(TEXT_MARK, part.text))
            elif part.function_call is not None:
                name = part.function_call.name or ""
                if is_confirmation(name):
                    continue  # the pause itself; the request is asked after the run
                render_call(self.console, name, dict(part.function_call.args or {}))
                activity = f"running {name}… (Esc cancels)"
            elif part.function_response is not None:
                name = part.function_response.name or ""
                result = dict(part.function_response.response or {})
                render_result(self.console, name, result)
                if name == "todo_write" and "todos" in result:
                    render_todos(self.console, result["todos"])
                activity = WORKING
        return activity

    def _stream(self, parts: list[types.Part]) -> None:
        """A partial event: text and call fragments go to the live area."""
        for part in parts:
            if part.thought:
                continue
            if part.text:
                self._stream_text(part.text)
            elif part.function_call is not None and not is_confirmation(part.function_call.name):
                self._stream_call(part.function_call)

    def status(self, text: Text) -> None:
        """What the spinner says."""
        self._spinner.update(text=text)
        self._redraw()

    def _stream_text(self, chunk: str) -> None:
        """A piece of the step's text: finished lines are printed, the rest waits live."""
        if not chunk:
            return
        self._streamed = True
        *finished, self._tail = (self._tail + chunk).split("\n")
        for line in finished:
            self._print_line(line)
        self._redraw()

    def _stream_call(self, call: types.FunctionCall) -> None:
        """A fragment of a call: its line is drawn again with what has arrived so far."""
        # The id is the provider's, the same on every fragment of one call (LiteLLM falls
        # back to the call's index); a call with neither is drawn under its name.
        shown = self._calls.setdefault(call.id or call.name or "", _StreamingCall())
        shown.name = call.name or shown.name
        if call.args:
            shown.args = dict(call.args)
        for arg in call.partial_args or []:
            merge_partial_arg(shown.args, arg)
        self._redraw()

    def _end_step(self) -> bool:
        """The step is complete: print its last line of text and clear its streaming calls
        (the complete event prints them). True when its text streamed, so the complete
        event's text is already on screen."""
        streamed = self._streamed
        self._print_tail()
        self._streamed = self._printed = False
        self._calls.clear()
        self._redraw()
        return streamed

    def _print_tail(self) -> None:
        if self._tail:
            self._print_line(self._tail)
            self._tail = ""

    def _print_line(self, line: str) -> None:
        # Model text is never Rich markup: "[demo]" or "[a]" must print as typed.
        self.console.print(Text(line) if self._printed else Text.assemble(TEXT_MARK, line))
        self._printed = True

    def _redraw(self) -> None:
        shown: list[RenderableType] = []
        if self._tail:
            shown.append(
                Text(self._tail) if self._printed else Text.assemble(TEXT_MARK, self._tail)
            )
        shown.extend(
            call_line(call.name or "…", call.args, streaming=True) for call in self._calls.values()
        )
        shown.append(self._spinner)
        # A new group each time: Rich's timer thread renders whatever group is current.
        self._live.update(Group(*shown), refresh=True)
