"""Containment: the operating system holds the plan gate.

Every case drives the real ADK Runner and the real ``Bash`` tool, under the bubblewrap
sandbox, under the Landlock sandbox and (where it can hold) with the parser alone. While planning nothing may change —
not the workspace, not a canary outside it — and no connection may leave; after
approval only the workspace may change; no secret is visible; a timeout leaves nothing
behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Harness, tool_results
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from sandbox_support import cannot_hold, use_sandbox

ATTACKS = [
    # bash evaluates array subscripts: these ran `touch` through a "read-only" builtin
    "printf -v 'a[$(touch pwned.txt)]' x",
    "test -v 'a[$(touch pwned.txt)]'",
    "[ -v 'a[$(touch pwned.txt)]' ]",
    "[[ -v a[$(touch pwned.txt)] ]]",
    "declare -n ref='a[$(touch pwned.txt)]'; echo $ref",
    "read -r 'a[$(touch pwned.txt)]' < README.md",
    "echo $(( a[$(touch pwned.txt)] ))",
    "let 'a[$(touch pwned.txt)]=1'",
    "unset 'a[$(touch pwned.txt)]'",
    "mapfile -t 'a[$(touch pwned.txt)]' < README.md",
    # plain writes, interpreters and wrappers
    "echo pwned > pwned.txt",
    "touch pwned.txt",
    "python3 -c \"open('pwned.txt','w').write('x')\"",
    "bash -c 'touch pwned.txt'",
    "cat $(touch pwned.txt)",
    'awk \'BEGIN { print "x" > "pwned.txt" }\'',
    "ls | xargs touch",
    "for f in pwned.txt; do touch $f; done",
    "sed -i s/on_hand/pwned/ inventory/stock.py",
    "cp README.md pwned.txt",
    "mkdir pwned",
    "git init -q pwned",
    "seq 1 200000 | sort -S 64K -T . -n | tail -1",
    "echo x >> inventory/stock.py",
]


@pytest.fixture(params=["sandbox", "landlock", "parser-only"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each case under bubblewrap, Landlock and the parser alone."""
    yield from use_sandbox(request.param, monkeypatch)


@pytest.fixture(params=["sandbox", "landlock"])
def sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Behaviour only a sandbox gives, under each of the two."""
    yield from use_sandbox(request.param, monkeypatch)


NO_PRIVATE_TMP = (
    "Landlock has no mount namespace: the host's /tmp is refused (not replaced by a "
    "private one; the command's own temp folder is $TMPDIR) and a refused write reads "
    "'Permission denied', not 'Read-only file system'"
)
NO_ISLANDS = (
    "Landlock grants cannot be taken back beneath a folder: with the whole workspace "
    "writable, a database kept in it is readable and writable by commands"
)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside the workspace holding a canary no command may change.

    It lives under the home folder, not under /tmp: the sandbox gives every command a
    private /tmp, which would hide a canary there instead of protecting it.
    """
    folder = Path(tempfile.mkdtemp(prefix=".plangate-canary-", dir=Path.home()))
    (folder / "canary.txt").write_text("canary\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a hash of its content (folders as 'dir')."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


async def planning_harness(workspace: Path, tmp_path: Path) -> tuple[Harness, ScriptedLlm]:
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    return harness, model


async def run_commands(
    harness: Harness, model: ScriptedLlm, commands: list[str], **extra: Any
) -> list[dict[str, Any]]:
    model.add(*[[call("Bash", command=c, **extra)] for c in commands], [text("done")])
    return tool_results(await harness.send("look around"), "Bash")


async def test_nothing_changes_while_planning(
    tmp_path: Path, outside: Path, sandbox_mode: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    bare = workspace / "vendored"  # a bare repository committed as plain files
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    marker = outside / "fsmonitor-ran"
    (bare / "config").write_text(
        (bare / "config").read_text() + f"[core]\n\tfsmonitor = touch {marker}; false\n"
    )
    before, canary = snapshot(workspace), snapshot(outside)
    harness, model = await planning_harness(workspace, tmp_path)
    commands = [*ATTACKS, "git -C vendored status", f"touch {outside}/pwned.txt"]
    results = await run_commands(harness, model, commands)
    assert len(results) == len(commands)
    assert snapshot(workspace) == before
    assert snapshot(outside) == canary
    assert not marker.exists()
    if sandbox_mode == "parser-only":
        # Without a sandbox nothing the parser cannot prove may run at all.
        for command, result in zip(ATTACKS, results, strict=False):
            assert result.get("error", "").startswith("PLAN_MODE_GATE"), (command, result)


async def test_git_status_does_not_rewrite_the_index_while_planning(
    tmp_path: Path, sandbox_mode: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=workspace, check=True)
    subprocess.run([*git, "add", "-A"], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=workspace, check=True)
    (workspace / "README.md").touch()  # stale stat data: a plain git status would refresh it
    index = workspace / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    harness, model = await planning_harness(workspace, tmp_path)
    results = await run_commands(harness, model, ["git status"])
    assert results[0]["exit_code"] == 0, results
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A canary server on 127.0.0.1 that records every connection it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(str(peer))
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], seen
    stop.set()
    thread.join(timeout=2)
    server.close()


async def test_no_connection_leaves_while_planning(
    tmp_path: Path, listener: tuple[int, list[str]], sandbox_mode: str
) -> None:
    port, seen = listener
    workspace = copy_sample_workspace(tmp_path / "ws")
    harness, model = await planning_harness(workspace, tmp_path)
    commands = [
        f"echo hi > /dev/tcp/127.0.0.1/{port}",
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\"",
        f"curl -s http://127.0.0.1:{port}/",
    ]
    results = await run_commands(harness, model, commands)
    assert len(results) == 3
    assert seen == []


async def test_an_approved_network_amendment_opens_the_network_for_that_command_only(
    tmp_path: Path, listener: tuple[int, list[str]], sandbox: None
) -> None:
    """Approving one command that needs the network grants it to that command as shown,
    not to every command the scope allows."""
    from plangate.adk.session import PlanSession

    port, seen = listener
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    agent = build_coding_agent(workspace, model, allow_network=True)
    harness = Harness(agent, f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    scope = {"write": ["NOTES.md"], "commands": ["python3 -c"]}
    model.add([call("update_plan_content", content="1. fetch", scope=scope)])
    model.add([call("exit_plan_mode")])
    await harness.send("fetch it")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    (request,) = await session.pending()
    fetch = f"curl -s -o /dev/null http://127.0.0.1:{port}/"
    model.add([call("Bash", command=fetch)])
    await harness.send(PlanSession.approve(request))
    (amendment,) = await session.pending()
    assert amendment.kind == "amendment" and amendment.payload["wants"]["network"] is True
    connect = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\""
    model.add([call("Bash", command=connect)], [call("Bash", command=fetch)], [text("done")])
    waiting = await session.submit(PlanSession.approve(amendment))
    assert waiting.message is not None
    results = tool_results(await harness.send(waiting.message), "Bash")
    # curl reached the canary both times (it answers no HTTP: exit 52/56, never 7,
    # "could not connect"); the other command had no network at all.
    assert results[0]["exit_code"] not in (0, 7) and results[2]["exit_code"] not in (0, 7)
    assert results[1]["exit_code"] == 1 and "Error" in results[1]["stderr"], results
    assert len(seen) == 2  # the approved curl, twice; never the other command
    record = await session.record()
    assert record is not None and record.scope is not None
    assert not record.scope.network and record.scope.network_commands == (fetch,)


async def test_after_approval_only_the_workspace_is_writable(
    tmp_path: Path,
    outside: Path,
    listener: tuple[int, list[str]],
    sandbox: str,
    request: pytest.FixtureRequest,
) -> None:
    cannot_hold(request, sandbox, "landlock", NO_PRIVATE_TMP)
    port, seen = listener
    left_behind = f"/tmp/left-behind-{uuid.uuid4().hex[:8]}"  # this test's own name
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start()  # no plan: the acting profile, as after an approval
    results = await run_commands(
        harness,
        model,
        [
            "echo inside > made.txt && cat made.txt",
            f"echo x > {outside}/pwned.txt",
            f"echo x >> {outside}/canary.txt",
            f"touch {left_behind} && ls /tmp",
            f"echo hi > /dev/tcp/127.0.0.1/{port}",
        ],
    )
    assert results[0]["exit_code"] == 0 and results[0]["stdout"] == "inside\n"
    assert (workspace / "made.txt").read_text() == "inside\n"
    assert results[1]["exit_code"] != 0 and "Read-only file system" in results[1]["stderr"]
    assert results[2]["exit_code"] != 0
    assert snapshot(outside) == {"canary.txt": hashlib.sha256(b"canary\n").hexdigest()}
    assert results[3]["exit_code"] == 0
    assert not Path(left_behind).exists()
    assert results[4]["exit_code"] != 0 and seen == []


async def test_approved_plan_acts_in_the_workspace_only(
    tmp_path: Path, outside: Path, sandbox: None
) -> None:
    from plangate.adk.session import PlanSession

    workspace = copy_sample_workspace(tmp_path / "ws")
    harness, model = await planning_harness(workspace, tmp_path)
    model.add(
        [call("update_plan_content", content="1. Write made.txt")],
        [call("exit_plan_mode", summary="ready")],
    )
    await harness.send("plan it")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    (request,) = await session.pending()
    model.add(
        [call("Bash", command="echo ok > made.txt")],
        [call("Bash", command=f"touch {outside}/pwned.txt")],
        [text("done")],
    )
    results = tool_results(await harness.send(PlanSession.approve(request)), "Bash")
    assert results[0]["exit_code"] == 0
    assert (workspace / "made.txt").read_text() == "ok\n"
    assert results[1]["exit_code"] != 0
    assert not (outside / "pwned.txt").exists()


async def test_no_secret_is_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_mode: str
) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-canary-openai",
        "GITHUB_TOKEN": "ghp-canary",
        "PLANGATE_DATABASE_URL": f"sqlite:///{tmp_path / 'canary-db.sqlite'}",
        "AWS_SECRET_ACCESS_KEY": "aws-canary",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start()
    (result,) = await run_commands(harness, model, ["printenv; echo HOME=$HOME"])
    assert result["exit_code"] == 0
    for value in secrets.values():
        assert value not in result["stdout"]
    assert str(Path.home()) + "\n" not in result["stdout"]


async def test_the_database_is_hidden_from_commands(
    tmp_path: Path, outside: Path, sandbox: None
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    database = outside / "p.db"
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{database}")
    await harness.start()
    (result,) = await run_commands(harness, model, [f"head -c 15 {database}"])
    assert database.read_bytes().startswith(b"SQLite format 3")
    assert "SQLite" not in result["stdout"], result


async def test_the_database_in_the_workspace_is_hidden_from_commands_and_file_tools(
    tmp_path: Path, sandbox: str, request: pytest.FixtureRequest
) -> None:
    """Where plangate starts in the project folder its database lives in the workspace:
    the workspace bind must not uncover it, while planning or after approval, and no
    file tool may overwrite it."""
    cannot_hold(request, sandbox, "landlock", NO_ISLANDS)
    workspace = copy_sample_workspace(tmp_path / "ws")
    (workspace / ".plangate").mkdir(exist_ok=True)
    database = workspace / ".plangate" / "plangate.db"
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{database}")
    await harness.start({"agent_mode": "plan"})
    wal = f"{database}-wal"
    planning = await run_commands(harness, model, [f"head -c 15 {database}", f"cat {wal} | wc -c"])
    assert "SQLite" not in planning[0]["stdout"], planning
    assert planning[1]["stdout"].strip() == "0", planning
    model.add([call("update_plan_content", content="1. touch up")], [call("exit_plan_mode")])
    await harness.send("plan it")
    record = await harness.record()
    assert record is not None
    (pending,) = record.pending
    model.add(
        [call("Bash", command=f"head -c 15 {database}")],
        [call("Write", path=".plangate/plangate.db", content="7 bytes")],
        [text("done")],
    )
    events = await harness.reply(pending.call_id, "exit_plan_mode", {"status": "approved"})
    (acting,) = tool_results(events, "Bash")
    assert "SQLite" not in acting["stdout"], acting
    (written,) = tool_results(events, "Write")
    assert written["code"] == "PROTECTED_PATH", written
    assert database.read_bytes().startswith(b"SQLite format 3")


def _named(root: Path, name: str) -> list[str]:
    """Paths called ``name`` under ``root``. Unlike Path.rglob, a folder that other tests
    remove during the walk (their commands' temp folders) is passed over, not an error."""
    return [
        os.path.join(folder, n)
        for folder, dirs, files in os.walk(root, onerror=lambda _: None)
        for n in dirs + files
        if n == name
    ]


async def test_a_timeout_leaves_no_process_and_no_temp_file(
    tmp_path: Path, sandbox_mode: str
) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    marker = f"plangate-timeout-{uuid.uuid4().hex[:8]}"
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start()
    command = (
        f'touch "$TMPDIR/{marker}"; (exec -a {marker} sleep 300 &); '
        f"seq 1 50000000 | sort -S 64K -n > /dev/null"
    )
    (result,) = await run_commands(harness, model, [command], timeout_s=2)
    assert result["error"].startswith("TIMEOUT")
    survivors = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert survivors.stdout == ""
    leftovers = _named(Path("/tmp"), marker) if sandbox_mode == "sandbox" else []
    assert leftovers == []
    assert not list(Path("/tmp").glob("plangate-cmd-*/" + marker))


async def test_harmless_commands_run_while_planning(tmp_path: Path, sandbox: None) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    harness, model = await planning_harness(workspace, tmp_path)
    commands = [
        "cd inventory && ls",
        "for f in *.md; do wc -l $f; done",
        "ls | xargs wc -l",
        "awk '{print $1}' README.md",
        "'ls' -la",
        "/bin/ls",
        "echo hi 2>/dev/null",
        "python3 -m pytest -q -p no:cacheprovider",
    ]
    results = await run_commands(harness, model, commands)
    for command, result in zip(commands, results, strict=True):
        assert "error" not in result, (command, result)
        assert "exit_code" in result
    assert "1 failed, 4 passed" in results[-1]["stdout"]
