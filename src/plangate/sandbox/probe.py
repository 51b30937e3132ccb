"""Is there a working sandbox on this machine? Asked once per process, answered plainly.

bubblewrap can be installed and still unusable (user namespaces off, AppArmor on
Ubuntu 23.10+, a container's seccomp profile), so the probe starts a real, minimal
sandbox rather than looking for the binary. ``PLANGATE_SANDBOX=off`` turns the sandbox
off on purpose; plangate then falls back to the shell parser alone, and says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["SANDBOX_ENV", "SandboxStatus", "sandbox_status", "sandbox_summary"]

SANDBOX_ENV = "PLANGATE_SANDBOX"


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    backend: str
    """``bubblewrap`` when available, else ``none``."""
    detail: str
    """One line for a header: what protects this machine."""
    fix: str = ""
    """What to do to get the sandbox, when it is missing."""
    bwrap: str = ""
    prlimit: str = ""


_PARSER_ONLY = (
    "commands are checked by the shell parser only: while planning, anything it cannot "
    "prove read-only is refused"
)


@functools.cache
def sandbox_status() -> SandboxStatus:
    """The sandbox this process uses (probed on first call, then cached)."""
    prlimit = shutil.which("prlimit") or ""
    if os.environ.get(SANDBOX_ENV, "").strip().lower() in {"off", "0", "false", "no"}:
        return SandboxStatus(
            False, "none", f"sandbox off ({SANDBOX_ENV}=off); {_PARSER_ONLY}", prlimit=prlimit
        )
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(
            False,
            "none",
            f"no sandbox: bubblewrap is not installed; {_PARSER_ONLY}",
            "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)",
            prlimit=prlimit,
        )
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
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        failure = str(exc)
    else:
        if done.returncode == 0:
            return SandboxStatus(
                True,
                "bubblewrap",
                "bubblewrap sandbox: read-only while planning, workspace-only writes after "
                "approval, no network",
                bwrap=bwrap,
                prlimit=prlimit,
            )
        failure = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["exit status"]
        failure = f"{failure[0]} ({done.returncode})"
    return SandboxStatus(
        False,
        "none",
        f"no sandbox: bubblewrap cannot start here ({failure}); {_PARSER_ONLY}",
        "allow unprivileged user namespaces (on Ubuntu 23.10+ an AppArmor profile for "
        "bwrap; in Docker a seccomp profile that permits clone/unshare)",
        prlimit=prlimit,
    )


def sandbox_summary(allow_network: bool = False) -> str:
    """One line for a surface's header: what contains the agent's commands here."""
    status = sandbox_status()
    if not status.available:
        return f"⚠ {status.detail}" + (f" — to fix: {status.fix}" if status.fix else "")
    network = "network after approval" if allow_network else "no network"
    return (
        "sandbox: bubblewrap (read-only while planning, workspace-only writes after "
        f"approval, {network})"
    )
