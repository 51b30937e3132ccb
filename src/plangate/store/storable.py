"""Text every store can hold.

PostgreSQL refuses NUL (U+0000) in text and in JSONB (also as the escape ``\\u0000``),
and an unpaired surrogate in JSONB; SQLite takes both. A model reply, a tool argument or
a file a tool read may carry either, and the write of the whole turn would fail on
PostgreSQL only. So every text sent to the database has NUL and unpaired surrogates
replaced by U+FFFD (the Unicode replacement character): the turn is kept and a reader
sees where a character was dropped. (On SQLite, ADK serialises its session events
itself and they keep NUL, which SQLite stores; plangate's own tables are cleaned on
both.)

Two hooks on each engine (plangate's and ADK's): the JSON serializer cleans escapes in
the JSON it writes, and a statement hook cleans raw characters in text parameters. Text
that merely *spells* an escape (a backslash, then ``u0000``) is user content and kept.
The common case (no such character) costs one substring test per text.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "REPLACEMENT",
    "clean_json",
    "clean_parameters",
    "clean_text",
    "keep_text_storable",
    "storable_json",
]

REPLACEMENT = "\ufffd"
# In JSON text: an escape preceded by an even number of backslashes (so it is an escape,
# not an escaped backslash followed by "u0000").
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
_JSON_LONE_SURROGATE = re.compile(
    r"(?<!\\)((?:\\\\)*)(?:\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})"
    r"|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2})",
    re.IGNORECASE,
)
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_json(serialized: str) -> str:
    """JSON text with NUL and unpaired-surrogate escapes replaced by ``\\ufffd``."""
    if "\\u" not in serialized:  # the common case: one scan, no escape at all
        return serialized
    if "\\u0000" in serialized:
        serialized = _JSON_NUL.sub(r"\1\\ufffd", serialized)
    if "\\ud" in serialized or "\\uD" in serialized:
        serialized = _JSON_LONE_SURROGATE.sub(r"\1\\ufffd", serialized)
    return serialized


def storable_json(value: Any) -> str:
    """The engines' JSON serializer: ``json.dumps`` (as SQLAlchemy's default), cleaned."""
    return clean_json(json.dumps(value))


def clean_text(value: str) -> str:
    """``value`` with raw NUL and unpaired surrogates replaced."""
    if "\x00" in value:
        value = value.replace("\x00", REPLACEMENT)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a raw surrogate cannot even be encoded
            value = _LONE_SURROGATE.sub(REPLACEMENT, value)
    return value


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, tuple):
        return tuple(_clean(v) for v in cast(tuple[Any, ...], value))
    if isinstance(value, list):
        return [_clean(v) for v in cast(list[Any], value)]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in cast(dict[Any, Any], value).items()}
    return value


def clean_parameters(parameters: Any) -> Any:
    """A statement's parameters (one set or many) with every text cleaned."""
    return _clean(parameters)


def keep_text_storable(engine: AsyncEngine) -> None:
    """Clean the text parameters of every statement ``engine`` sends."""

    def _before(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> tuple[str, Any]:
        return statement, clean_parameters(parameters)

    event.listen(engine.sync_engine, "before_cursor_execute", _before, retval=True)
