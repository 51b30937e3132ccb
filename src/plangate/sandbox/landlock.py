"""The second sandbox: Landlock + seccomp, for machines where bubblewrap cannot run.

Landlock (Linux 5.13+, network rules from 6.7) lets an unprivileged process restrict
itself, with no namespace and no system package: what bubblewrap cannot do in a
container without user namespaces or after a plain ``pip install``. The policy is the
one :mod:`plangate.sandbox.policy` states for bubblewrap, turned into Landlock rules by
the pure function :func:`landlock_rules` and applied in the child by the launcher
:mod:`plangate.sandbox.landlock_exec` just before it ``execve``s ``bash -c``.

Landlock grants, it cannot take back: a rule on a folder covers everything beneath it.
So reads are granted only where a shell needs them (the system folders, the tools on
``PATH``, the workspace, the command's own temp folder), and a folder holding something
hidden (plangate's database, ``/etc/shadow``) is granted entry by entry around it, its
names listable but not the hidden file's content. What this sandbox cannot do that
bubblewrap does:

* no private ``/tmp``: the command gets a fresh temp folder as ``TMPDIR`` and ``HOME``,
  removed afterwards; the host's ``/tmp`` is neither readable nor writable;
* no read-only islands inside a writable folder: with the whole workspace writable
  (acting without a scope) ``.git``'s program files, ``.plangate`` and a database kept
  in the workspace are writable by commands (a plan scope that names paths keeps the
  rest read-only; plangate's check of git's files after each command reports changes);
* no PID namespace: the timeout kills the command's process group, and a process that
  leaves the group (``setsid``) outlives it, still confined; ``RLIMIT_NPROC`` does not
  bind root;
* the network is all or nothing (TCP bind and connect, from Landlock ABI 4; UDP and
  the rest are left to the seccomp program).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from plangate.sandbox import landlock_exec
from plangate.sandbox.policy import Limits, Profile, SandboxSpec

__all__ = [
    "DEVICES",
    "HIDDEN_SYSTEM_PATHS",
    "LAUNCHER",
    "SYSTEM_READ_PATHS",
    "landlock_argv",
    "landlock_rules",
    "tool_roots",
]

LAUNCHER = Path(landlock_exec.__file__)
"""Started by path (``python -I -S``), so that it imports nothing of plangate."""

SYSTEM_READ_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/etc",
    "/proc",
    "/sys",
    "/nix/store",
    "/snap",
)
"""What a shell and its tools read. Not ``/home``, ``/root``, ``/tmp``, ``/var`` or
``/run`` (service sockets, container secrets)."""

HIDDEN_SYSTEM_PATHS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
"""Secrets inside the system folders, which root could otherwise read."""

_TOOL_SECRETS = (".cargo/credentials", ".cargo/credentials.toml")
"""Credentials inside a tool's folder under the home folder (``~/.cargo`` is on PATH)."""

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")

_TOOL_FOLDERS = ("bin", "sbin", "shims")
_TOOL_ENV = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT")


def tool_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """Folders holding the tools a command finds on ``PATH`` (and the runtime behind a
    ``bin`` or ``shims`` folder: ``~/.pyenv/shims`` needs ``~/.pyenv``), minus any that
    would open the home folder or ``/`` itself."""
    found: list[Path] = []
    entries = [p for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")]
    entries += [env[name] for name in _TOOL_ENV if env.get(name, "").startswith("/")]
    for entry in entries:
        path = Path(entry)
        if path.name in _TOOL_FOLDERS:
            path = path.parent
        if path == Path("/") or path == home or path in home.parents:
            continue
        found.append(path)
    return found


class _Rules:
    def __init__(self, holes: Iterable[Path]) -> None:
        self.rules: list[tuple[str, str]] = []
        self.holes = frozenset(holes)

    def grant(self, path: Path, kind: str) -> None:
        """``kind`` on ``path`` and everything beneath it except the holes: a folder
        holding a hole is granted child by child (symlinks skipped: a rule follows them
        and could reach the hole by another name)."""
        if path in self.holes:
            return
        inner = [h for h in self.holes if path in h.parents]
        if not inner:
            self.rules.append((kind, str(path)))
            return
        self.rules.append(("list", str(path)))
        try:
            children = sorted(path.iterdir())
        except OSError:
            return
        for child in children:
            if not child.is_symlink():
                self.grant(child, kind)


def _resolved(paths: Iterable[str | Path]) -> list[Path]:
    return [Path(p).resolve() for p in paths if os.path.lexists(p)]


def landlock_rules(
    spec: SandboxSpec, *, tmpdir: Path, env: Mapping[str, str], home: Path | None = None
) -> list[tuple[str, str]]:
    """The launcher's rules (``kind``, ``path``) for ``spec``; ``tmpdir`` is the command's
    own writable temp folder, ``env`` the environment it gets (its ``PATH`` says which
    tools it may run)."""
    home = (home or Path.home()).resolve()
    masked = _resolved(spec.masked)
    rules = _Rules(masked)
    rules.rules += _system_rules(tuple(tool_roots(env, home)), home, tuple(masked))
    workspace = spec.workspace.resolve()
    if spec.profile is Profile.ACTING and spec.writable is None:
        rules.rules.append(("write", str(workspace)))
    else:
        rules.grant(workspace, "read")
        if spec.profile is Profile.ACTING:
            for path in _resolved(spec.writable or ()):
                rules.rules.append(("write", str(path)))
    rules.rules.append(("write", str(tmpdir.resolve())))
    return rules.rules


@functools.lru_cache(maxsize=32)
def _system_rules(
    tools: tuple[Path, ...], home: Path, masked: tuple[Path, ...]
) -> list[tuple[str, str]]:
    """The reads of the system folders and tools, and the devices: the same for every
    command of a process (computed once: splitting /etc around its secrets walks it)."""
    holes = [*masked, *_resolved([*HIDDEN_SYSTEM_PATHS, *(home / n for n in _TOOL_SECRETS)])]
    rules = _Rules(holes)
    seen: set[Path] = set()
    for root in _resolved([*SYSTEM_READ_PATHS, *tools]):
        if root not in seen:
            seen.add(root)
            rules.grant(root, "read")
    for device in _resolved(DEVICES):
        rules.rules.append(("device", str(device)))
    return rules.rules


def _limit_args(limits: Limits) -> list[str]:
    values = {
        "cpu": limits.cpu_s,
        "fsize": limits.file_size_bytes,
        "nproc": limits.processes,
        "as": limits.address_space_bytes,
        "nofile": limits.open_files,
        "core": 0,
    }
    return [arg for name, value in values.items() for arg in ("--limit", f"{name}={value}")]


def landlock_argv(
    spec: SandboxSpec,
    command: Sequence[str],
    *,
    tmpdir: Path,
    env: Mapping[str, str],
    seccomp_fds: Sequence[int] = (),
    python: str = sys.executable,
) -> list[str]:
    """The command line that runs ``command`` under ``spec`` through the launcher."""
    argv = [python, "-I", "-S", str(LAUNCHER)]
    for kind, path in landlock_rules(spec, tmpdir=tmpdir, env=env):
        argv += ["--rule", f"{kind}={path}"]
    argv += _limit_args(spec.limits)
    if spec.network and spec.profile is Profile.ACTING:
        argv.append("--network")
    for fd in seccomp_fds:
        argv += ["--seccomp-fd", str(fd)]
    return [*argv, "--", *command]
