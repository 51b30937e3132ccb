"""Reading what the human types: prompt_toolkit on a terminal, plain lines on a pipe.

A human decision (an approval, an answer, Plan Mode entry) must come from a key pressed
on a prompt that is on screen. Lines typed ahead or pasted while the agent worked were
meant for something else, so every decision prompt first throws pending input away:
the terminal's input queue and prompt_toolkit's own typed-ahead keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input.typeahead import clear_typeahead

__all__ = [
    "Interrupt",
    "LineReader",
    "PipeReader",
    "Prompted",
    "TtyReader",
    "discard_pending_input",
    "has_undecodable",
]


class Interrupt(enum.Enum):
    """What ended a prompt other than a line: Ctrl-C, or the end of input (Ctrl-D)."""

    CTRL_C = "ctrl-c"
    EOF = "eof"


@dataclass(frozen=True)
class Prompted:
    """One read: the line typed, or the interrupt that ended the prompt; ``undecodable``
    when the bytes were not UTF-8 (the line is then not usable)."""

    text: str = ""
    interrupt: Interrupt | None = None
    undecodable: bool = False


def has_undecodable(text: str) -> bool:
    """prompt_toolkit keeps bytes that are not UTF-8 as lone surrogates."""
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def discard_pending_input(fd: int) -> None:
    """Drop whatever was typed or pasted but not read yet (the tty's input queue)."""
    # Not a terminal: nothing is pending in the sense of typed-ahead.
    with contextlib.suppress(termios.error, OSError):
        termios.tcflush(fd, termios.TCIFLUSH)


class LineReader:
    """The interface ``plangate chat`` reads through."""

    interactive: bool = False

    async def read(
        self, prompt: str, *, decision: bool = False, toolbar: str | None = None
    ) -> Prompted:
        raise NotImplementedError


class TtyReader(LineReader):
    """prompt_toolkit prompts: history (saved to ``history_file``), arrow keys, pastes of
    any length (bracketed paste keeps newlines in one message), a bottom toolbar."""

    interactive = True

    def __init__(self, history_file: Path | None = None) -> None:
        history: History = InMemoryHistory()
        if history_file is not None:
            try:
                history_file.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(history_file))
            except OSError:
                pass  # an unwritable folder costs the saved history, not the chat
        self.messages: PromptSession[str] = PromptSession(history=history)
        # Decisions keep their own history: "a" must never come back with the up arrow
        # at the message prompt, nor a message at an approval.
        self.decisions: PromptSession[str] = PromptSession(history=InMemoryHistory())
        self.fd = sys.stdin.fileno()

    def discard_pending(self) -> None:
        discard_pending_input(self.fd)
        clear_typeahead(self.messages.input)
        clear_typeahead(self.decisions.input)

    async def read(
        self, prompt: str, *, decision: bool = False, toolbar: str | None = None
    ) -> Prompted:
        session = self.decisions if decision else self.messages
        try:
            text = await session.prompt_async(
                prompt,
                bottom_toolbar=toolbar,
                # Flushed as the prompt starts, so only keys pressed on it count.
                pre_run=self.discard_pending if decision else None,
            )
        except KeyboardInterrupt:
            return Prompted(interrupt=Interrupt.CTRL_C)
        except EOFError:
            return Prompted(interrupt=Interrupt.EOF)
        if has_undecodable(text):
            return Prompted(undecodable=True)
        return Prompted(text=text)


class PipeReader(LineReader):
    """Lines from a stdin that is not a terminal (a script, a test piping input)."""

    interactive = False

    async def read(
        self, prompt: str, *, decision: bool = False, toolbar: str | None = None
    ) -> Prompted:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        raw = await asyncio.to_thread(sys.stdin.buffer.readline)
        if not raw:
            sys.stdout.write("\n")
            return Prompted(interrupt=Interrupt.EOF)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return Prompted(undecodable=True)
        return Prompted(text=text.rstrip("\r\n"))
