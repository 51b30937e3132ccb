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

Host privileges (run as root): the command keeps uid 0 -- bubblewrap started by root
maps the sandbox's uid to the host's root whatever ``--uid`` says, and an unprivileged
uid could neither change the user's (root-owned) workspace after approval nor reach a
workspace under a root-only folder (``/root``, pytest's ``/tmp/pytest-of-root``) while
planning. What root without capabilities could still do is taken away one by one: no
capability survives (``--cap-drop ALL``, CapEff 0); the kernel's knobs that check the
uid and not a capability (``/proc/sys``, ``/proc/sysrq-trigger``, ``/proc/mtrr``) are
read-only (:data:`KERNEL_KNOBS`), ``/sys`` is under the read-only root; the files only
root may read are masked (:data:`HOST_SECRETS`); the system calls that reach past the
namespaces are refused by seccomp (:mod:`plangate.sandbox.seccomp`); and the process
cap is a cgroup's ``pids.max`` (:mod:`plangate.sandbox.cgroup`), since
``RLIMIT_NPROC`` does not bind uid 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from plangate.policy.authority import protected_paths

__all__ = [
    "ENV_ALLOWLIST",
    "GIT_HARDENING",
    "HOST_SECRETS",
    "KERNEL_KNOBS",
    "MAX_TIMEOUT_S",
    "SANDBOX_HOME",
    "Limits",
    "Profile",
    "SandboxSpec",
    "bwrap_argv",
    "bwrap_options",
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

    ``RLIMIT_NPROC`` counts per real user and does not bind root: there ``processes``
    is a cgroup's ``pids.max`` where the host lets plangate make one
    (:mod:`plangate.sandbox.cgroup`).
    """

    cpu_s: int = 300
    file_size_bytes: int = 2 * 1024**3
    processes: int = 1024
    address_space_bytes: int = 16 * 1024**3
    """Generous: runtimes such as Node reserve far more address space than they use."""
    open_files: int = 1024
    tmp_bytes: int = 1024**3
    """Size of each private tmpfs: ``/tmp`` (with ``HOME`` inside it), ``/var/tmp`` and
    ``/dev/shm``; ``/dev`` itself is read-only."""


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
# Locale variables pass only with a locale name as value (``C``, ``POSIX``,
# ``en_US.UTF-8``, ``sr_RS@latin``): a secret or a payload exported under an LC_ name
# does not, nor does an LC_ name the C library does not define.
_LOCALE_NAMES = frozenset(
    {
        "LC_ALL",
        "LC_CTYPE",
        "LC_NUMERIC",
        "LC_TIME",
        "LC_COLLATE",
        "LC_MONETARY",
        "LC_MESSAGES",
        "LC_PAPER",
        "LC_NAME",
        "LC_ADDRESS",
        "LC_TELEPHONE",
        "LC_MEASUREMENT",
        "LC_IDENTIFICATION",
    }
)
_LOCALE_VALUE = re.compile(
    r"[A-Za-z]{1,8}(_[A-Za-z0-9]{1,8})?(\.[A-Za-z0-9_-]{1,20})?(@[A-Za-z0-9_]{1,20})?"
)

KERNEL_KNOBS = (
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/mtrr",
    "/proc/fs",
    "/proc/bus",
    "/proc/irq",
)
"""Parts of the sandbox's fresh ``/proc`` bound read-only over it (where the kernel has
them): writing there needs uid 0, not a capability, so root without capabilities could
change the host's kernel settings."""

HOST_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
"""Files only root may read, masked where they exist (the command may run as uid 0)."""

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
    "GIT_CONFIG_COUNT": "9",
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
    # GIT_PROTOCOL_FROM_USER=0 above also stops local repositories (`git ls-remote .`):
    # the file transport reads what the command could read anyway.
    "GIT_CONFIG_KEY_8": "protocol.file.allow",
    "GIT_CONFIG_VALUE_8": "always",
}


def sandbox_env(source: Mapping[str, str], *, home: str = SANDBOX_HOME) -> dict[str, str]:
    """The environment a sandboxed command gets: the allowlist, minus secret-looking
    names, plus a private home and temp folder and the git hardening."""
    env = {
        name: value
        for name, value in source.items()
        if _passes(name, value) and not _SECRET_NAME.search(name)
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


def _passes(name: str, value: str) -> bool:
    if name.startswith("LC_"):
        return name in _LOCALE_NAMES and _LOCALE_VALUE.fullmatch(value) is not None
    return name in ENV_ALLOWLIST


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


_OWN_FOLDER = ".plangate"


def _masks(masked: Iterable[Path]) -> list[str]:
    """Mounts that hide ``masked``: a folder becomes an empty tmpfs, a file reads as
    nothing. A file that does not exist cannot be covered by a mount, so the database
    in plangate's own folder hides the folder instead (:func:`_mask_own_folder`): its
    ``-wal``, ``-shm`` and ``-journal`` stay hidden even when SQLite makes them after
    the command started."""
    paths = list(masked)
    own = sorted(
        {p.parent for p in paths if p.parent.name == _OWN_FOLDER and p.parent.is_dir()}
        - {p for p in paths if p.is_dir()}
    )
    argv: list[str] = []
    for path in paths:
        if path.parent in own:
            continue
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path)]
    for folder in own:
        argv += _mask_own_folder(folder, [p.name for p in paths if p.parent == folder])
    return argv


def _mask_own_folder(folder: Path, hidden: list[str]) -> list[str]:
    """``.plangate`` as an empty read-only tmpfs with every entry bound back but the
    hidden ones and whatever starts with their names (the database's siblings)."""
    argv = ["--tmpfs", str(folder)]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        if any(entry.name.startswith(name) for name in hidden):
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry.path), entry.path]
        else:
            argv += ["--ro-bind", entry.path, entry.path]
    return [*argv, "--remount-ro", str(folder)]


def _host_hardening(limits: Limits) -> list[str]:
    """What keeps a command that runs as root from the host's kernel and secrets: a
    capped ``/dev/shm`` on a read-only ``/dev``, the kernel's knobs read-only over the
    fresh ``/proc``, root-only files masked."""
    size = str(limits.tmp_bytes)
    argv = ["--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    argv += ["--proc", "/proc"]
    for knob in KERNEL_KNOBS:
        argv += ["--ro-bind-try", knob, knob]
    for secret in HOST_SECRETS:
        if os.path.lexists(secret):
            argv += ["--ro-bind", "/dev/null", secret]
    return argv


def bwrap_options(
    spec: SandboxSpec, *, env: Mapping[str, str], seccomp_fd: int | None = None
) -> list[str]:
    """bubblewrap's options for ``spec`` (everything before ``--`` and the command).

    Order matters: later mounts cover earlier ones, so the writable workspace comes
    after the masks (a workspace inside a masked folder stays reachable) and the
    protected paths come after the workspace.
    """
    argv = [
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
    argv += ["--ro-bind", "/", "/", *_host_hardening(spec.limits)]
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
    return [*argv, "--chdir", workspace]


def bwrap_argv(
    spec: SandboxSpec,
    command: Iterable[str],
    *,
    env: Mapping[str, str],
    bwrap: str = "bwrap",
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line that runs ``command`` under ``spec``, options in
    the open (:mod:`plangate.sandbox.process` passes them through ``--args FD``
    instead, so the sandbox's ``/proc/1/cmdline`` does not show them)."""
    return [bwrap, *bwrap_options(spec, env=env, seccomp_fd=seccomp_fd), "--", *command]


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
