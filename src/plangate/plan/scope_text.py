"""The plan scope as text a reviewer edits with the plan, in $EDITOR or a plan file.

The scope goes first, as TOML front matter between ``+++`` lines (the convention of
static-site generators such as Hugo and Zola), and the Markdown follows:

    +++
    # What the approved plan may write, run and reach. ...
    write = ["inventory/stock.py"]
    commands = ["python -m pytest"]
    network = false
    +++

    # Fix over-reservation ...

At the top so that text added at the end of the file is plan text; TOML because it is
what people already edit by hand for configuration, and the standard library reads it.
Deleting the whole block keeps the scope as it was; the block's values go through
:class:`~plangate.plan.scope.Scope`'s own validation, so an edited scope is held to the
same rules as the model's.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from pydantic import ValidationError

from plangate.plan.scope import Scope, ScopeError, check_shown_entries

__all__ = ["ScopeTextError", "split_scope_block", "with_scope_block"]

_FENCE = "+++"
_HELP = (
    "# What the approved plan may write, run and reach. Edit the lists to change it;\n"
    "# delete this block (both +++ lines) to keep it as it is."
)


class ScopeTextError(ValueError):
    """The scope block was edited into something that is not a scope; says why."""


def with_scope_block(content: str, scope: Scope | None) -> str:
    """``scope`` as an editable block, followed by ``content``; a plan without a scope
    is ``content`` alone (there is nothing to edit above it)."""
    if scope is None:
        return content
    # Exact commands (granted by amendments) only when there are some, so the block of
    # a plan without them reads as it always did.
    exact = [f"exact_commands = {_array(scope.exact_commands)}"] if scope.exact_commands else []
    if scope.network_commands:
        exact.append(f"network_commands = {_array(scope.network_commands)}")
    return "\n".join(
        [
            _FENCE,
            _HELP,
            f"write = {_array(scope.write)}",
            f"commands = {_array(scope.commands)}",
            *exact,
            f"network = {'true' if scope.network else 'false'}",
            _FENCE,
            "",
            content,
        ]
    )


def split_scope_block(text: str, *, content: str, scope: Scope | None) -> tuple[str, Scope | None]:
    """The Markdown and the scope of an edited text; the scope is None when the block
    was deleted. ``content`` and ``scope`` are what :func:`with_scope_block` wrote for
    editing: the block is plangate's only when it wrote one, so a ``+++`` block the
    model put into its plan stays plan text (it never becomes the scope, also when the
    reviewer deletes plangate's block above it). Raises :class:`ScopeTextError` naming
    what is wrong with the block."""
    lines = text.lstrip("\ufeff").split("\n")
    if scope is None or not lines or lines[0].strip() != _FENCE:
        return text, None
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise ScopeTextError("the scope block has no closing +++ line") from None
    if lines[: end + 1] == content.lstrip("\ufeff").split("\n")[: end + 1]:
        return text, None
    body = "\n".join(lines[end + 1 :]).lstrip("\n")
    try:
        data: dict[str, Any] = tomllib.loads("\n".join(lines[1:end]))
    except tomllib.TOMLDecodeError as exc:
        raise ScopeTextError(f"the scope block is not valid TOML ({exc})") from exc
    try:
        # Held to the same rules as the model's scope, plain text and simple commands too.
        return body, check_shown_entries(Scope.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "scope"
        raise ScopeTextError(f"the scope's '{where}' is not valid: {first['msg']}") from exc
    except ScopeError as exc:
        raise ScopeTextError(str(exc)) from exc


def _array(values: tuple[str, ...]) -> str:
    # A JSON string is a TOML basic string with the same escapes, so each entry is
    # written exactly and reads back unchanged (DEL is the one character TOML also
    # wants escaped; \u escapes of surrogates are not TOML, hence ensure_ascii=False).
    return (
        "["
        + ", ".join(json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f") for v in values)
        + "]"
    )
