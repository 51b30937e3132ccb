"""Text the model wrote, with every character a reviewer could not see made visible.

What a reviewer approves must be what they saw. A terminal obeys escape sequences, a
right-to-left override reverses the rest of a line, zero-width characters and runs of
no-break spaces hide what follows. Every surface (terminal, web page, ACP editor) passes
model text through :func:`visible_text` before showing it, so each such character shows
as a marker: ``\\x1b`` for a control character, ``\\u202e`` for a format (bidi,
zero-width) character or a space other than the plain one.

Pure: a string in, a string out; the same rules are mirrored in the web page
(``web/static/render.js``, ``visible``).
"""

from __future__ import annotations

import unicodedata

__all__ = ["hidden_characters", "is_hidden", "visible_text"]

# Spaces a reader sees as spaces: the plain one, and the ideographic space of CJK text.
_PLAIN_SPACES = frozenset(" \u3000")


def is_hidden(char: str, *, keep_layout: bool = True) -> bool:
    """Whether ``char`` changes or hides what a reader sees instead of showing itself.
    ``keep_layout`` keeps newline and tab (multi-line text); without it they count too."""
    if keep_layout and char in "\n\t":
        return False
    category = unicodedata.category(char)
    if category in ("Cc", "Cf", "Zl", "Zp"):
        # Controls (ESC, CR, BEL, C1), format characters (bidi overrides and isolates,
        # zero-width spaces and joiners, soft hyphen, tags), line/paragraph separators.
        return True
    return category == "Zs" and char not in _PLAIN_SPACES


def _marker(char: str) -> str:
    code = ord(char)
    if code < 0x100 and unicodedata.category(char) == "Cc":
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible_text(text: str, *, keep_layout: bool = True) -> str:
    """``text`` with each hidden character replaced by its marker (``\\x1b``,
    ``\\u202e``, ``\\u00a0``). Newlines and tabs stay when ``keep_layout`` (a CRLF line
    end becomes a newline); otherwise they show as markers too (one-line fields)."""
    if keep_layout:
        text = text.replace("\r\n", "\n")
    if not any(is_hidden(c, keep_layout=keep_layout) for c in text):
        return text
    return "".join(_marker(c) if is_hidden(c, keep_layout=keep_layout) else c for c in text)


def hidden_characters(text: str, *, keep_layout: bool = False) -> tuple[str, ...]:
    """The markers of the hidden characters in ``text``, each once, in order (for a
    message naming them)."""
    return tuple(dict.fromkeys(_marker(c) for c in text if is_hidden(c, keep_layout=keep_layout)))
