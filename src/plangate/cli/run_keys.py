"""The keys pressed while the agent runs.

The terminal is in raw mode for the run, so Esc and Ctrl-C arrive as keys instead of a
signal that would kill the program: the first one cancels the running turn, a second
Ctrl-C quits. Other keys build a line shown beside the spinner; Enter hands it over
(``/plan`` and ``/plan off`` apply at the run's next step, anything else is set aside).
prompt_toolkit parses the bytes, so arrows and other escape sequences never leak in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from prompt_toolkit.input import Input, create_input
from prompt_toolkit.keys import Keys

__all__ = ["RunKeys"]

# How long a lone Esc waits for the rest of an escape sequence before it counts.
_ESCAPE_WAIT_S = 0.05

_ENTER = {Keys.ControlM, Keys.ControlJ}
_BACKSPACE = {Keys.ControlH, Keys.Backspace}


class RunKeys:
    """Reads the keyboard for one run; ``on_cancel`` on the first Esc or Ctrl-C,
    ``on_quit`` on a Ctrl-C after that, ``on_line`` for each line typed, ``on_typing``
    with the line so far."""

    def __init__(
        self,
        *,
        on_cancel: Callable[[], object],
        on_quit: Callable[[], None],
        on_line: Callable[[str], None],
        on_typing: Callable[[str], None],
    ) -> None:
        self.on_cancel = on_cancel
        self.on_quit = on_quit
        self.on_line = on_line
        self.on_typing = on_typing
        self.cancelled = False
        self.line = ""
        self._input: Input | None = None
        self._stack = contextlib.ExitStack()
        self._flush: asyncio.TimerHandle | None = None

    def __enter__(self) -> RunKeys:
        try:
            self._input = create_input()
            self._stack.enter_context(self._input.raw_mode())
            self._stack.enter_context(self._input.attach(self._ready))
        except Exception:
            # No terminal to read: the run goes on, it just cannot be cancelled by key.
            self._stack.close()
            self._input = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._flush is not None:
            self._flush.cancel()
        self._stack.close()

    def _ready(self) -> None:
        assert self._input is not None
        for key in self._input.read_keys():
            self._key(key.key, key.data)
        if self._flush is not None:
            self._flush.cancel()
        self._flush = asyncio.get_running_loop().call_later(_ESCAPE_WAIT_S, self._flush_keys)

    def _flush_keys(self) -> None:
        self._flush = None
        if self._input is not None:
            for key in self._input.flush_keys():
                self._key(key.key, key.data)

    def _key(self, key: Keys | str, data: str) -> None:
        if key in (Keys.Escape, Keys.ControlC):
            if not self.cancelled:
                self.cancelled = True
                self.on_cancel()
            elif key == Keys.ControlC:
                self.on_quit()
            return
        if key in _ENTER:
            line, self.line = self.line, ""
            self.on_typing("")
            self.on_line(line)
        elif key in _BACKSPACE:
            self.line = self.line[:-1]
            self.on_typing(self.line)
        elif key == Keys.BracketedPaste:
            *lines, self.line = (self.line + data.replace("\r\n", "\n")).split("\n")
            for line in lines:
                self.on_line(line)
            self.on_typing(self.line)
        elif isinstance(key, str) and len(key) == 1 and key.isprintable():
            self.line += key
            self.on_typing(self.line)
