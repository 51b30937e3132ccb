"""Effect declarations: what a tool does to the world, declared by its author.

The plan gate classifies tools by their declared effect, never by their name, so a
renamed or unknown tool cannot slip through a name list: a tool without a
declaration is treated as side-effecting.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Effect",
    "declare_contained",
    "declare_effect",
    "declare_write_path",
    "declare_write_paths",
    "effect_of",
    "is_contained",
    "read_only",
    "write_path_of",
    "write_paths_of",
]

_ATTR = "__plangate_effect__"
_CONTAINED = "__plangate_contained__"
_PATHS = "__plangate_write_paths__"

T = TypeVar("T")


class Effect(StrEnum):
    READ = "read"
    """Observes only: reads files, queries read-only data, searches."""
    WRITE = "write"
    """Changes files, records or any other state outside the conversation."""
    SHELL = "shell"
    """Runs a shell command; read-only only when a parser proves the command is."""
    NETWORK = "network"
    """Reaches other machines (an API, a download, a push)."""
    SPAWN = "spawn"
    """Starts a sub-agent; as safe as the tools that sub-agent gets."""


def declare_effect(target: T, effect: Effect | str) -> T:
    """Attach an effect declaration to a function or a tool object and return it."""
    setattr(target, _ATTR, Effect(effect))
    return target


def read_only(func: T) -> T:
    """Decorator: declare a tool function as read-only."""
    return declare_effect(func, Effect.READ)


def effect_of(tool: Any) -> Effect | None:
    """The declared effect of a tool object (or of the function it wraps), if any."""
    declared = getattr(tool, _ATTR, None)
    if declared is None:
        declared = getattr(getattr(tool, "func", None), _ATTR, None)
    if declared is None or type(declared) is Effect:  # the usual case, without a lookup
        return declared
    return Effect(declared)


def declare_contained(target: T) -> T:
    """Declare that a shell tool runs every command in plangate's sandbox, whose profile
    follows the plan state (:mod:`plangate.sandbox`). The gate then lets it run commands
    the parser cannot prove read-only while planning, when the sandbox is available:
    the read-only filesystem holds them."""
    setattr(target, _CONTAINED, True)
    return target


def is_contained(tool: Any) -> bool:
    """Whether ``tool`` (or the function it wraps) runs its commands in the sandbox."""
    if getattr(tool, _CONTAINED, False):
        return True
    return bool(getattr(getattr(tool, "func", None), _CONTAINED, False))


def declare_write_path(target: T, arg: str, root: Path) -> T:
    """Declare that a write tool changes the file named by its argument ``arg``, relative
    to ``root``: an approved plan's scope is then checked against that path."""
    return declare_write_paths(target, (arg,), root)


def declare_write_paths(target: T, args: tuple[str, ...], root: Path | None = None) -> T:
    """Declare the arguments that name the files a write tool changes, relative to
    ``root`` (default: the workspace plangate was given). Every path is checked against
    the approved scope and the protected paths before the call runs. No arguments
    declares a tool that changes no file (its effect stays in the conversation, like a
    todo list); a write tool that declares nothing is refused under a scoped plan, since
    nothing says where it writes."""
    setattr(target, _PATHS, (tuple(args), None if root is None else Path(root)))
    return target


def write_paths_of(tool: Any) -> tuple[tuple[str, ...], Path | None] | None:
    """The ``(arguments, root)`` a write tool declared, if any."""
    declared = getattr(tool, _PATHS, None)
    if declared is None:
        declared = getattr(getattr(tool, "func", None), _PATHS, None)
    return declared


def write_path_of(tool: Any) -> tuple[str, Path] | None:
    """The ``(argument, root)`` of a write tool that declared exactly one path argument
    and its root (``Write``, ``Edit``: a call changes one file, shown as a diff)."""
    declared = write_paths_of(tool)
    if declared is None or len(declared[0]) != 1 or declared[1] is None:
        return None
    return declared[0][0], declared[1]
