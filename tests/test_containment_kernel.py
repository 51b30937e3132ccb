"""Containment at the kernel boundary: a command holds none of the host's privileges.

plangate often runs as root (most containers). Each case is an attack from issue 28,
run through the real ADK Runner and the real ``Bash`` tool (or, for resource caps that
need small limits, the real sandbox process runner), while planning and after
approval. Where feasible a canary shows the attack works without the defence -- on the
host, or in a bare bubblewrap sandbox without plangate's hardening -- so a case cannot
pass because the attack was broken anyway.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Harness, tool_results
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.sandbox import Limits, Profile, SandboxSpec
from plangate.sandbox.cgroup import pids_cgroup_parent
from plangate.sandbox.process import run_command
from sandbox_support import cannot_hold, use_sandbox

ROOT = os.geteuid() == 0
SYSCTL = Path("/proc/sys/fs/lease-break-time")
"""A harmless setting: the attack writes the value it already has."""
BARE_BWRAP = ["bwrap", "--unshare-all", "--cap-drop", "ALL", "--ro-bind", "/", "/"]
BARE_BWRAP += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--"]

# A Python one-liner: io_uring_setup(4, params) -> "uring <fd or -errno name>".
URING = (
    "import ctypes, errno; l = ctypes.CDLL(None, use_errno=True); "
    "p = ctypes.create_string_buffer(120); fd = l.syscall(425, 4, p); "
    "print('uring', fd if fd >= 0 else errno.errorcode[ctypes.get_errno()])"
)


async def _run(workspace: Path, db: Path, commands: list[str], *, planning: bool) -> list[Any]:
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{db}")
    await harness.start({"agent_mode": "plan"} if planning else None)
    model.add(*[[call("Bash", command=c, timeout_s=60)] for c in commands], [text("done")])
    return tool_results(await harness.send("look around"), "Bash")


@pytest.fixture(params=["sandbox", "landlock"])
def sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each case under bubblewrap and under Landlock."""
    yield from use_sandbox(request.param, monkeypatch)


LANDLOCK_ERRORS = (
    "Landlock refuses these writes with 'Permission denied', not 'Read-only file "
    "system', and does not answer access(2) (test -w): the setting stays unchanged and "
    "no capability survives (tests/test_landlock.py asserts both under Landlock)"
)
LANDLOCK_NO_PID_NAMESPACE = (
    "Landlock has no PID namespace: /proc/1 is the host's init, whose command line any "
    "process may read (another process's environment and memory stay refused)"
)
LANDLOCK_LISTS_NAMES = (
    "Landlock hides the database by granting the folder's other entries one by one: a "
    "-wal made later is hidden anywhere (the canary's premise fails), and the names in "
    ".plangate stay listable; with the whole workspace writable it is not hidden at all"
)
LANDLOCK_NO_DEV_SHM = (
    "under Landlock /dev/shm and /dev are not writable at all (Permission denied), "
    "so there is no cap to reach"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_sample_workspace(tmp_path / "ws")


@pytest.fixture
def sysctl_canary() -> Iterator[str]:
    """The setting's value, put back afterwards whatever happened."""
    value = SYSCTL.read_text()
    try:
        yield value.strip()
    finally:
        if ROOT and SYSCTL.read_text() != value:
            SYSCTL.write_text(value)


@pytest.mark.parametrize("planning", [True, False], ids=["planning", "acting"])
async def test_no_kernel_setting_changes_and_no_capability_survives(
    workspace: Path,
    tmp_path: Path,
    sysctl_canary: str,
    planning: bool,
    sandbox: str,
    request: pytest.FixtureRequest,
) -> None:
    cannot_hold(request, sandbox, "landlock", LANDLOCK_ERRORS)
    # Through Python, so that the shell parser does not refuse it while planning: the
    # sandbox is what must stop it.
    write = f"python3 -c \"open('{SYSCTL}', 'w').write('{sysctl_canary}')\""
    if ROOT:  # canary: as root, bubblewrap alone lets the command write the setting
        bare = subprocess.run([*BARE_BWRAP, "sh", "-c", write], capture_output=True, timeout=60)
        assert bare.returncode == 0, bare.stderr
    results = await _run(
        workspace,
        tmp_path / "p.db",
        [
            write,
            "grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status",
            "test -w /proc/sysrq-trigger && echo writable || echo refused",
            "python3 -c \"open('/dev/pwned', 'w')\"",
        ],
        planning=planning,
    )
    assert results[0]["exit_code"] != 0, results[0]
    assert "Read-only file system" in results[0]["stderr"] or not ROOT, results[0]
    assert SYSCTL.read_text().strip() == sysctl_canary
    caps = dict(line.split(":\t") for line in results[1]["stdout"].splitlines())
    assert caps == {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapAmb": "0" * 16}, caps
    assert results[2]["stdout"].strip() == "refused"
    assert "Read-only file system" in results[3]["stderr"], results[3]


@pytest.mark.skipif(not Path("/proc/sys/kernel").is_dir(), reason="Linux")
async def test_io_uring_netlink_and_unix_sockets_are_refused_while_planning(
    workspace: Path, tmp_path: Path, sandbox: None
) -> None:
    """io_uring opened and connected a host Unix socket without socket(2): its setup is
    refused, and so is every Unix or netlink socket, while the canary socket sees
    nothing."""
    folder = Path(tempfile.mkdtemp(prefix=".plangate-sock-", dir=Path.home()))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "s"))
    server.listen(4)
    server.setblocking(False)
    try:
        # Canary: the host may set up a ring and open these sockets.
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        ring = libc.syscall(425, 4, params)
        uring_on_host = ring >= 0
        if uring_on_host:
            os.close(ring)
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()

        sock = folder / "s"
        connect = (
            "import socket; s = socket.socket(socket.AF_UNIX); "
            f"s.connect({str(sock)!r}); s.send(b'PWNED'); print('connected')"
        )
        results = await _run(
            workspace,
            tmp_path / "p.db",
            [
                f'python3 -c "{URING}"',
                f'python3 -c "{connect}"',
                "python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)'",
                "python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'",
                'python3 -c \'import socket; a, b = socket.socketpair(); a.send(b"x"); '
                "print(b.recv(1))'",
            ],
            planning=True,
        )
        if uring_on_host:
            assert results[0]["stdout"].strip() == "uring EPERM", results[0]
        assert "connected" not in results[1]["stdout"]
        assert "Operation not permitted" in results[1]["stderr"], results[1]
        assert "Operation not permitted" in results[2]["stderr"], results[2]
        assert "Operation not permitted" in results[3]["stderr"], results[3]
        assert results[4]["stdout"].strip() == "b'x'", results[4]  # local IPC still works
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


async def test_namespaces_ptrace_and_keyrings_are_refused(
    workspace: Path, tmp_path: Path, sandbox: None
) -> None:
    # Canary: bubblewrap alone lets a command make a user namespace (and in it, mounts).
    bare = subprocess.run([*BARE_BWRAP, "unshare", "-U", "true"], capture_output=True, timeout=60)
    assert bare.returncode == 0, bare.stderr
    keyctl = (
        "import ctypes, errno; l = ctypes.CDLL(None, use_errno=True); "
        "r = l.syscall(250, 0, -3, 0); print('keyctl', errno.errorcode.get(ctypes.get_errno()))"
    )
    results = await _run(
        workspace,
        tmp_path / "p.db",
        ["unshare -U true", "unshare -m true", f'python3 -c "{keyctl}"'],
        planning=False,
    )
    assert results[0]["exit_code"] != 0 and "Operation not permitted" in results[0]["stderr"]
    assert results[1]["exit_code"] != 0
    assert results[2]["stdout"].strip() == "keyctl EPERM", results[2]


async def test_root_only_files_and_the_sandbox_command_line_are_not_visible(
    workspace: Path,
    tmp_path: Path,
    sandbox: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    cannot_hold(request, sandbox, "landlock", LANDLOCK_NO_PID_NAMESPACE)
    monkeypatch.setenv("LC_PAPER", "en_US.UTF-8")
    monkeypatch.setenv("LC_STASH", "C")
    monkeypatch.setenv("LC_ADDRESS", "sk-live-0123456789")
    if ROOT and Path("/etc/shadow").exists():  # canary: root reads it on the host
        assert Path("/etc/shadow").read_bytes()
    results = await _run(
        workspace,
        tmp_path / "p.db",
        [
            "head -c 1 /etc/shadow; echo; head -c 1 /etc/gshadow",
            "tr '\\0' ' ' < /proc/1/cmdline",
            "printenv | grep ^LC_ | sort",
        ],
        planning=True,
    )
    assert results[0]["stdout"].strip() == "", results[0]
    cmdline = results[1]["stdout"]
    assert "--args" in cmdline, cmdline
    for leaked in ("--setenv", "--ro-bind", "--tmpfs", str(tmp_path / "p.db")):
        assert leaked not in cmdline, cmdline
    assert results[2]["stdout"] == "LC_PAPER=en_US.UTF-8\n", results[2]


async def test_database_siblings_made_after_the_start_stay_hidden(
    workspace: Path, sandbox: str, request: pytest.FixtureRequest
) -> None:
    """SQLite makes ``-wal`` and ``-shm`` when a connection opens: one that appears
    while a command runs is as hidden as one that existed before."""
    cannot_hold(request, sandbox, "landlock", LANDLOCK_LISTS_NAMES)
    own = workspace / ".plangate"
    own.mkdir(exist_ok=True)
    (own / "policy.toml").write_text("# kept visible\n")
    db = own / "plangate.db"
    db.write_text("SQLite format 3 (stand-in)")

    async def attempt(db: Path, profile: Profile) -> str:
        masked = tuple(Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal"))
        spec = SandboxSpec(profile, workspace, masked=masked)
        command = f"sleep 2; ls {db.parent}; cat {db}-wal"
        task = asyncio.ensure_future(run_command(command, spec, timeout_s=60, keep_bytes=4096))
        await asyncio.sleep(0.5)  # the sandbox is being set up, or already running
        Path(f"{db}-wal").write_text("WAL-SECRET")
        try:
            finished = await task
        finally:
            Path(f"{db}-wal").unlink()
        return finished.stdout.parts()[0]

    # Canary: in another folder only what exists at the start is masked, and a -wal
    # made later shows (a known limit: plangate's default database is in .plangate).
    elsewhere = workspace / "var"
    elsewhere.mkdir()
    (elsewhere / "app.db").write_text("SQLite format 3 (stand-in)")
    assert "WAL-SECRET" in await attempt(elsewhere / "app.db", Profile.PLANNING)
    for profile in Profile:
        shown = await attempt(db, profile)
        assert "WAL-SECRET" not in shown and "plangate.db" not in shown, shown
        assert "policy.toml" in shown


async def test_dev_shm_and_dev_are_capped_like_tmp(
    workspace: Path, sandbox: str, request: pytest.FixtureRequest
) -> None:
    cannot_hold(request, sandbox, "landlock", LANDLOCK_NO_DEV_SHM)
    limits = Limits(tmp_bytes=4 * 1024**2)
    spec = SandboxSpec(Profile.ACTING, workspace, limits=limits)
    finished = await run_command(
        "head -c 8M /dev/zero > /dev/shm/fill; du -k /dev/shm/fill; echo x > /dev/fill",
        spec,
        timeout_s=60,
        keep_bytes=4096,
    )
    out, err = finished.stdout.parts()[0], finished.stderr.parts()[0]
    assert "No space left on device" in err, err
    assert int(out.split()[0]) <= 4096, out
    assert "/dev/fill: Read-only file system" in err, err


SPAWN = (
    "import subprocess\n"
    "started = []\n"
    "try:\n"
    "    for _ in range(40):\n"
    "        started.append(subprocess.Popen(['sleep', '3']))\n"
    "except OSError as exc:\n"
    "    print('refused', exc.strerror)\n"
    "print(len(started))\n"
)


async def test_the_process_cap_binds_root(workspace: Path, sandbox: None) -> None:
    if ROOT and pids_cgroup_parent() is None:
        pytest.skip("root without a writable pids cgroup: no process cap binds root here")
    if ROOT:  # canary: RLIMIT_NPROC alone does not bind root
        bare = subprocess.run(
            ["prlimit", "--nproc=20", "python3", "-c", SPAWN],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert bare.stdout.strip() == "40", bare
    spec = SandboxSpec(Profile.ACTING, workspace, limits=Limits(processes=20))
    finished = await run_command(
        f"python3 -c {shlex.quote(SPAWN)}", spec, timeout_s=60, keep_bytes=4096
    )
    out, err = finished.stdout.parts()[0], finished.stderr.parts()[0]
    # As another user RLIMIT_NPROC counts the user's other processes too: Python itself
    # may be the one refused.
    refused = "refused Resource temporarily unavailable" in out
    assert refused or "Resource temporarily unavailable" in err, (out, err)
    started = int(out.split()[-1]) if refused else 0
    assert started < 20, out


async def test_no_cgroup_outlives_its_command_or_its_process(workspace: Path) -> None:
    """Each command's cgroup is removed after it, and one left by a plangate process
    that was killed is removed by the next one that starts."""
    parent = pids_cgroup_parent()
    if parent is None or not ROOT:
        pytest.skip("no pids cgroup for commands here")
    # A pid above the kernel's largest (pid_max is at most 4194304) never runs.
    stale = parent / "plangate-4194999-0"
    stale.mkdir()
    spec = SandboxSpec(Profile.PLANNING, workspace)
    await run_command("true", spec, timeout_s=60, keep_bytes=1024)
    mine = f"plangate-{os.getpid()}-"
    for _ in range(200):  # the removal runs after the call returned
        if not [p for p in parent.iterdir() if p.name.startswith(mine)]:
            break
        await asyncio.sleep(0.05)
    assert not [p for p in parent.iterdir() if p.name.startswith(mine)]
    pids_cgroup_parent.cache_clear()
    assert pids_cgroup_parent() == parent
    assert not stale.exists()
