"""Split a shell line into the simple commands it runs, or say why it cannot be done.

A plan scope names command prefixes; a line is covered only when every command in it
(joined by ``&&``, ``||``, ``;`` or ``|``) starts with one. Anything whose words bash
could still change -- substitutions, expansions, assignments, redirections to files,
compound statements -- cannot be matched word by word, so it is not split: the scope
then covers it only by its exact text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import bashlex  # type: ignore[import-untyped]

__all__ = ["split_commands"]

_OPERATORS = frozenset({"&&", "||", ";", "\n"})
_PIPES = frozenset({"|", "|&"})


class _Unsplittable(Exception):
    pass


@lru_cache(maxsize=256)
def split_commands(command: str) -> tuple[tuple[str, ...], ...] | None:
    """The argv of each simple command in ``command``; None when it cannot be split
    reliably (see the module docstring).

    Kept for the last commands split: the gate splits a command to judge it against the
    scope and the ``Bash`` tool asks again for its network, so a command is parsed once
    per call (the answer is immutable tuples, safe to share)."""
    if not command.strip() or "\x00" in command or "$'" in command or '$"' in command:
        return None
    try:
        trees = bashlex.parse(command)
        found: list[tuple[str, ...]] = []
        for tree in trees:
            _visit(tree, found)
    except _Unsplittable:
        return None
    except Exception:  # bashlex raises several types; all mean "not understood"
        return None
    return tuple(found) or None


def _visit(node: Any, found: list[tuple[str, ...]]) -> None:
    kind = node.kind
    if kind == "list":
        for part in node.parts:
            if part.kind == "operator":
                if part.op not in _OPERATORS:
                    raise _Unsplittable(part.op)
            else:
                _visit(part, found)
    elif kind == "pipeline":
        for part in node.parts:
            if part.kind == "pipe":
                if part.pipe not in _PIPES:
                    raise _Unsplittable(part.pipe)
            else:
                _visit(part, found)
    elif kind == "command":
        found.append(_argv(node))
    else:
        raise _Unsplittable(kind)


def _argv(node: Any) -> tuple[str, ...]:
    words: list[str] = []
    for part in node.parts:
        if part.kind == "word":
            if part.parts:  # substitutions, parameters, tildes
                raise _Unsplittable("expansion")
            if any(c in part.word for c in "*?[{"):
                raise _Unsplittable("glob or brace")
            words.append(part.word)
        elif part.kind == "redirect":
            _check_redirect(part)
        else:
            raise _Unsplittable(part.kind)
    if not words:
        raise _Unsplittable("no program")
    return tuple(words)


def _check_redirect(redirect: Any) -> None:
    """Only redirections that write no file keep a command matchable by its words."""
    target = redirect.output
    if redirect.type in (">&", "<&") and (isinstance(target, int) or target == "-"):
        return
    word = getattr(target, "word", target)
    if redirect.type in (">", ">>", "&>", "2>") and word == "/dev/null":
        return
    raise _Unsplittable(f"redirection {redirect.type}")
