"""The Landlock sandbox: its rules (pure), its launcher, and what it holds that the
shared containment tests do not ask (they run under it too, see test_containment*.py).

Commands run through the real launcher on this kernel; one test runs it as an
unprivileged user (nobody), where Landlock must hold without any privilege.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import require_service
from plangate.sandbox.landlock import LAUNCHER, landlock_argv, landlock_rules, tool_roots
from plangate.sandbox.landlock_exec import ABI_NETWORK, EXIT_REFUSED, abi_version
from plangate.sandbox.landlock_filter import landlock_gaps_filter
from plangate.sandbox.policy import Profile, SandboxSpec
from plangate.sandbox.seccomp import seccomp_program

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


@pytest.fixture
def landlock() -> None:
    if abi_version() < ABI_NETWORK:
        require_service(f"Landlock ABI {ABI_NETWORK}+ (this kernel: {abi_version()})")


def _kinds(rules: list[tuple[str, str]], path: Path) -> set[str]:
    return {kind for kind, where in rules if where == str(path)}


def _granted(rules: list[tuple[str, str]], path: Path) -> bool:
    """Whether a rule reaches ``path`` (on it or on a folder above it), other than a
    folder listing."""
    return any(
        kind != "list" and (path == Path(where) or Path(where) in path.parents)
        for kind, where in rules
    )


# ------------------------------------------------------------------------ the rules


def test_planning_reads_the_workspace_and_writes_only_its_temp_folder(tmp_path: Path) -> None:
    ws, tmp = tmp_path / "ws", tmp_path / "tmp"
    ws.mkdir()
    tmp.mkdir()
    rules = landlock_rules(SandboxSpec(Profile.PLANNING, ws), tmpdir=tmp, env=ENV)
    assert _kinds(rules, ws) == {"read"}
    assert [where for kind, where in rules if kind == "write"] == [str(tmp)]
    assert _kinds(rules, Path("/dev/null")) == {"device"}
    for hidden in (Path("/etc/shadow"), Path.home(), Path("/tmp"), Path("/var"), Path("/run")):
        assert not _granted(rules, hidden.resolve()), hidden


def test_a_database_in_the_workspace_is_left_out_of_the_reads(tmp_path: Path) -> None:
    ws, tmp = tmp_path / "ws", tmp_path / "tmp"
    (ws / ".plangate").mkdir(parents=True)
    (ws / "src").mkdir()
    db = ws / ".plangate" / "plangate.db"
    db.write_text("SQLite format 3")
    (ws / ".plangate" / "notes").write_text("kept")
    (ws / "link-to-db").symlink_to(db)
    tmp.mkdir()
    spec = SandboxSpec(Profile.PLANNING, ws, masked=(db,))
    rules = landlock_rules(spec, tmpdir=tmp, env=ENV)
    assert not _granted(rules, db)
    assert _kinds(rules, ws) == {"list"} and _kinds(rules, ws / ".plangate") == {"list"}
    assert _granted(rules, ws / "src") and _granted(rules, ws / ".plangate" / "notes")
    assert not _granted(rules, ws / "link-to-db")  # a rule would follow it to the database


def test_acting_with_a_scope_writes_only_its_paths(tmp_path: Path) -> None:
    ws, tmp = tmp_path / "ws", tmp_path / "tmp"
    (ws / "src").mkdir(parents=True)
    (ws / "NOTES.md").write_text("")
    tmp.mkdir()
    spec = SandboxSpec(Profile.ACTING, ws, writable=(ws / "NOTES.md",))
    rules = landlock_rules(spec, tmpdir=tmp, env=ENV)
    assert _kinds(rules, ws) == {"read"}
    assert _kinds(rules, ws / "NOTES.md") == {"write"}
    whole = landlock_rules(SandboxSpec(Profile.ACTING, ws), tmpdir=tmp, env=ENV)
    assert _kinds(whole, ws) == {"write"}


def test_tools_on_path_are_readable_but_never_the_home_folder_itself() -> None:
    home = Path("/home/u")
    env = {"PATH": "/home/u/.pyenv/shims:/home/u/bin:/home/u:/usr/bin:/bin:relative"}
    roots = tool_roots({**env, "VIRTUAL_ENV": "/srv/venv"}, home)
    assert Path("/home/u/.pyenv") in roots and Path("/srv/venv") in roots
    assert home not in roots and Path("/") not in roots


def test_the_argv_carries_rules_limits_and_the_network_choice(tmp_path: Path) -> None:
    spec = SandboxSpec(Profile.ACTING, tmp_path, network=True)
    argv = landlock_argv(spec, ["bash", "-c", "x"], tmpdir=tmp_path, env=ENV, seccomp_fds=[7])
    assert argv[1:4] == ["-I", "-S", str(LAUNCHER)]
    assert argv[-4:] == ["--", "bash", "-c", "x"]
    assert "--network" in argv and argv[argv.index("--seccomp-fd") + 1] == "7"
    assert "nproc=1024" in argv
    planning = SandboxSpec(Profile.PLANNING, tmp_path, network=True)
    assert "--network" not in landlock_argv(planning, ["true"], tmpdir=tmp_path, env=ENV)


def test_the_gaps_filter_is_whole_instructions_and_differs_by_profile() -> None:
    closed = landlock_gaps_filter(network=False, planning=True, machine="x86_64")
    acting = landlock_gaps_filter(network=False, planning=False, machine="x86_64")
    online = landlock_gaps_filter(network=True, planning=False, machine="x86_64")
    assert closed and acting and online
    assert all(len(p) % 8 == 0 for p in (closed, acting, online))
    assert len(closed) > len(acting) and len(online) > len(acting)
    assert landlock_gaps_filter(network=False, planning=True, machine="sparc") is None


# ------------------------------------------------------------------------ the launcher


def _run(
    argv: list[str], fds: tuple[int, ...] = (), cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, pass_fds=fds, env=ENV, cwd=cwd
    )


def test_the_launcher_fails_closed(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for bad in (["--rule", "everything=/"], ["--rule", "read=relative"], ["--nope"], []):
        done = _run([sys.executable, "-I", "-S", str(LAUNCHER), *bad, "--", "touch", str(marker)])
        assert done.returncode == EXIT_REFUSED, (bad, done)
        assert "not started" in done.stderr
        assert not marker.exists()


@pytest.fixture
def folders() -> Iterator[tuple[Path, Path, Path]]:
    """A workspace, a temp folder and an outside folder, all writable by anyone (so only
    the sandbox stands between a command and them)."""
    root = Path(tempfile.mkdtemp(prefix="plangate-landlock-"))
    os.chmod(root, 0o755)
    made = []
    for name in ("ws", "tmp", "outside"):
        (root / name).mkdir()
        os.chmod(root / name, 0o777)
        made.append(root / name)
    yield made[0], made[1], made[2]
    shutil.rmtree(root, ignore_errors=True)


def _sandboxed(
    folders: tuple[Path, Path, Path], script: str, profile: Profile = Profile.PLANNING
) -> subprocess.CompletedProcess[str]:
    ws, tmp, _ = folders
    planning = profile is Profile.PLANNING
    fds = []
    for program in (
        landlock_gaps_filter(network=False, planning=planning),
        seccomp_program(profile, inet=False),
    ):
        if program is not None:
            fd = os.memfd_create("seccomp")
            os.write(fd, program)
            os.lseek(fd, 0, os.SEEK_SET)
            fds.append(fd)
    spec = SandboxSpec(profile, ws)
    argv = landlock_argv(spec, ["bash", "-c", script], tmpdir=tmp, env=ENV, seccomp_fds=fds)
    try:
        return _run(argv, tuple(fds), cwd=ws)
    finally:
        for fd in fds:
            os.close(fd)


def test_what_landlock_holds_beyond_the_shared_cases(
    landlock: None, folders: tuple[Path, Path, Path]
) -> None:
    ws, tmp, outside = folders
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0plangate-canary-{os.getpid()}")
    abstract.listen(1)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        done = _sandboxed(
            folders,
            f"""
            echo in-tmp > {tmp}/made && cat {tmp}/made
            echo x > {outside}/pwned && echo WROTE-OUTSIDE
            echo x > {ws}/pwned && echo WROTE-WORKSPACE
            ls /tmp > /dev/null && echo LISTED-TMP
            echo 1 > /proc/sys/vm/drop_caches && echo WROTE-SYSCTL
            kill -0 {sleeper.pid} && echo SIGNALLED-HOST
            python3 -c "import socket; s = socket.socket(socket.AF_UNIX);
s.connect(b'\\0plangate-canary-{os.getpid()}')" 2>/dev/null && echo ABSTRACT
            hostname pwned 2>/dev/null && echo HOSTNAME
            grep -E '^(NoNewPrivs|CapEff|CapBnd)' /proc/self/status
            """,
        )
    finally:
        sleeper.kill()
        sleeper.wait()
        abstract.close()
    out = done.stdout
    assert "in-tmp" in out, done
    for escaped in (
        "WROTE-OUTSIDE",
        "WROTE-WORKSPACE",
        "LISTED-TMP",
        "WROTE-SYSCTL",
        "SIGNALLED-HOST",
        "ABSTRACT",
        "HOSTNAME",
    ):
        assert escaped not in out, (escaped, done)
    assert "NoNewPrivs:\t1" in out
    assert "CapEff:\t0000000000000000" in out and "CapBnd:\t0000000000000000" in out
    assert list(outside.iterdir()) == [] and not (ws / "pwned").exists()


def test_acting_writes_the_workspace_but_never_a_mode(
    landlock: None, folders: tuple[Path, Path, Path]
) -> None:
    ws, _, outside = folders
    (outside / "tool").write_text("#!/bin/sh\n")
    script = f"""
        echo made > made.txt && touch new.txt && echo CREATED
        chmod 4777 {outside}/tool 2>/dev/null && echo CHMOD
        echo x > {outside}/pwned 2>/dev/null && echo WROTE-OUTSIDE
    """
    done = _sandboxed(folders, script, Profile.ACTING)
    assert "CREATED" in done.stdout, done
    assert (ws / "made.txt").read_text() == "made\n" and (ws / "new.txt").exists()
    assert "CHMOD" not in done.stdout and "WROTE-OUTSIDE" not in done.stdout
    assert (outside / "tool").stat().st_mode & 0o7777 != 0o4777


def test_landlock_holds_for_an_unprivileged_user(
    landlock: None, folders: tuple[Path, Path, Path]
) -> None:
    """As nobody, with no capability to begin with: the folders are writable by anyone,
    so only Landlock keeps the command out of them."""
    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root; this run is unprivileged already")
    setpriv = shutil.which("setpriv")
    python = shutil.which("python3", path="/usr/bin:/bin")
    if setpriv is None or python is None:
        require_service("setpriv (util-linux) and a system python3 for the nobody run")
    assert setpriv is not None and python is not None
    ws, tmp, outside = folders
    launcher = tmp.parent / "landlock_exec.py"  # readable by nobody, unlike the checkout
    shutil.copy(LAUNCHER, launcher)
    os.chmod(launcher, 0o644)
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    control = _run([*nobody, "sh", "-c", f"echo x > {outside}/control && id -u"])
    assert control.returncode == 0 and control.stdout.strip() == "65534", control
    spec = SandboxSpec(Profile.PLANNING, ws)
    script = f"""
        id -u; grep NoNewPrivs /proc/self/status; ulimit -u
        echo ok > {tmp}/made && cat {tmp}/made
        echo x > {outside}/pwned && echo WROTE-OUTSIDE
        echo x > {ws}/pwned && echo WROTE-WORKSPACE
    """
    argv = landlock_argv(spec, ["bash", "-c", script], tmpdir=tmp, env=ENV, python=python)
    argv[3] = str(launcher)
    done = _run([*nobody, *argv], cwd=ws)
    lines = done.stdout.split()
    assert lines[:2] == ["65534", "NoNewPrivs:"] and "1024" in lines and "ok" in lines, done
    assert "WROTE-OUTSIDE" not in done.stdout and "WROTE-WORKSPACE" not in done.stdout
    assert not (outside / "pwned").exists() and not (ws / "pwned").exists()


# ------------------------------------------------------------------------ selection


async def test_without_a_sandbox_or_an_opt_out_commands_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A choice that gives no sandbox (here an unknown one) refuses commands with a
    code; it never runs them unsandboxed. Only ``off`` runs them with the parser."""
    from plangate.agent.bash_tool import bash_tool
    from plangate.agent.workspace import Workspace
    from plangate.policy.authority import Authority, use_authority
    from plangate.sandbox import sandbox_status

    tool = bash_tool(Workspace(tmp_path), timeout_s=30, max_chars=1000)
    monkeypatch.setenv("PLANGATE_SANDBOX", "nonsense")
    sandbox_status.cache_clear()
    try:
        status = sandbox_status()
        assert status.refuses and not status.available and "nonsense" in status.detail
        with use_authority(Authority(planning=False)):
            refused = await tool(command="touch ran")
        assert refused["code"] == "SANDBOX_UNAVAILABLE", refused
        assert not (tmp_path / "ran").exists()
        monkeypatch.setenv("PLANGATE_SANDBOX", "off")
        sandbox_status.cache_clear()
        with use_authority(Authority(planning=False)):
            ran = await tool(command="touch ran")
        assert ran["exit_code"] == 0 and (tmp_path / "ran").exists()
    finally:
        sandbox_status.cache_clear()
