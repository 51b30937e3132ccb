"""A cgroup per command whose ``pids.max`` caps its processes, where the host offers one.

``RLIMIT_NPROC`` counts processes per real user and exempts uid 0, so a command that
runs as root (see :mod:`plangate.sandbox.policy`) could start any number of them. The
``pids`` controller binds whoever runs: each command gets a child of plangate's own
cgroup (cgroup v1's ``pids`` hierarchy, or v2 when ``pids`` is enabled below plangate's
cgroup), with ``pids.max`` set, and is moved into it before it starts anything (the
``sh`` prefix of :func:`join_argv` writes ``0`` -- itself -- to ``cgroup.procs``, then
executes the rest). Where the host gives plangate no writable cgroup (a container with
a read-only ``/sys/fs/cgroup``, an unprivileged user without delegation) there is none,
and ``RLIMIT_NPROC`` is the cap: it binds every uid but root.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from pathlib import Path

__all__ = ["join_argv", "make_pids_cgroup", "pids_cgroup_parent", "remove_cgroup"]

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


def _own_cgroups(text: str) -> list[Path]:
    """Where this process's pids cgroup could take children, best first, from the text
    of ``/proc/self/cgroup`` (``ID:CONTROLLERS:PATH`` lines)."""
    found: list[Path] = []
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if "pids" in controllers.split(","):
            found.append(_ROOT / "pids" / relative)
        elif controllers == "":  # the v2 unified hierarchy (or v1's hybrid "unified")
            found.append(_ROOT / relative)
            found.append(_ROOT / "unified" / relative)
    return found


def _usable(parent: Path) -> bool:
    """Can a child with ``pids.max`` be made under ``parent`` (made and removed again)?"""
    probe = parent / f"plangate-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        (probe / "pids.max").write_text("max")
        return True
    except OSError:  # no pids controller below this cgroup
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


@functools.cache
def pids_cgroup_parent() -> Path | None:
    """The cgroup under which each command gets its own (probed once), or None."""
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return None
    for parent in _own_cgroups(text):
        if parent.is_dir() and _usable(parent):
            _sweep(parent)
            return parent
    return None


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups left by plangate processes that have ended (one killed
    before its last removal ran); a cgroup with processes in it stays."""
    for child in parent.glob("plangate-*-*"):
        owner = child.name.split("-")[1]
        if not owner.isdigit() or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            child.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_pids_cgroup(processes: int, parent: Path | None = None) -> Path | None:
    """A new cgroup capped at ``processes`` tasks (threads count), or None."""
    parent = parent or pids_cgroup_parent()
    if parent is None:
        return None
    path = parent / f"plangate-{os.getpid()}-{next(_counter)}"
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(processes))
    except OSError:
        remove_cgroup(path, wait_s=0)
        return None
    return path


def join_argv(cgroup: Path) -> list[str]:
    """A prefix that moves the process into ``cgroup`` and then executes the rest of
    the command line (the shell writes ``0``: the kernel reads it as "the writer")."""
    procs = str(cgroup / "cgroup.procs")
    return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', procs]


def remove_cgroup(path: Path, *, wait_s: float = 2.0) -> None:
    """End whatever is left in a command's cgroup and remove it. Under bubblewrap the
    command's PID namespace has ended everything already; without it this is what ends
    a background job that left the command's process group."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
        _kill_members(path)
        time.sleep(0.01)


def _kill_members(path: Path) -> None:
    try:
        members = (path / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in members:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
