"""Paths no sandboxed command may read: plangate's database, wherever it lives.

The profile a command runs under is not kept here: it follows the call's authority
(:mod:`plangate.policy.authority`), which the plan gate records for every call.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["hidden_paths", "hide_path"]

_hidden: set[Path] = set()


def hide_path(path: str | Path) -> None:
    """Hide ``path`` from every sandboxed command of this process (plangate's database)."""
    _hidden.add(Path(path).expanduser().resolve())


def hidden_paths() -> tuple[Path, ...]:
    return tuple(sorted(_hidden))
