"""Character budgets that never cut a surrogate pair in half.

Python strings are code points, but text that went through UTF-16 round trips (JSON with
``surrogatepass``, browser payloads) can still carry a high/low surrogate pair as two
code points. Budgets here count such a pair as one character and never split it.
"""

from __future__ import annotations

__all__ = ["code_point_length", "truncate_text"]


def _is_high_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _is_low_surrogate(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


def code_point_length(text: str) -> int:
    """Length in user-visible code points: a surrogate pair counts once."""
    pairs = sum(
        1
        for index in range(len(text) - 1)
        if _is_high_surrogate(text[index]) and _is_low_surrogate(text[index + 1])
    )
    return len(text) - pairs


def truncate_text(text: str, max_chars: int, *, ellipsis: str = "", keep: str = "head") -> str:
    """At most ``max_chars`` characters of ``text`` (``len`` units), ``ellipsis`` included.

    ``keep="head"`` keeps the beginning and appends the ellipsis; ``keep="tail"`` keeps the
    end and prepends it. A cut that would separate a surrogate pair moves inward by one.
    """
    if max_chars < 0:
        raise ValueError("max_chars must not be negative")
    if len(text) <= max_chars:
        return text
    if len(ellipsis) >= max_chars:
        return ellipsis[:max_chars] if max_chars else ""
    room = max_chars - len(ellipsis)
    if keep == "tail":
        start = len(text) - room
        if start > 0 and _is_low_surrogate(text[start]) and _is_high_surrogate(text[start - 1]):
            start += 1
        return ellipsis + text[start:]
    end = room
    if (
        end > 0
        and _is_high_surrogate(text[end - 1])
        and end < len(text)
        and _is_low_surrogate(text[end])
    ):
        end -= 1
    return text[:end] + ellipsis
