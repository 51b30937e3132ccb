"""What the agent may do for one tool call: decided once, asked by every executor.

The plan gate reads plangate's store at every tool call and records the answer here as
one :class:`Authority`; the tool that then acts -- the ``Bash`` sandbox, ``Write`` and
``Edit`` -- asks it and nothing else. A context variable keeps parallel calls apart:
ADK runs each call of a batch in its own task, and the gate and the tool of one call run
in the same one. An executor that finds no authority (a tool called around the gate)
fails closed.

Protected paths are the same for every executor: whatever makes git run a program the
next time the user types a git command (a repository's config, hooks, ``commondir``,
``info/``, ``modules/``, ``worktrees/``, or a ``.git`` file or folder anywhere, which can
point git at another repository's config), plangate's own ``.plangate`` folder, and
plangate's database with its WAL and SHM files wherever they live.

Under protocol governance the authority also carries the protocol phase in force
(:class:`ProtocolGrant`): the segment's state as read for this call, and the one function
(:meth:`Authority.decide_action`) that says whether an action runs in it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from plangate.errors import CodedError, ErrorCode
from plangate.plan.record import PlanRecord
from plangate.plan.scope import Scope
from plangate.policy.effects import Effect
from plangate.protocol.definitions import (
    DEFINITIONS,
    Authorization,
    Guard,
    ProtocolDefinition,
    ProtocolRef,
    ProtocolState,
    authorize_action,
)

__all__ = [
    "GIT_PROGRAM_PATHS",
    "Authority",
    "NoAuthority",
    "ProtectedPath",
    "ProtocolGrant",
    "authority_of",
    "current_authority",
    "protected_paths",
    "protected_reason",
    "require_authority",
    "set_authority",
    "use_authority",
]

GIT_PROGRAM_PATHS = (
    "config",
    "config.worktree",
    "hooks",
    "commondir",
    "info",
    "modules",
    "worktrees",
)
"""Entries of a git directory that can make git run a program or read another config."""

_PLANGATE_FOLDER = ".plangate"


@dataclass(frozen=True)
class ProtocolGrant:
    """The protocol phase in force for one call: the segment's state as the protocol
    runtime read it, and what decides an action in it."""

    state: ProtocolState
    common_actions: frozenset[str] = frozenset()
    """Actions every phase allows (the tool plan's common actions)."""
    guard: Guard | None = None
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = field(
        default_factory=lambda: DEFINITIONS
    )

    @property
    def phase(self) -> str:
        return self.state.phase

    def decide(self, action: str) -> Authorization:
        """Whether ``action`` runs in this phase (segment active, budget, phase, guard)."""
        return authorize_action(
            self.state,
            action,
            common_actions=self.common_actions,
            guard=self.guard,
            definitions=self.definitions,
        )


@dataclass(frozen=True)
class Authority:
    """What the agent may do now, as the gate read it from the store for this call."""

    planning: bool
    """A plan is being made (or its state cannot be read): nothing may change."""
    scope: Scope | None = None
    """The approved plan's scope in force; None: the whole workspace (no scoped plan)."""
    protected_files: tuple[Path, ...] = field(default=())
    """Absolute paths no executor may write, wherever they are (plangate's database)."""
    protocol: ProtocolGrant | None = None
    """The protocol phase in force; None: no protocol governs this call."""

    def with_protocol(self, grant: ProtocolGrant) -> Authority:
        """This authority under the protocol phase ``grant`` (read for the same call)."""
        return replace(self, protocol=grant)

    def decide_action(self, action: str) -> Authorization | None:
        """The protocol phase's decision on ``action``; None when no protocol governs."""
        return None if self.protocol is None else self.protocol.decide(action)

    def refuses_write(self, rel: str, resolved: Path) -> str | None:
        """Why a write of ``rel`` (relative to the workspace; ``resolved`` its absolute,
        symlink-free form) is refused whatever else allows it; None when it is not."""
        if self.planning:
            return "a plan is being made, so nothing may change until it is approved"
        if resolved in self.protected_files:
            return f"{rel} is plangate's database"
        return protected_reason(rel)

    def refuses_tool(
        self,
        tool: str,
        effect: Effect | None,
        paths: Sequence[tuple[str, Path]] | None,
    ) -> CodedError | None:
        """Why a call of a tool that is not plangate's is refused whatever else allows it;
        None when it is not. ``paths`` are the files the call writes (relative, resolved)
        as its declaration names them, None when nothing declares them.

        Under a scoped plan a network tool needs a scope with the network, and a tool
        that may write (declared ``write``, or declaring nothing) needs declared paths,
        which the scope then judges; a protected path is refused under any plan."""
        scope = self.scope
        if scope is not None and effect is Effect.NETWORK and not scope.network:
            return CodedError(
                ErrorCode.OUTSIDE_SCOPE,
                f"{tool} reaches the network, and the approved plan's scope says no "
                "network; it did not run",
                "do without it, or ask the user for a plan whose scope includes the network",
                tool=tool,
            )
        if paths is None:
            if scope is not None and effect in (Effect.WRITE, None):
                what = "is declared to write" if effect is Effect.WRITE else "declares no effect"
                return CodedError(
                    ErrorCode.PATHS_UNDECLARED,
                    f"{tool} {what} but names no path argument, so the approved plan's "
                    "scope cannot be checked against what it changes; it did not run",
                    "declare its path arguments (declare_write_paths, or paths.arg in "
                    ".plangate/policy.toml), or do without it",
                    tool=tool,
                )
            return None
        for rel, resolved in paths:
            reason = self.refuses_write(rel, resolved)
            if reason is not None:
                return ProtectedPath(reason)
        return None


def authority_of(
    record: PlanRecord | None, *, planning: bool, protected_files: tuple[Path, ...] = ()
) -> Authority:
    """The authority a call has under ``record`` (None: no plan). ``planning`` is the
    gate's reading (a plan being made, or a state it cannot read)."""
    granted = record is not None and record.is_being_implemented()
    return Authority(
        planning=planning,
        scope=record.scope if granted and record is not None else None,
        protected_files=protected_files,
    )


def protected_reason(rel: str) -> str | None:
    """Why the workspace path ``rel`` is protected from every executor, or None."""
    parts = PurePosixPath(rel).parts
    if not parts:
        return None
    if parts[0] == _PLANGATE_FOLDER:
        return f"{rel} is inside .plangate, plangate's own folder"
    if ".git" in parts:
        return (
            f"{rel} is inside a .git folder (or is one): git runs programs and reads "
            "configuration from there the next time the user types a git command"
        )
    return None


def protected_paths(workspace: Path) -> list[Path]:
    """What stays read-only for commands that may change the workspace: git's program
    files (commands still need ``.git/index`` and objects to commit) and plangate's own
    folder -- the paths :func:`protected_reason` refuses to the file tools."""
    git_dir = workspace / ".git"
    return [*(git_dir / name for name in GIT_PROGRAM_PATHS), workspace / _PLANGATE_FOLDER]


class NoAuthority(CodedError):
    """An executor was called without an answer from the gate: it does nothing."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            ErrorCode.NO_AUTHORITY,
            f"{tool} ran without plangate's authorization for this call, so it did nothing",
            "call the tool through an agent with Plan Mode mounted (setup_plan)",
        )


class ProtectedPath(CodedError):
    def __init__(self, reason: str) -> None:
        super().__init__(
            ErrorCode.PROTECTED_PATH,
            f"refused: {reason}",
            "leave this path alone; no plan or approval makes it writable",
        )


_authority: ContextVar[Authority | None] = ContextVar("plangate_authority", default=None)


def set_authority(authority: Authority | None) -> None:
    """Record the gate's answer for the tool call in progress (this task)."""
    _authority.set(authority)


def current_authority() -> Authority | None:
    return _authority.get()


def require_authority(tool: str) -> Authority:
    """The authority of this call; raises :class:`NoAuthority` when the gate gave none."""
    authority = _authority.get()
    if authority is None:
        raise NoAuthority(tool)
    return authority


@contextmanager
def use_authority(authority: Authority | None) -> Generator[Authority | None]:
    """Run a block under ``authority`` (hosts that call an executor directly, tests;
    None: with no answer, so every executor refuses)."""
    token = _authority.set(authority)
    try:
        yield authority
    finally:
        _authority.reset(token)
