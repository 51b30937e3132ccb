"""What a sandboxed command may touch, as data: profiles, limits, environment, bwrap argv.

Pure functions only: the same spec always gives the same argument vector, so the
policy can be read, tested and reviewed without starting a process.

Two profiles follow the plan state at the moment of the call:

* ``planning`` — the whole filesystem read-only (the workspace included), a private
  empty ``/tmp`` and ``HOME``, no network, its own PID namespace.
* ``acting`` — the workspace writable (``.git`` a mount point that cannot be renamed or
  replaced, its config, hooks, ``info``, ``modules`` and ``worktrees`` and ``.plangate``
  read-only), everything else read-only, a private ``/tmp``, network
  only when the user allowed it. With an approved plan scope only the paths it names
  are writable (``SandboxSpec.writable``, see :mod:`plangate.sandbox.scope_binds`).

Both: no new privileges, a new session (no terminal input injection, CVE-2017-5226),
death with the parent, an environment reduced to an allowlist, git hardened against
repository configuration that runs programs, and resource limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from plangate.policy.authority import protected_paths

__all__ = [
    "ENV_ALLOWLIST",
    "GIT_HARDENING",
    "MAX_TIMEOUT_S",
    "SANDBOX_HOME",
    "Limits",
    "Profile",
    "SandboxSpec",
    "bwrap_argv",
    "prlimit_argv",
    "sandbox_env",
]

MAX_TIMEOUT_S = 600.0
"""No command runs longer than this, whatever the model asks for."""

SANDBOX_HOME = "/tmp/home"
"""``HOME`` inside the sandbox: on the private ``/tmp``, empty at every call."""


class Profile(StrEnum):
    PLANNING = "planning"
    """A plan is being made: nothing may change."""
    ACTING = "acting"
    """No plan, or an approved one: the workspace may change."""


@dataclass(frozen=True)
class Limits:
    """Resource limits applied with ``prlimit`` to the whole process tree.

    ``RLIMIT_NPROC`` counts per real user and does not bind root; the PID namespace and
    the timeout kill are what end a runaway process tree there.
    """

    cpu_s: int = 300
    file_size_bytes: int = 2 * 1024**3
    processes: int = 1024
    address_space_bytes: int = 16 * 1024**3
    """Generous: runtimes such as Node reserve far more address space than they use."""
    open_files: int = 1024
    tmp_bytes: int = 1024**3
    """Size of the private ``/tmp`` (and ``HOME`` inside it)."""


@dataclass(frozen=True)
class SandboxSpec:
    profile: Profile
    workspace: Path
    network: bool = False
    """Network access; never granted to the planning profile."""
    masked: tuple[Path, ...] = ()
    """Paths hidden from the command (secrets, plangate's database): folders become an
    empty tmpfs, files read as empty."""
    limits: Limits = field(default_factory=Limits)
    writable: tuple[Path, ...] | None = None
    """With an approved plan scope, the only paths of the workspace the acting profile
    may change (the rest of it is read-only); None makes the whole workspace writable."""


# Variables a command may see. Everything else is dropped, and so is any allowed name
# that looks like a secret.
ENV_ALLOWLIST = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "LC_ALL",
        "LC_CTYPE",
        "LC_MESSAGES",
        "LC_COLLATE",
        "LC_NUMERIC",
        "LC_TIME",
        "TERM",
        "TZ",
        "COLUMNS",
        "LINES",
        "VIRTUAL_ENV",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "NO_COLOR",
    }
)
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|DATABASE", re.I)

GIT_HARDENING: dict[str, str] = {
    # Only the repository's own config is read, never system or global files.
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    # `git status` must not rewrite .git/index just to refresh stat data.
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PROTOCOL_FROM_USER": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": "true",
    # Settings given this way rank as command-line configuration, above the
    # repository's: a committed config cannot turn these programs back on.
    "GIT_CONFIG_COUNT": "8",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath",
    "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_CONFIG_KEY_2": "core.pager",
    "GIT_CONFIG_VALUE_2": "cat",
    "GIT_CONFIG_KEY_3": "diff.external",
    "GIT_CONFIG_VALUE_3": "",
    "GIT_CONFIG_KEY_4": "protocol.ext.allow",
    "GIT_CONFIG_VALUE_4": "never",
    "GIT_CONFIG_KEY_5": "safe.bareRepository",
    "GIT_CONFIG_VALUE_5": "explicit",
    "GIT_CONFIG_KEY_6": "core.sshCommand",
    "GIT_CONFIG_VALUE_6": "false",
    "GIT_CONFIG_KEY_7": "credential.helper",
    "GIT_CONFIG_VALUE_7": "",
}


def sandbox_env(source: Mapping[str, str], *, home: str = SANDBOX_HOME) -> dict[str, str]:
    """The environment a sandboxed command gets: the allowlist, minus secret-looking
    names, plus a private home and temp folder and the git hardening."""
    env = {
        name: value
        for name, value in source.items()
        if (name in ENV_ALLOWLIST or name.startswith("LC_")) and not _SECRET_NAME.search(name)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        HOME=home,
        TMPDIR="/tmp",
        SHELL="/bin/bash",
        PYTHONDONTWRITEBYTECODE="1",
        PLANGATE_SANDBOXED="1",
        **GIT_HARDENING,
    )
    return env


def _protected_in(workspace: Path) -> list[Path]:
    """Paths inside a writable workspace that stay read-only: what makes git run a
    program or read another config on the next git call, and plangate's own folder
    (the same list the file tools refuse, :mod:`plangate.policy.authority`)."""
    return [p for p in protected_paths(workspace) if p.exists() and not p.is_symlink()]


def _git_mount_point(workspace: Path) -> list[str]:
    """``.git`` bound onto itself, still writable (``git add`` and ``git commit`` write its
    index, objects and refs): a mount point cannot be renamed or removed from inside, so
    a command cannot move the repository away and build another with its own config."""
    git_dir = workspace / ".git"
    if git_dir.is_symlink() or not git_dir.exists():
        return []
    return ["--bind", str(git_dir), str(git_dir)]


def _masks(masked: Iterable[Path]) -> list[str]:
    argv: list[str] = []
    for path in masked:
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


def bwrap_argv(
    spec: SandboxSpec,
    command: Iterable[str],
    *,
    env: Mapping[str, str],
    bwrap: str = "bwrap",
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``command`` under ``spec``.

    Order matters: later mounts cover earlier ones, so the writable workspace comes
    after the masks (a workspace inside a masked folder stays reachable) and the
    protected paths come after the workspace.
    """
    argv = [
        bwrap,
        "--new-session",
        "--die-with-parent",
        "--unshare-all",
        # Root keeps every capability in the new namespaces and could remount the
        # read-only binds writable: drop them all.
        "--cap-drop",
        "ALL",
    ]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if spec.network and spec.profile is Profile.ACTING:
        argv.append("--share-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    size = str(spec.limits.tmp_bytes)
    argv += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/var/tmp"]
    argv += ["--dir", SANDBOX_HOME]
    argv += _masks(spec.masked)
    workspace = str(spec.workspace)
    if spec.profile is Profile.ACTING and spec.writable is not None:
        argv += ["--ro-bind", workspace, workspace]
        for path in spec.writable:
            argv += ["--bind", str(path), str(path)]
        if spec.workspace.resolve() in spec.writable:
            argv += _git_mount_point(spec.workspace)
        for path in _protected_in(spec.workspace):
            argv += ["--ro-bind", str(path), str(path)]
    elif spec.profile is Profile.ACTING:
        argv += ["--bind", workspace, workspace]
        argv += _git_mount_point(spec.workspace)
        for path in _protected_in(spec.workspace):
            argv += ["--ro-bind", str(path), str(path)]
    else:
        argv += ["--ro-bind", workspace, workspace]
    # The workspace bind uncovers what was masked inside it (plangate's database in the
    # project folder): mask that again, above it.
    argv += _masks(p for p in spec.masked if p.is_relative_to(spec.workspace))
    argv += ["--clearenv"]
    for name, value in sorted(env.items()):
        argv += ["--setenv", name, value]
    argv += ["--chdir", workspace, "--"]
    argv += list(command)
    return argv


def prlimit_argv(limits: Limits, *, prlimit: str = "prlimit") -> list[str]:
    """The ``prlimit`` prefix that applies ``limits`` to the command it starts (limits are
    inherited by every child)."""
    return [
        prlimit,
        f"--cpu={limits.cpu_s}",
        f"--fsize={limits.file_size_bytes}",
        f"--nproc={limits.processes}",
        f"--as={limits.address_space_bytes}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]
