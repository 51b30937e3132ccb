"""``plangate doctor``: what protects this machine, in plain words."""

from __future__ import annotations

import argparse
import os
import shutil
from typing import Any

__all__ = ["add_doctor_parser", "run_doctor"]


def add_doctor_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "doctor",
        help="show what protects this machine (sandbox, limits, environment)",
        description="Report how the agent's commands are contained here: the sandbox "
        "backend, resource limits, the environment they see, and what to install when "
        "something is missing. Exits 1 when commands would run without a sandbox.",
    )
    parser.set_defaults(func=run_doctor)
    return parser


def run_doctor(args: argparse.Namespace) -> int:
    from plangate.sandbox import Limits, sandbox_status
    from plangate.sandbox.policy import ENV_ALLOWLIST, MAX_TIMEOUT_S
    from plangate.sandbox.probe import SANDBOX_ENV

    status = sandbox_status()
    limits = Limits()
    mark = "ok " if status.available else "!! "
    print(f"{mark}sandbox: {status.detail}")
    if status.fix:
        print(f"   to fix: {status.fix}")
    for reason in status.why:
        print(f"   not used: {reason}")
    if status.backend == "bubblewrap":
        print(f"   bubblewrap: {status.bwrap}")
        print("   planning: whole filesystem read-only, private /tmp and HOME, no network")
        print("   acting:   workspace writable (.git/config, .git/hooks, .plangate read-only),")
        print("             private /tmp, network only with --allow-network")
    elif status.backend == "landlock":
        print(f"   landlock: ABI {status.landlock_abi}, seccomp filter, no new privileges")
        print("   planning: system folders and workspace readable, nothing writable but the")
        print("             command's own temp folder; home, /tmp, /var, /run, /etc/shadow")
        print("             and plangate's database unreadable; no TCP, no abstract sockets,")
        print("             no signals outside the command")
        print("   acting:   workspace (or the plan scope's paths) writable; network only with")
        print("             --allow-network. Unlike bubblewrap: .git and .plangate inside a")
        print("             wholly writable workspace are not read-only, no PID namespace")
    limit_mark = "ok " if status.prlimit else "!! "
    limit_text = (
        f"cpu {limits.cpu_s} s, file size {limits.file_size_bytes // 1024**2} MiB, "
        f"{limits.processes} processes, address space {limits.address_space_bytes // 1024**3} "
        f"GiB, {limits.open_files} open files, no core dumps; timeout at most "
        f"{MAX_TIMEOUT_S:g} s"
    )
    if status.prlimit:
        print(f"{limit_mark}limits: {limit_text}")
    else:
        print(f"{limit_mark}limits: prlimit (util-linux) not found; only the timeout applies")
    if status.available:
        _print_kernel_boundary(limits.processes)
    names = ", ".join(sorted(n for n in ENV_ALLOWLIST if not n.startswith("LC_")))
    print(
        f"ok environment: only {names} and LC_* with a locale name as value; never keys, "
        "tokens or passwords"
    )
    git = shutil.which("git")
    print(
        "ok git: system/global config ignored; fsmonitor, hooks, pager, external diff off"
        if git
        else "-- git: not installed"
    )
    print(
        f"   choose with {SANDBOX_ENV}=auto|bubblewrap|landlock|off "
        f"(now: {os.environ.get(SANDBOX_ENV) or 'auto'})"
    )
    return 0 if status.available else 1


def _print_kernel_boundary(processes: int) -> None:
    """What keeps a command from the host's privileges (root included), and what the
    seccomp filter refuses."""
    import os

    from plangate.sandbox.cgroup import pids_cgroup_parent
    from plangate.sandbox.seccomp import seccomp_summary

    root = os.geteuid() == 0
    who = "uid 0 without capabilities" if root else "your uid, without capabilities"
    print(
        f"ok privileges: commands run as {who} (CapEff 0); /proc/sys, /proc/sysrq-trigger "
        "and /sys read-only; /etc/shadow masked; /dev read-only, /dev/shm capped"
    )
    cgroup = pids_cgroup_parent()
    if cgroup is not None:
        print(f"ok processes: at most {processes} per command (cgroup pids.max under {cgroup})")
    elif root:
        print(
            f"!! processes: RLIMIT_NPROC ({processes}) does not bind root and no pids cgroup "
            "is writable here; the timeout and the PID namespace end a runaway command"
        )
    else:
        print(f"ok processes: at most {processes} (RLIMIT_NPROC, which binds a non-root uid)")
    summary = seccomp_summary()
    mark = "ok " if "no filter" not in summary[0] else "!! "
    print(f"{mark}{summary[0]}")
    for line in summary[1:]:
        print(f"   {line.strip()}")
