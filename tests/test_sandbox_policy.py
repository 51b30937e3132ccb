"""The sandbox policy as data: argv, environment and limits, asserted as lists."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from plangate.sandbox import Limits, Profile, SandboxSpec, sandbox_status
from plangate.sandbox.policy import bwrap_argv, prlimit_argv, sandbox_env


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_planning_binds_everything_read_only_with_no_network(tmp_path: Path) -> None:
    spec = SandboxSpec(Profile.PLANNING, tmp_path, network=True)
    argv = bwrap_argv(spec, ["bash", "-c", "ls"], env={"PATH": "/usr/bin"})
    assert argv[:4] == ["bwrap", "--new-session", "--die-with-parent", "--unshare-all"]
    assert "--share-net" not in argv  # never network while planning, even if allowed
    assert "--bind" not in argv
    binds = [p for p in _pairs(argv, "--ro-bind") if p != "/dev/null"]  # masks
    assert binds == ["/", str(tmp_path)]
    assert argv[argv.index("--ro-bind") : argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    assert "/tmp" in _pairs(argv, "--tmpfs") and "--proc" in argv and "--dev" in argv
    assert argv[-5:] == ["--chdir", str(tmp_path), "--", "bash", "-c", "ls"][-5:]
    assert argv[argv.index("--clearenv") + 1 : argv.index("--clearenv") + 4] == [
        "--setenv",
        "PATH",
        "/usr/bin",
    ]


def test_acting_makes_the_workspace_writable_but_not_its_git_config(tmp_path: Path) -> None:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    argv = bwrap_argv(SandboxSpec(Profile.ACTING, tmp_path), ["true"], env={})
    # .git is bound onto itself, writable: a mount point cannot be renamed or replaced.
    assert _pairs(argv, "--bind") == [str(tmp_path), str(tmp_path / ".git")]
    protected = _pairs(argv, "--ro-bind")
    assert str(tmp_path / ".git" / "config") in protected
    assert str(tmp_path / ".git" / "hooks") in protected
    # The protected paths are mounted after the workspace, so they cover it.
    assert argv.index(str(tmp_path / ".git" / "config")) > argv.index("--bind")
    assert "--share-net" not in argv
    assert "--share-net" in bwrap_argv(
        SandboxSpec(Profile.ACTING, tmp_path, network=True), ["true"], env={}
    )


def test_masks_come_before_the_workspace(tmp_path: Path) -> None:
    secret_dir = tmp_path / "secrets"
    secret_dir.mkdir()
    secret_file = tmp_path / "db.sqlite"
    secret_file.write_text("x")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = SandboxSpec(
        Profile.ACTING, workspace, masked=(secret_dir, secret_file, tmp_path / "missing")
    )
    argv = bwrap_argv(spec, ["true"], env={})
    assert str(secret_dir) in _pairs(argv, "--tmpfs")
    assert argv[argv.index(str(secret_file)) - 2 : argv.index(str(secret_file)) + 1] == [
        "--ro-bind",
        "/dev/null",
        str(secret_file),
    ]
    assert str(tmp_path / "missing") not in argv
    assert argv.index(str(secret_file)) < argv.index("--bind")


def test_environment_is_an_allowlist_without_secrets() -> None:
    env = sandbox_env(
        {
            "PATH": "/usr/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "OPENAI_API_KEY": "sk",
            "PLANGATE_DATABASE_URL": "postgresql://x",
            "GITHUB_TOKEN": "t",
            "HOME": "/root",
            "LD_PRELOAD": "/evil.so",
            "BASH_ENV": "/evil.sh",
        }
    )
    assert env["PATH"] == "/usr/bin" and env["LANG"] == "C.UTF-8" and env["LC_ALL"] == "C"
    assert env["HOME"] == "/tmp/home" and env["TMPDIR"] == "/tmp"
    for name in (
        "OPENAI_API_KEY",
        "PLANGATE_DATABASE_URL",
        "GITHUB_TOKEN",
        "LD_PRELOAD",
        "BASH_ENV",
    ):
        assert name not in env
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_OPTIONAL_LOCKS"] == "0"
    count = int(env["GIT_CONFIG_COUNT"])
    keys = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(count)}
    assert keys["core.fsmonitor"] == "false" and keys["core.hooksPath"] == "/dev/null"
    assert keys["protocol.ext.allow"] == "never" and len(keys) == count
    assert f"GIT_CONFIG_KEY_{count}" not in env


def test_locale_variables_pass_only_with_a_locale_name() -> None:
    env = sandbox_env(
        {
            "LC_ALL": "en_US.UTF-8",
            "LC_TIME": "sr_RS@latin",
            "LC_PAPER": "C",
            "LC_CTYPE": "$(touch pwned)",
            "LC_MESSAGES": "x" * 65,
            "LC_NUMERIC": "",
            "LC_SECRET_STASH": "C",
            "LC_ADDRESS": "sk-live-1234",
            "LC_NAME": "a/b",
            "LC_MONETARY": "de_DE.ISO-8859-1",
            "LCX": "C",
        }
    )
    assert env["LC_ALL"] == "en_US.UTF-8" and env["LC_TIME"] == "sr_RS@latin"
    assert env["LC_PAPER"] == "C" and env["LC_MONETARY"] == "de_DE.ISO-8859-1"
    for name in (
        "LC_CTYPE",
        "LC_MESSAGES",
        "LC_NUMERIC",
        "LC_SECRET_STASH",
        "LC_ADDRESS",
        "LC_NAME",
        "LCX",
    ):
        assert name not in env, name


def test_the_kernel_knobs_are_read_only_and_root_only_files_masked(tmp_path: Path) -> None:
    argv = bwrap_argv(SandboxSpec(Profile.ACTING, tmp_path), ["true"], env={})
    tries = _pairs(argv, "--ro-bind-try")
    assert "/proc/sys" in tries and "/proc/sysrq-trigger" in tries
    # Over the fresh /proc, not under it.
    assert argv.index("/proc/sys") > argv.index("--proc")
    masks = [
        argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] == "/dev/null"
    ]
    assert "/etc/shadow" in masks
    # /dev/shm is a capped tmpfs and /dev itself read-only, like /tmp is capped.
    size = str(Limits().tmp_bytes)
    shm = argv.index("/dev/shm")
    assert argv[shm - 3 : shm] == ["--size", size, "--tmpfs"]
    assert argv[shm + 1 : shm + 3] == ["--remount-ro", "/dev"]


def test_the_database_folder_hides_siblings_made_later(tmp_path: Path) -> None:
    """The database in plangate's own folder: the folder is masked and its other
    entries bound back, so a -wal that appears after the start is not among them."""
    own = tmp_path / ".plangate"
    own.mkdir()
    (own / "policy.toml").write_text("")
    (own / "plangate.db").write_text("db")
    (own / "plangate.db-mj0123").write_text("journal")
    (own / "data").mkdir()
    db = own / "plangate.db"
    masked = tuple(Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal"))
    for profile in Profile:
        argv = bwrap_argv(SandboxSpec(profile, tmp_path, masked=masked), ["true"], env={})
        # Once before the workspace bind and once above it (the workspace uncovers it).
        assert _pairs(argv, "--tmpfs").count(str(own)) == 2
        assert _pairs(argv, "--remount-ro").count(str(own)) == 2
        bound = _pairs(argv, "--ro-bind")
        assert str(own / "policy.toml") in bound and str(own / "data") in bound
        assert not [b for b in bound if "plangate.db" in b]
        last = len(argv) - 1 - argv[::-1].index(str(own))
        assert last > argv.index(str(tmp_path))


def test_limits_become_a_prlimit_prefix() -> None:
    argv = prlimit_argv(Limits(cpu_s=5, file_size_bytes=10, processes=7), prlimit="/p")
    assert argv[0] == "/p" and argv[-1] == "--"
    assert "--cpu=5" in argv and "--fsize=10" in argv and "--nproc=7" in argv
    assert "--core=0" in argv


def test_sandbox_off_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANGATE_SANDBOX", "off")
    sandbox_status.cache_clear()
    try:
        status = sandbox_status()
        assert not status.available and "PLANGATE_SANDBOX=off" in status.detail
        doctor = subprocess.run(
            [sys.executable, "-m", "plangate.cli.main", "doctor"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert doctor.returncode == 1 and "!! sandbox" in doctor.stdout
    finally:
        sandbox_status.cache_clear()


def test_doctor_reports_the_sandbox(sandbox_mode: str) -> None:
    doctor = subprocess.run(
        [sys.executable, "-m", "plangate.cli.main", "doctor"],
        capture_output=True,
        text=True,
        check=False,
    )
    if sandbox_mode == "sandbox":
        assert doctor.returncode == 0, doctor.stdout
        assert doctor.stdout.startswith("ok sandbox: bubblewrap")
        assert "ok privileges:" in doctor.stdout and "refused io_uring" in doctor.stdout
    else:
        assert doctor.returncode == 1
