"""The sandbox profile chosen for the tool call in progress, and paths no command may read.

The plan gate decides the profile at the moment of the call (it has just read the plan
state) and records it here; the tool that starts the process reads it. A context
variable keeps parallel tool calls apart: ADK runs each call of a batch in its own task,
and the gate and the tool of one call run in the same one.
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path

from plangate.plan.scope import Scope
from plangate.sandbox.policy import Profile

__all__ = [
    "current_profile",
    "current_scope",
    "hidden_paths",
    "hide_path",
    "set_profile",
    "set_scope",
]

_profile: ContextVar[Profile | None] = ContextVar("plangate_sandbox_profile", default=None)
_scope: ContextVar[Scope | None] = ContextVar("plangate_sandbox_scope", default=None)
_hidden: set[Path] = set()


def set_profile(profile: Profile) -> None:
    _profile.set(profile)


def set_scope(scope: Scope | None) -> None:
    """The approved plan scope the call acts under (None: the whole workspace)."""
    _scope.set(scope)


def current_scope() -> Scope | None:
    return _scope.get()


def current_profile() -> Profile:
    """The profile the gate chose for this call; ``acting`` when no plan gate is mounted
    (with no Plan Mode there is no plan to protect)."""
    return _profile.get() or Profile.ACTING


def hide_path(path: str | Path) -> None:
    """Hide ``path`` from every sandboxed command of this process (plangate's database)."""
    _hidden.add(Path(path).expanduser().resolve())


def hidden_paths() -> tuple[Path, ...]:
    return tuple(sorted(_hidden))
