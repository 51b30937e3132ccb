"""A Rich console that never passes a hidden character of printed text to the screen.

Rich writes the characters of a ``Text`` as they are: an escape sequence in model text
(a plan, a question, tool output, a streamed reply) would move the cursor, clear the
screen or draw a fake line. The hook below rewrites the text of every printed segment
with :func:`plangate.plan.visible.visible_text`, so ESC shows as ``\\x1b`` and a bidi
override as ``\\u202e``; Rich's own styles and cursor controls are not text, so they
pass unchanged.
"""

from __future__ import annotations

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.segment import Segment

from plangate.plan.visible import visible_text

__all__ = ["VisibleText", "visible_console"]


class _Shown:
    """``renderable`` as the screen gets it: each text segment with hidden characters
    made visible (layout was computed before, so a marker may widen a line; shown, not
    hidden, is what matters)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(visible_text(segment.text), segment.style)


class VisibleText(RenderHook):
    """The render hook: every renderable printed goes through :class:`_Shown`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Shown(r) for r in renderables]  # type: ignore[misc]


def visible_console(*args: object, **kwargs: object) -> Console:
    """A :class:`Console` with :class:`VisibleText` installed."""
    console = Console(*args, **kwargs)  # type: ignore[arg-type]
    console.push_render_hook(VisibleText())
    return console
