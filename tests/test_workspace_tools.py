"""Workspace tools, exercised through their ADK FunctionTool interface."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import stat
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.sessions import InMemorySessionService
from google.adk.tools import FunctionTool
from google.adk.tools.tool_context import ToolContext

from plangate.agent import workspace as workspace_module
from plangate.agent.workspace import (
    SAMPLE_FIX,
    Workspace,
    WorkspaceError,
    copy_sample_workspace,
    workspace_tools,
)
from plangate.policy.authority import Authority, use_authority
from plangate.policy.effects import Effect, effect_of

TOOL_NAMES = ["Read", "Grep", "Glob", "Write", "Edit", "Bash"]


@pytest.fixture
async def tool_context() -> ToolContext:
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="plangate-tests", user_id="u")
    invocation = InvocationContext(
        session_service=sessions,
        invocation_id="inv-1",
        session=session,
        agent=LlmAgent(name="coder"),
    )
    return ToolContext(invocation, function_call_id="call-1")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "core.py").write_text(
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
    )
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (ws / "image.bin").write_bytes(b"\x89PNG\x00\x01\x02add")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("def add in git config\n")
    # Outside the workspace, reachable only through symlinks.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("def add secret\n")
    (ws / "link_out.txt").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    return ws


@pytest.fixture(autouse=True)
def acting() -> Iterator[None]:
    """These tests call the tools directly, as the gate's answer for an approved plan
    without a scope would let them run."""
    with use_authority(Authority(planning=False)):
        yield


@pytest.fixture
def tools(root: Path) -> dict[str, FunctionTool]:
    made = workspace_tools(Workspace(root), bash_timeout_s=10, max_output_chars=2000)
    return {t.name: t for t in made}


@pytest.fixture
def call(tools, tool_context):
    async def _call(name: str, **args):
        return await tools[name].run_async(args=args, tool_context=tool_context)

    return _call


def error_code(result: dict) -> str | None:
    error = result.get("error")
    return error.split(":", 1)[0] if error else None


# --------------------------------------------------------------- names, effects, API


def test_tool_names_and_declarations(tools):
    assert list(tools) == TOOL_NAMES
    for name, tool in tools.items():
        assert isinstance(tool, FunctionTool)
        declaration = tool._get_declaration()
        assert declaration is not None
        assert declaration.name == name == tool.name
        assert tool.description.strip()
    schema = tools["Edit"]._get_declaration().parameters_json_schema
    assert set(schema["properties"]) == {"path", "old_string", "new_string", "replace_all"}
    assert set(schema["required"]) == {"path", "old_string", "new_string"}


def test_effect_declarations(tools):
    expected = {
        "Read": Effect.READ,
        "Grep": Effect.READ,
        "Glob": Effect.READ,
        "Write": Effect.WRITE,
        "Edit": Effect.WRITE,
        "Bash": Effect.SHELL,
    }
    assert {name: effect_of(tool) for name, tool in tools.items()} == expected
    # Declared on the tool object itself, not only on the wrapped function.
    assert all(tool.__dict__.get("__plangate_effect__") for tool in tools.values())


def test_workspace_resolve(root: Path, tmp_path: Path):
    ws = Workspace(root)
    assert ws.root == root.resolve()
    assert ws.resolve("pkg/core.py") == root.resolve() / "pkg" / "core.py"
    assert ws.resolve(str(root / "notes.txt")) == root.resolve() / "notes.txt"
    assert ws.resolve("new/dir/file.py") == root.resolve() / "new" / "dir" / "file.py"
    assert ws.resolve("pkg/../notes.txt") == root.resolve() / "notes.txt"
    for bad in ["../x", "/etc/passwd", "link_out.txt", "linkdir/secret.txt", "~/x", "pkg/../../x"]:
        with pytest.raises(WorkspaceError) as info:
            ws.resolve(bad)
        assert info.value.code == "PATH_OUTSIDE_WORKSPACE"
    with pytest.raises(WorkspaceError):
        Workspace(tmp_path / "missing")


# ---------------------------------------------------------------------------- Read


async def test_read_happy_path(call):
    result = await call("Read", path="pkg/core.py")
    assert result["path"] == "pkg/core.py"
    assert result["total_lines"] == 6
    assert result["truncated"] is False
    assert "note" not in result
    lines = result["content"].split("\n")
    assert lines[0] == "     1\tdef add(a, b):"
    assert lines[-1] == "     6\t    return a - b"


async def test_read_offset_limit_and_truncation_note(call, root: Path):
    (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await call("Read", path="long.txt", offset=10, limit=5)
    assert result["content"].split("\n") == [f"{n:>6}\tline {n}" for n in range(11, 16)]
    assert result["total_lines"] == 100
    assert result["truncated"] is True
    assert "offset=15" in result["note"]

    past = await call("Read", path="long.txt", offset=500)
    assert past["content"] == "" and "past the end" in past["note"]


async def test_read_caps_output_chars(call, root: Path):
    (root / "wide.txt").write_text("".join(f"{'x' * 90} {i}\n" for i in range(200)))
    result = await call("Read", path="wide.txt")
    assert len(result["content"]) <= 2000
    assert result["truncated"] is True
    assert "2000 chars" in result["note"] and "offset=" in result["note"]


async def test_read_errors(call):
    assert error_code(await call("Read", path="missing.py")) == "NOT_FOUND"
    assert error_code(await call("Read", path="pkg")) == "NOT_A_FILE"
    assert error_code(await call("Read", path="image.bin")) == "BINARY_FILE"
    assert error_code(await call("Read", path="notes.txt", offset=-1)) == "INVALID_ARGS"
    assert error_code(await call("Read", path="notes.txt", limit=0)) == "INVALID_ARGS"


# ---------------------------------------------------------------------------- Grep


async def test_grep_happy_path(call):
    result = await call("Grep", pattern=r"def \w+\(")
    assert result["truncated"] is False
    assert result["matches"] == [
        {"path": "pkg/core.py", "line": 1, "text": "def add(a, b):"},
        {"path": "pkg/core.py", "line": 5, "text": "def sub(a, b):"},
    ]
    # .git is skipped, the binary file is skipped (and reported), symlinks out are ignored
    assert "binary" in result["note"]


async def test_grep_path_glob_and_errors(call):
    only_txt = await call("Grep", pattern="a", glob="*.txt")
    assert {m["path"] for m in only_txt["matches"]} == {"notes.txt"}
    in_file = await call("Grep", pattern="(?i)BETA", path="notes.txt")
    assert in_file["matches"] == [{"path": "notes.txt", "line": 2, "text": "beta"}]
    in_dir = await call("Grep", pattern="return", path="pkg", glob="**/*.py")
    assert [m["line"] for m in in_dir["matches"]] == [2, 6]
    assert error_code(await call("Grep", pattern="(unclosed")) == "INVALID_ARGS"
    assert error_code(await call("Grep", pattern="x", path="nope")) == "NOT_FOUND"


async def test_grep_truncates_with_note(call, root: Path):
    (root / "many.txt").write_text("hit\n" * 500)
    result = await call("Grep", pattern="hit", path="many.txt")
    assert result["truncated"] is True
    assert 0 < len(result["matches"]) <= 200
    assert "stopped after" in result["note"]


# ---------------------------------------------------------------------------- Glob


async def test_glob_happy_path(call):
    result = await call("Glob", pattern="**/*.py")
    assert result == {"paths": ["pkg/__init__.py", "pkg/core.py"], "truncated": False}
    top = await call("Glob", pattern="*")
    assert top["paths"] == ["image.bin", "notes.txt"]  # link_out.txt points outside
    in_pkg = await call("Glob", pattern="c*.{py,txt}", path="pkg")
    assert in_pkg["paths"] == ["pkg/core.py"]


async def test_glob_errors(call):
    assert error_code(await call("Glob", pattern="*", path="nope")) == "NOT_FOUND"
    assert error_code(await call("Glob", pattern="/etc/*")) == "INVALID_ARGS"
    assert error_code(await call("Glob", pattern="../*")) == "PATH_OUTSIDE_WORKSPACE"


# --------------------------------------------------------------------- Write, Edit


async def test_write_creates_and_overwrites(call, root: Path):
    created = await call("Write", path="new/deep/file.py", content="x = 1\n")
    assert created == {"path": "new/deep/file.py", "bytes_written": 6, "created": True}
    assert (root / "new" / "deep" / "file.py").read_text() == "x = 1\n"
    again = await call("Write", path="new/deep/file.py", content="é\n")
    assert again == {"path": "new/deep/file.py", "bytes_written": 3, "created": False}
    assert error_code(await call("Write", path="pkg", content="x")) == "NOT_A_FILE"


async def test_edit_happy_path(call, root: Path):
    result = await call("Edit", path="pkg/core.py", old_string="a - b", new_string="a - b - 0")
    assert result == {"path": "pkg/core.py", "replacements": 1}
    assert "return a - b - 0\n" in (root / "pkg" / "core.py").read_text()


async def test_edit_no_match_ambiguous_and_replace_all(call, root: Path):
    no_match = await call("Edit", path="pkg/core.py", old_string="a * b", new_string="x")
    assert no_match["error"].startswith("EDIT_NO_MATCH: old_string not found in pkg/core.py")

    ambiguous = await call("Edit", path="pkg/core.py", old_string="(a, b)", new_string="(x, y)")
    assert ambiguous["error"] == (
        "EDIT_AMBIGUOUS: old_string occurs 2 times in pkg/core.py; "
        "pass more context or replace_all=true"
    )
    assert "(a, b)" in (root / "pkg" / "core.py").read_text()  # untouched

    every = await call(
        "Edit", path="pkg/core.py", old_string="(a, b)", new_string="(x, y)", replace_all=True
    )
    assert every == {"path": "pkg/core.py", "replacements": 2}
    assert (root / "pkg" / "core.py").read_text().count("(x, y)") == 2

    same = await call("Edit", path="pkg/core.py", old_string="x", new_string="x")
    assert error_code(same) == "INVALID_ARGS"
    empty = await call("Edit", path="pkg/core.py", old_string="", new_string="x")
    assert error_code(empty) == "INVALID_ARGS"
    missing = await call("Edit", path="missing.py", old_string="a", new_string="b")
    assert error_code(missing) == "NOT_FOUND"
    binary = await call("Edit", path="image.bin", old_string="add", new_string="sub")
    assert error_code(binary) == "BINARY_FILE"


# ------------------------------------------------ containment: links, races, sizes


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A file outside the workspace that no tool may change."""
    path = tmp_path / "canary.txt"
    path.write_text("canary secret\n")
    return path


async def test_write_and_edit_refuse_a_hardlink_to_a_file_outside(call, root: Path, canary: Path):
    os.link(canary, root / "linked.txt")
    written = await call("Write", path="linked.txt", content="pwned\n")
    assert error_code(written) == "HARDLINKED_FILE"
    assert "2 links" in written["error"] and "change those copies" in written["error"]
    edited = await call("Edit", path="linked.txt", old_string="secret", new_string="pwned")
    assert error_code(edited) == "HARDLINKED_FILE"
    assert canary.read_text() == "canary secret\n"
    assert (root / "linked.txt").read_text() == "canary secret\n"
    assert os.stat(canary).st_nlink == 2  # the link was neither written through nor split
    assert not [p for p in os.listdir(root) if p.endswith(".tmp")]


async def test_write_replaces_atomically_and_keeps_the_mode(call, root: Path):
    target = root / "notes.txt"
    target.chmod(0o640)
    inode = target.stat().st_ino
    result = await call("Write", path="notes.txt", content="new\n")
    assert result == {"path": "notes.txt", "bytes_written": 4, "created": False}
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino != inode  # a new file renamed into place
    edited = await call("Edit", path="notes.txt", old_string="new", new_string="newer")
    assert edited["replacements"] == 1 and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(os.listdir(root)) == sorted(
        ["pkg", "notes.txt", "image.bin", ".git", "link_out.txt", "linkdir"]
    )
    under_a_file = await call("Write", path="notes.txt/inner.txt", content="x")
    assert error_code(under_a_file) == "NOT_A_FILE"


class SwappingWorkspace(Workspace):
    """A workspace whose paths are swapped for symlinks right after they are checked.

    Plays the other side of a race: something replaces a checked folder or file with
    a symlink to the outside between the check and the write.
    """

    def __init__(self, root: Path, swap: str, outside: Path) -> None:
        super().__init__(root)
        self.swap = swap
        self.outside = outside

    def resolve(self, path: str) -> Path:
        resolved = super().resolve(path)
        victim = self.root / self.swap
        if not victim.is_symlink():
            if victim.is_dir():
                for child in victim.iterdir():
                    child.unlink()
                victim.rmdir()
            else:
                victim.unlink()
            victim.symlink_to(self.outside)
        return resolved


async def test_a_symlink_swapped_in_after_the_check_cannot_redirect_writes(
    root: Path, tmp_path: Path, canary: Path, tool_context
):
    async def run(ws: Workspace, name: str, **args):
        tool = {t.name: t for t in workspace_tools(ws)}[name]
        return await tool.run_async(args=args, tool_context=tool_context)

    # A checked folder becomes a symlink to a folder outside.
    (root / "sub").mkdir()
    ws = SwappingWorkspace(root, "sub", tmp_path / "outside")
    result = await run(ws, "Write", path="sub/new.txt", content="pwned")
    assert error_code(result) == "PATH_OUTSIDE_WORKSPACE" and "symlink" in result["error"]
    assert not (tmp_path / "outside" / "new.txt").exists()

    # A checked file becomes a symlink to the canary.
    for name, args in [
        ("Write", {"content": "pwned"}),
        ("Edit", {"old_string": "alpha", "new_string": "pwned"}),
    ]:
        (root / "target.txt").unlink(missing_ok=True)
        (root / "target.txt").write_text("alpha\n")
        ws = SwappingWorkspace(root, "target.txt", canary)
        result = await run(ws, name, path="target.txt", **args)
        assert error_code(result) == "PATH_OUTSIDE_WORKSPACE", (name, result)
        assert canary.read_text() == "canary secret\n"


async def test_edit_refuses_files_over_the_cap(call, root: Path, monkeypatch):
    monkeypatch.setattr(workspace_module, "EDIT_MAX_FILE_BYTES", 1000)
    (root / "big.txt").write_text("x" * 2000)
    result = await call("Edit", path="big.txt", old_string="x", new_string="y", replace_all=True)
    assert error_code(result) == "FILE_TOO_LARGE"
    assert (root / "big.txt").read_text() == "x" * 2000


async def _with_peak_allocation(pending) -> tuple[dict, int]:
    """The tool result and the peak of memory allocated while it ran (all threads)."""
    tracemalloc.start()
    try:
        result = await pending
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def test_read_never_loads_a_huge_single_line(call, root: Path):
    size = 25_000_000
    with (root / "one_line.txt").open("w") as fh:
        fh.write("start " + "x" * (size - 10) + " end\n")

    result, peak = await _with_peak_allocation(call("Read", path="one_line.txt"))
    assert peak < 3_000_000, peak  # streamed in chunks, never the whole line or file
    assert result["total_lines"] == 1 and result["truncated"] is True
    line = result["content"]
    assert line.startswith("     1\tstart xxx") and "... [truncated" in line
    assert len(line) < workspace_module.MAX_LINE_CHARS + 100
    assert "loads at most 10000000" in result["note"]
    assert "longer than 2000 chars were cut" in result["note"]


async def test_read_stops_at_the_byte_cap_and_says_where_to_continue(call, root: Path, monkeypatch):
    monkeypatch.setattr(workspace_module, "READ_MAX_BYTES", 50_000)
    (root / "log.txt").write_text("".join(f"entry {i:06d}\n" for i in range(20_000)))
    head = await call("Read", path="log.txt", limit=3)
    assert head["content"].split("\n") == [f"{n:>6}\tentry {n - 1:06d}" for n in (1, 2, 3)]
    assert head["truncated"] is True
    assert 3000 < head["total_lines"] < 20_000  # counted only as far as Read loads
    assert "total_lines counts only" in head["note"] and "sed -n" in head["note"]
    far = await call("Read", path="log.txt", offset=15_000)
    assert far["content"] == "" and "past the part of the file Read loads" in far["note"]


async def test_grep_caps_long_lines_while_scanning(call, root: Path):
    long_line = "needle-at-start " + "y" * 1_500_000 + " needle-at-end"
    (root / "minified.js").write_text(long_line + "\nshort needle\n")

    found, peak = await _with_peak_allocation(call("Grep", pattern="needle-at-\\w+|short"))
    assert peak < 3_000_000, peak
    assert [m["line"] for m in found["matches"]] == [1, 2]
    first = found["matches"][0]["text"]
    assert first.startswith("needle-at-start yyy") and "... [truncated" in first
    assert "searched only in their first part" in found["note"]
    at_end = await call("Grep", pattern="needle-at-end", path="minified.js")
    assert at_end["matches"] == []  # past the part of the line Grep searches, and said so
    assert "searched only in their first part" in at_end["note"]


async def test_grep_skips_huge_files_and_caps_bytes_per_call(call, root: Path, monkeypatch):
    (root / "huge.txt").write_bytes(b"z" * (workspace_module.GREP_MAX_FILE_BYTES + 1))
    skipped = await call("Grep", pattern="z", path="huge.txt")
    assert skipped["matches"] == [] and "larger than 2000000 bytes" in skipped["note"]

    monkeypatch.setattr(workspace_module, "GREP_MAX_SCAN_BYTES", 20_000)
    (root / "many").mkdir()
    for i in range(10):
        (root / "many" / f"f{i}.txt").write_text("hit\n" * 1000)  # 4000 bytes each
    result = await call("Grep", pattern="nothing-matches-this", path="many")
    assert result["truncated"] is True
    assert "stopped after reading 20000 bytes" in result["note"]


async def test_grep_pattern_time_limit(call, root: Path):
    (root / "evil.txt").write_text("a" * 40 + "b\nplain line\n" + "a" * 60 + "b\n")
    # The classic nested quantifier: the regex engine answers it at once, no hang.
    nested = await call("Grep", pattern="^(a+)+$", path="evil.txt")
    assert nested == {"matches": [], "truncated": False}
    # Overlapping alternatives do backtrack exponentially: stopped, with advice.
    started = time.monotonic()
    result = await call("Grep", pattern="(?i)(a|aa)+$", path="evil.txt")
    assert error_code(result) == "PATTERN_TIMEOUT", result
    assert "evil.txt:1" in result["error"] and "Simplify" in result["error"]
    assert time.monotonic() - started < 30  # generous: the limit is 1 s per line
    # Python `re` syntax and inline flags keep working.
    flags = await call("Grep", pattern="(?i)PLAIN\\s+LINE$", path="evil.txt")
    assert flags["matches"] == [{"path": "evil.txt", "line": 2, "text": "plain line"}]


# ------------------------------------------------------------ confinement, every tool


ESCAPES = ["../x", "/etc/passwd", "link_out.txt", "linkdir", "linkdir/secret.txt"]


def _escape_calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("Read", {"path": path}),
        ("Grep", {"pattern": "secret", "path": path}),
        ("Glob", {"pattern": "*", "path": path}),
        ("Write", {"path": path, "content": "pwned"}),
        ("Edit", {"path": path, "old_string": "secret", "new_string": "pwned"}),
    ]


@pytest.mark.parametrize("path", ESCAPES)
async def test_every_path_tool_refuses_escapes(call, root: Path, tmp_path: Path, path: str):
    for name, args in _escape_calls(path):
        result = await call(name, **args)
        assert error_code(result) == "PATH_OUTSIDE_WORKSPACE", (name, path, result)
    assert (tmp_path / "outside" / "secret.txt").read_text() == "def add secret\n"
    assert not (tmp_path / "x").exists()


async def test_absolute_path_inside_root_is_fine(call, root: Path):
    absolute = str(root / "notes.txt")
    assert (await call("Read", path=absolute))["total_lines"] == 3
    assert (await call("Grep", pattern="beta", path=absolute))["matches"][0]["line"] == 2
    assert (await call("Glob", pattern="*.py", path=str(root / "pkg")))["paths"] == [
        "pkg/__init__.py",
        "pkg/core.py",
    ]
    assert (await call("Write", path=str(root / "abs.txt"), content="ok"))["created"] is True
    edited = await call("Edit", path=str(root / "abs.txt"), old_string="ok", new_string="fine")
    assert edited["replacements"] == 1


async def test_write_through_symlinked_dir_or_dangling_link_is_refused(
    call, root: Path, tmp_path: Path
):
    result = await call("Write", path="linkdir/new.txt", content="x")
    assert error_code(result) == "PATH_OUTSIDE_WORKSPACE"
    assert not (tmp_path / "outside" / "new.txt").exists()
    (root / "dangling").symlink_to(tmp_path / "outside" / "later.txt")
    result = await call("Write", path="dangling", content="x")
    assert error_code(result) == "PATH_OUTSIDE_WORKSPACE"
    assert not (tmp_path / "outside" / "later.txt").exists()


async def test_walks_do_not_follow_symlinks_out(call):
    grep = await call("Grep", pattern="secret")
    assert grep["matches"] == []
    glob = await call("Glob", pattern="**/*")
    assert not any("secret" in p or p.startswith("linkdir") for p in glob["paths"])
    assert "link_out.txt" not in glob["paths"]


async def test_symlink_inside_workspace_is_allowed(call, root: Path):
    (root / "alias.txt").symlink_to(root / "notes.txt")
    assert (await call("Read", path="alias.txt"))["total_lines"] == 3
    assert "alias.txt" in (await call("Glob", pattern="*.txt"))["paths"]


# ---------------------------------------------------------------------------- Bash


async def test_bash_runs_in_root_with_exit_code(call, root: Path):
    result = await call("Bash", command="pwd; echo oops >&2; exit 3")
    assert result["exit_code"] == 3
    assert Path(result["stdout"].strip()).resolve() == root.resolve()
    assert result["stderr"] == "oops\n"
    assert result["truncated"] is False
    assert "error" not in result
    ok = await call("Bash", command="ls pkg")
    assert ok["exit_code"] == 0 and "core.py" in ok["stdout"]


async def test_bash_timeout_kills_process_group(call, root: Path):
    started = time.monotonic()
    result = await call(
        "Bash",
        command="echo started; (sleep 30; touch child_survived) & sleep 30",
        # Room for the sandbox to start and print on a loaded machine: CI once took over
        # three seconds to reach the echo, and the partial output below was empty.
        timeout_s=8,
    )
    assert time.monotonic() - started < 20
    assert result["error"] == "TIMEOUT: timed out after 8s (process killed)"
    assert result["exit_code"] is None
    assert result["stdout"] == "started\n"  # partial output is kept
    await asyncio.sleep(0.2)
    assert not (root / "child_survived").exists()


async def test_bash_cancellation_kills_the_command(tools, tool_context, root: Path):
    # Cancelled once the command is surely running (not after a fixed 0.2 s, which a
    # loaded machine can stretch past the whole command); then its sleep must be gone.
    marker = f"plangate-cancel-{uuid.uuid4().hex[:8]}"
    task = asyncio.create_task(
        tools["Bash"].run_async(
            args={"command": f"touch started; (exec -a {marker} sleep 30); touch survived"},
            tool_context=tool_context,
        )
    )
    for _ in range(600):
        if (root / "started").exists():
            break
        await asyncio.sleep(0.05)
    assert (root / "started").exists()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(200):
        if subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode != 0:
            break
        await asyncio.sleep(0.05)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode != 0
    assert not (root / "survived").exists()


async def test_bash_default_timeout(root: Path, tool_context):
    bash = workspace_tools(Workspace(root), bash_timeout_s=0.3)[-1]
    result = await bash.run_async(args={"command": "sleep 5"}, tool_context=tool_context)
    assert result["error"].startswith("TIMEOUT: timed out after 0.3s")


async def test_bash_truncates_output_with_note(call):
    result = await call("Bash", command="seq 1 100000")
    assert result["exit_code"] == 0
    assert result["truncated"] is True
    stdout = result["stdout"]
    marker = re.search(r"\.\.\. \[truncated (\d+) chars\]", stdout)
    assert marker
    assert stdout.startswith("1\n2\n3\n")
    assert stdout.rstrip().endswith("100000")  # the end of the output is kept
    full = sum(len(f"{i}\n") for i in range(1, 100001))
    kept = len(stdout) - len(marker.group(0)) - 2
    assert kept + int(marker.group(1)) == full
    assert len(stdout) <= 2000 + 60


async def test_bash_huge_output_and_stderr_budget(call):
    result = await call(
        "Bash",
        command="head -c 3000000 /dev/zero | tr '\\0' a; echo; echo tail-marker; echo err >&2",
    )
    assert result["truncated"] is True
    assert result["stderr"] == "err\n"  # a short stream keeps all of its output
    assert "... [truncated" in result["stdout"]
    assert result["stdout"].rstrip().endswith("tail-marker")
    assert len(result["stdout"]) + len(result["stderr"]) <= 2000 + 60


async def test_bash_invalid_args(call):
    assert error_code(await call("Bash", command="")) == "INVALID_ARGS"
    assert error_code(await call("Bash", command="true", timeout_s=0)) == "INVALID_ARGS"


# ------------------------------------------------------------------ sample workspace


def _pytest_command() -> str:
    return f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"


async def test_sample_workspace_fails_once_then_passes_after_fix(tmp_path: Path, tool_context):
    dest = copy_sample_workspace(tmp_path / "sample")
    assert dest == tmp_path / "sample"
    tools = {t.name: t for t in workspace_tools(Workspace(dest), bash_timeout_s=120)}

    async def call(name: str, **args):
        return await tools[name].run_async(args=args, tool_context=tool_context)

    assert sorted((await call("Glob", pattern="**/*"))["paths"]) == [
        "README.md",
        "inventory/__init__.py",
        "inventory/stock.py",
        "pyproject.toml",
        "tests/test_stock.py",
    ]
    total = sum(len(p.read_text().splitlines()) for p in dest.rglob("*") if p.is_file())
    assert total < 150

    before = await call("Bash", command=_pytest_command())
    assert before["exit_code"] == 1, before
    assert re.search(r"\b1 failed, 4 passed\b", before["stdout"]), before["stdout"]

    fixed = await call("Edit", **SAMPLE_FIX)
    assert fixed == {"path": SAMPLE_FIX["path"], "replacements": 1}

    after = await call("Bash", command=_pytest_command())
    assert after["exit_code"] == 0, after
    assert re.search(r"\b5 passed\b", after["stdout"]) and "failed" not in after["stdout"]


def test_copy_sample_workspace_is_idempotent_and_refuses_foreign_dirs(tmp_path: Path):
    dest = copy_sample_workspace(tmp_path / "a" / "b")
    stock = dest / "inventory" / "stock.py"
    original = stock.read_text()
    assert SAMPLE_FIX["old_string"] in original
    assert original.count(SAMPLE_FIX["old_string"]) == 1
    assert not any(p.name == "__init__.py" for p in (dest / "tests").iterdir())

    stock.write_text(original.replace(SAMPLE_FIX["old_string"], SAMPLE_FIX["new_string"]))
    (dest / "scratch.txt").write_text("mine")
    assert copy_sample_workspace(dest) == dest  # looks like the sample: restored
    assert stock.read_text() == original
    assert (dest / "scratch.txt").read_text() == "mine"

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        copy_sample_workspace(foreign)
    assert os.listdir(foreign) == ["keep.txt"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert (copy_sample_workspace(empty) / "README.md").is_file()


# ------------------------------------------------------------- the call's authority


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        ".git/commondir",
        ".git/info/attributes",
        ".git/modules/lib/config",
        "vendor/lib/.git",
        "vendor/lib/.git/config",
        ".plangate/policy.toml",
    ],
)
async def test_write_and_edit_refuse_what_makes_git_run_a_program_or_plangates_folder(
    call, root: Path, path: str
) -> None:
    result = await call("Write", path=path, content="[core]\n\tfsmonitor = touch pwned\n")
    assert error_code(result) == "PROTECTED_PATH", result
    target = root / path
    assert not target.is_file() or "fsmonitor" not in target.read_text()


async def test_edit_refuses_an_existing_git_config_even_through_a_symlink(call, root: Path) -> None:
    (root / ".git").mkdir(exist_ok=True)
    config = root / ".git" / "config"
    config.write_text("[core]\n\tbare = false\n")
    (root / "innocent.cfg").symlink_to(config)
    for path in (".git/config", "innocent.cfg"):
        result = await call("Edit", path=path, old_string="bare = false", new_string="x")
        assert error_code(result) == "PROTECTED_PATH", result
    assert config.read_text() == "[core]\n\tbare = false\n"


async def test_the_database_is_refused_wherever_it_lives(tools, tool_context, root: Path) -> None:
    database = root / "plangate.db"
    database.write_bytes(b"SQLite format 3\x00")
    authority = Authority(planning=False, protected_files=(database.resolve(),))
    with use_authority(authority):
        result = await tools["Write"].run_async(
            args={"path": "plangate.db", "content": "7 bytes"}, tool_context=tool_context
        )
    assert error_code(result) == "PROTECTED_PATH", result
    assert database.read_bytes() == b"SQLite format 3\x00"


async def test_a_plan_being_made_lets_no_file_tool_write(tools, tool_context, root: Path) -> None:
    with use_authority(Authority(planning=True)):
        result = await tools["Write"].run_async(
            args={"path": "new.txt", "content": "x"}, tool_context=tool_context
        )
    assert error_code(result) == "PROTECTED_PATH" and "plan is being made" in result["message"]
    assert not (root / "new.txt").exists()


@pytest.mark.parametrize("name", ["Write", "Edit", "Bash"])
async def test_an_executor_called_around_the_gate_does_nothing(
    tools, tool_context, root: Path, name: str
) -> None:
    args = {
        "Write": {"path": "made.txt", "content": "x"},
        "Edit": {"path": "a.py", "old_string": "def", "new_string": "fed"},
        "Bash": {"command": "touch made.txt"},
    }[name]
    before = (root / "a.py").read_text() if (root / "a.py").exists() else None
    with use_authority(None):
        result = await tools[name].run_async(args=args, tool_context=tool_context)
    assert error_code(result) == "NO_AUTHORITY", result
    assert not (root / "made.txt").exists()
    if before is not None:
        assert (root / "a.py").read_text() == before


async def test_fifos_never_block_read_or_grep(call, root: Path):
    """A FIFO in the workspace: Read refuses it with a code, Grep skips it and says so;
    neither waits for a writer that never comes (each call is bounded here so that a
    regression fails instead of hanging the suite)."""
    os.mkfifo(root / "pkg" / "pipe")
    (root / "pkg" / "later.py").write_text("def add_later():\n    pass\n")
    read = await asyncio.wait_for(call("Read", path="pkg/pipe"), timeout=60)
    assert error_code(read) == "NOT_A_FILE" and "FIFO" in read["error"], read
    found = await asyncio.wait_for(call("Grep", pattern="def add", path="pkg"), timeout=60)
    assert [m["path"] for m in found["matches"]] == ["pkg/core.py", "pkg/later.py"]
    assert "1 FIFO(s), socket(s) or device(s)" in found["note"], found
    # A regular file swapped for a FIFO after the checks is still not opened blocking.
    assert workspace_module._open_regular(root / "pkg" / "pipe") is None  # pyright: ignore[reportPrivateUsage]
