"""Is there a working sandbox on this machine? Asked once per process, answered plainly.

Two sandboxes, tried in this order: bubblewrap (namespaces: a private ``/tmp``, its own
PID space), then Landlock + seccomp (:mod:`plangate.sandbox.landlock`: no namespace, no
system package, Linux 6.7+). Each is probed by starting a real, minimal sandboxed
command rather than by looking for a binary or a kernel version: bubblewrap can be
installed and still unusable (user namespaces off, AppArmor on Ubuntu 23.10+, a
container's seccomp profile), and Landlock can be built in and not enabled.

``PLANGATE_SANDBOX`` chooses: ``auto`` (the default: the first that works),
``bubblewrap`` or ``landlock`` (that one or none), ``off`` (no sandbox on purpose:
plangate falls back to the shell parser alone, and says so). When no sandbox works and
the operator did not choose ``off``, commands are refused (``SANDBOX_UNAVAILABLE``),
never run unsandboxed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from plangate.errors import CodedError, ErrorCode

__all__ = [
    "SANDBOX_ENV",
    "SandboxStatus",
    "SandboxUnavailable",
    "sandbox_status",
    "sandbox_summary",
]

SANDBOX_ENV = "PLANGATE_SANDBOX"

_OFF = {"off", "0", "false", "no", "parser-only", "none"}
_CHOICES = {"", "auto", "bubblewrap", "bwrap", "landlock"}


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    backend: str
    """``bubblewrap`` or ``landlock`` when available, else ``none``."""
    detail: str
    """One line for a header: what protects this machine."""
    fix: str = ""
    """What to do to get the sandbox, when it is missing."""
    bwrap: str = ""
    prlimit: str = ""
    refuses: bool = False
    """No sandbox works and the operator did not choose parser-only: commands are
    refused rather than run unsandboxed."""
    landlock_abi: int = 0
    """The Landlock ABI the kernel offers (0: none)."""
    why: tuple[str, ...] = ()
    """Why each sandbox tried before this one was not used."""


class SandboxUnavailable(CodedError):
    """No sandbox works here and parser-only was not chosen: the command did not run."""

    def __init__(self, status: SandboxStatus) -> None:
        super().__init__(
            ErrorCode.SANDBOX_UNAVAILABLE,
            f"refused: {status.detail}",
            status.fix or f"set {SANDBOX_ENV}=off to run commands checked by the parser alone",
        )


_PARSER_ONLY = (
    "commands are checked by the shell parser only: while planning, anything it cannot "
    "prove read-only is refused"
)
_REFUSED = f"commands are refused (set {SANDBOX_ENV}=off to rely on the shell parser alone)"
_BWRAP_FIX = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow unprivileged "
    "user namespaces (on Ubuntu 23.10+ an AppArmor profile for bwrap; in Docker a seccomp "
    "profile that permits clone/unshare)"
)
_LANDLOCK_FIX = "or run on Linux 6.7+ with Landlock enabled (lsm=...,landlock)"


def _probe_bwrap(bwrap: str) -> str | None:
    """None when bubblewrap starts a sandbox here, else why not."""
    probe = [
        bwrap,
        "--new-session",
        "--die-with-parent",
        "--unshare-all",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--",
        "/bin/sh",
        "-c",
        "exit 0",
    ]
    return _run_probe(probe)


def _run_probe(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    failure = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["exit status"]
    return f"{failure[0]} ({done.returncode})"


def _probe_landlock() -> tuple[int, str | None]:
    """(ABI, None) when the launcher confines a command here, else (ABI, why not)."""
    from plangate.sandbox.landlock import landlock_argv
    from plangate.sandbox.landlock_exec import ABI_NETWORK, abi_version
    from plangate.sandbox.policy import Profile, SandboxSpec

    abi = abi_version()
    if abi < 1:
        return 0, "Landlock is not enabled in this kernel"
    if abi < ABI_NETWORK:
        return abi, f"Landlock ABI {abi} cannot restrict the network (needs ABI 4, Linux 6.7)"
    with tempfile.TemporaryDirectory(prefix="plangate-probe-") as folder:
        workspace, tmp = Path(folder) / "ws", Path(folder) / "tmp"
        workspace.mkdir()
        tmp.mkdir()
        spec = SandboxSpec(profile=Profile.PLANNING, workspace=workspace)
        # The probe must be refused a write outside its rules, or Landlock is not enforcing.
        command = ["/bin/sh", "-c", f": > {tmp}/w && ! (: > {workspace}/w) 2>/dev/null"]
        argv = landlock_argv(spec, command, tmpdir=tmp, env={"PATH": "/usr/bin:/bin"})
        failure = _run_probe(argv)
        if failure and failure.startswith("exit status"):
            failure = "a write Landlock should refuse went through: it is not enforcing"
        return abi, failure


def _choice() -> str:
    return os.environ.get(SANDBOX_ENV, "").strip().lower()


@functools.cache
def sandbox_status() -> SandboxStatus:
    """The sandbox this process uses (probed on first call, then cached)."""
    prlimit = shutil.which("prlimit") or ""
    choice = _choice()
    if choice in _OFF:
        return SandboxStatus(
            False, "none", f"sandbox off ({SANDBOX_ENV}={choice}); {_PARSER_ONLY}", prlimit=prlimit
        )
    if choice not in _CHOICES:
        return SandboxStatus(
            False,
            "none",
            f"no sandbox: {SANDBOX_ENV}={choice!r} is not one of auto, bubblewrap, landlock, "
            f"off; {_REFUSED}",
            f"set {SANDBOX_ENV} to auto, bubblewrap, landlock or off",
            prlimit=prlimit,
            refuses=True,
        )
    why: list[str] = []
    if choice in {"", "auto", "bubblewrap", "bwrap"}:
        bwrap = shutil.which("bwrap")
        failure = "bubblewrap is not installed" if bwrap is None else _probe_bwrap(bwrap)
        if failure is None and bwrap is not None:
            return SandboxStatus(
                True,
                "bubblewrap",
                "bubblewrap sandbox: read-only while planning, workspace-only writes after "
                "approval, no network",
                bwrap=bwrap,
                prlimit=prlimit,
            )
        if failure and not failure.startswith("bubblewrap"):
            failure = f"bubblewrap cannot start here ({failure})"
        why.append(failure or "bubblewrap failed")
    abi = 0
    if choice in {"", "auto", "landlock"}:
        if not sys.platform.startswith("linux"):
            why.append(f"Landlock is Linux only (this is {sys.platform})")
        else:
            abi, failure = _probe_landlock()
            if failure is None:
                return SandboxStatus(
                    True,
                    "landlock",
                    f"Landlock sandbox (ABI {abi}) with seccomp: read-only while planning, "
                    "workspace-only writes after approval, no network"
                    + (f" ({'; '.join(why)})" if why else ""),
                    prlimit=prlimit,
                    landlock_abi=abi,
                    why=tuple(why),
                )
            why.append(f"landlock: {failure}")
    return SandboxStatus(
        False,
        "none",
        f"no sandbox: {'; '.join(why)}; {_REFUSED}",
        _BWRAP_FIX + (f", {_LANDLOCK_FIX}" if choice != "bubblewrap" else ""),
        prlimit=prlimit,
        refuses=True,
        landlock_abi=abi,
        why=tuple(why),
    )


def sandbox_summary(allow_network: bool = False) -> str:
    """One line for a surface's header: what contains the agent's commands here."""
    status = sandbox_status()
    if not status.available:
        return f"⚠ {status.detail}" + (f" — to fix: {status.fix}" if status.fix else "")
    network = "network after approval" if allow_network else "no network"
    return (
        f"sandbox: {status.backend} (read-only while planning, workspace-only writes after "
        f"approval, {network})"
    )
