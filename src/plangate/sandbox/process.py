"""Start one shell command in the sandbox, capture its output, and kill it on time.

With bubblewrap the command runs under :func:`~plangate.sandbox.policy.bwrap_options`
(passed through ``--args FD``) and the seccomp allowlist
(:mod:`plangate.sandbox.seccomp`, through ``--seccomp FD``); its process tree lives in
its own PID namespace, so when the command ends or the timeout kills bwrap, the kernel
ends everything the command started and its private ``/tmp`` disappears with it.
With Landlock (:mod:`plangate.sandbox.landlock`) the launcher confines itself and
becomes the command, which gets a private temp folder as ``TMPDIR`` and ``HOME``,
removed afterwards. Without a sandbox -- only when the operator chose parser-only --
the command runs directly with the same environment allowlist and limits and a private
temp folder; when no sandbox works and parser-only was not chosen, nothing runs
(:class:`~plangate.sandbox.probe.SandboxUnavailable`). Either way, where the host
offers a cgroup the command gets its own with ``pids.max``
(:mod:`plangate.sandbox.cgroup`), and whatever is left in it at the end is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plangate.sandbox.cgroup import join_argv, make_pids_cgroup, remove_cgroup
from plangate.sandbox.landlock import landlock_argv
from plangate.sandbox.landlock_filter import landlock_gaps_filter
from plangate.sandbox.policy import (
    MAX_TIMEOUT_S,
    Profile,
    SandboxSpec,
    bwrap_options,
    prlimit_argv,
    sandbox_env,
)
from plangate.sandbox.probe import SandboxStatus, SandboxUnavailable, sandbox_status
from plangate.sandbox.seccomp import seccomp_program

__all__ = ["Capture", "Finished", "run_command"]

_cleanups: set[asyncio.Future[None]] = set()
"""Cgroup removals still running (kept referenced until they end)."""


@dataclass
class Capture:
    """A stream reader keeping the head and the tail of the output, counting the rest."""

    keep: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                excess = len(self.tail) - self.keep
                if excess > 0:
                    del self.tail[:excess]
                    self.dropped += excess

    def parts(self) -> tuple[str, str, int]:
        """(head, tail, dropped): the decoded ends and the bytes dropped between them."""
        if not self.dropped:
            whole = bytes(self.head + self.tail).decode("utf-8", errors="replace")
            return whole, "", 0
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail).decode("utf-8", errors="replace")
        return head, tail, self.dropped


@dataclass
class Finished:
    returncode: int | None
    """None when the command was killed at its timeout."""
    timed_out: bool
    stdout: Capture
    stderr: Capture
    sandboxed: bool
    timeout_s: float


async def run_command(
    command: str,
    spec: SandboxSpec,
    *,
    timeout_s: float,
    keep_bytes: int,
    status: SandboxStatus | None = None,
) -> Finished:
    """Run ``bash -c command`` under ``spec``; never longer than ``MAX_TIMEOUT_S``.

    Raises :class:`SandboxUnavailable` when no sandbox works and parser-only was not
    chosen."""
    if status is None:
        status = await asyncio.to_thread(sandbox_status)
    if status.refuses:
        raise SandboxUnavailable(status)
    timeout_s = min(timeout_s, MAX_TIMEOUT_S)
    private_tmp: str | None = None
    fds: list[int] = []
    cgroup = None
    try:
        limits = prlimit_argv(spec.limits, prlimit=status.prlimit) if status.prlimit else []
        # RLIMIT_NPROC does not bind uid 0: for root the cap is a cgroup's pids.max,
        # where the host offers one. (Joining it costs a shell and a cgroup migration
        # per call, which a non-root uid, bound by RLIMIT_NPROC, does not pay.)
        cgroup = make_pids_cgroup(spec.limits.processes) if os.geteuid() == 0 else None
        join = join_argv(cgroup) if cgroup is not None else []
        limits = [*join, *limits]
        if status.backend == "bubblewrap":
            # Internet sockets allowed: the network namespace decides what they reach.
            seccomp = seccomp_program(spec.profile, inet=True)
            if seccomp is not None:
                fds.append(_memfd("plangate-seccomp", seccomp))
            env = sandbox_env(os.environ)
            options = bwrap_options(spec, env=env, seccomp_fd=fds[0] if fds else None)
            # The options go through a descriptor: the command's /proc/1 (bubblewrap's
            # reaper) shows `bwrap --args N -- bash -c ...`, not the masks and environment.
            fds.append(_memfd("plangate-bwrap-args", b"".join(_nul_terminated(options))))
            argv = [*limits, status.bwrap, "--args", str(fds[-1]), "--", "bash", "-c", command]
            process_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        else:
            private_tmp = await asyncio.to_thread(tempfile.mkdtemp, prefix="plangate-cmd-")
            home = os.path.join(private_tmp, "home")
            os.mkdir(home)
            process_env = sandbox_env(os.environ, home=home)
            process_env["TMPDIR"] = private_tmp
            argv = [*limits, "bash", "-c", command]
            if status.backend == "landlock":
                network = spec.network and spec.profile is Profile.ACTING
                planning = spec.profile is Profile.PLANNING
                # The second program closes what Landlock leaves open (file metadata,
                # UDP) and goes first: the allowlist after it must still let it install.
                # Without a network namespace the allowlist gets internet sockets only
                # for a command that has the network.
                for program in (
                    landlock_gaps_filter(network=network, planning=planning),
                    seccomp_program(spec.profile, inet=network),
                ):
                    if program is not None:
                        fds.append(_memfd("plangate-seccomp", program))
                # The launcher applies the limits itself (one process start fewer).
                command_argv = await asyncio.to_thread(
                    landlock_argv,
                    spec,
                    ["bash", "-c", command],
                    tmpdir=Path(private_tmp),
                    env=process_env,
                    seccomp_fds=fds,
                )
                argv = [*join, *command_argv]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=spec.workspace,
            env=process_env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, killed as a whole
            pass_fds=tuple(fds),
        )
        return await _wait(proc, timeout_s, keep_bytes, sandboxed=status.available)
    finally:
        for fd in fds:
            os.close(fd)
        if cgroup is not None:
            # Off the call's path: removing a cgroup waits for the kernel to release it.
            # Submitted now (not at a task's first step), so it runs even when the loop
            # closes right after this call.
            cleanup = asyncio.get_running_loop().run_in_executor(None, remove_cgroup, cgroup)
            _cleanups.add(cleanup)
            cleanup.add_done_callback(_cleanups.discard)
        if private_tmp is not None:
            await asyncio.to_thread(shutil.rmtree, private_tmp, True)


def _nul_terminated(options: list[str]) -> list[bytes]:
    return [os.fsencode(option) + b"\0" for option in options]


def _memfd(name: str, data: bytes) -> int:
    """A readable descriptor holding ``data``, read from its start (for bwrap)."""
    fd = os.memfd_create(name)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


async def _wait(
    proc: asyncio.subprocess.Process, timeout_s: float, keep: int, *, sandboxed: bool
) -> Finished:
    out, err = Capture(keep), Capture(keep)
    assert proc.stdout is not None and proc.stderr is not None
    readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
    readers.add_done_callback(_consume)
    waiter = asyncio.ensure_future(proc.wait())
    try:
        await asyncio.wait({readers, waiter}, timeout=timeout_s)
    except BaseException:  # cancelled: take the command down with us
        _kill_group(proc)
        readers.cancel()
        waiter.cancel()
        raise
    timed_out = not (readers.done() and waiter.done())
    # Whatever the command left running in its group (a background job, a timed-out
    # tree) ends with it; bubblewrap's PID namespace ends the rest.
    _kill_group(proc)
    if timed_out:
        await asyncio.wait({waiter}, timeout=5)
        # A process that left the group may still hold the pipes open: stop reading.
        await asyncio.wait({readers}, timeout=2)
        for pending in (readers, waiter):
            if not pending.done():
                pending.cancel()
                await asyncio.wait({pending})
    return Finished(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        stdout=out,
        stderr=err,
        sandboxed=sandboxed,
        timeout_s=timeout_s,
    )


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a finished future's exception so asyncio does not log it as unhandled."""
    if not future.cancelled():
        future.exception()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
