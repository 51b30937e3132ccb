"""Workspace tools for the reference coding agent: Read, Grep, Glob, Write, Edit, Bash.

Every tool works inside one confined root folder (a :class:`Workspace`). A path that
leaves the root — through ``..``, an absolute path elsewhere, or a symlink whose
target lies outside — is refused with a ``PATH_OUTSIDE_WORKSPACE`` error.

Tools never raise: a failure comes back as ``{"error": "<CODE>: message"}`` so the
model can correct itself within the same run. Codes: ``PATH_OUTSIDE_WORKSPACE``,
``NOT_FOUND``, ``NOT_A_FILE``, ``EDIT_NO_MATCH``, ``EDIT_AMBIGUOUS``,
``INVALID_ARGS``, ``TIMEOUT``, ``BINARY_FILE``, ``HARDLINKED_FILE`` (Write and Edit
never change a file that has other hard links), ``FILE_TOO_LARGE`` (Edit of a file
over 10 MB), ``PATTERN_TIMEOUT`` (a Grep pattern that backtracks for too long), plus
``IO_ERROR`` for an operating system error (permission denied, disk full, ...).
Large outputs are truncated with an explicit note, never silently.

What a call may load is bounded: Read reads at most 10 MB of a file, Grep skips files
over 2 MB and stops after 50 MB per call, and both cut long lines while reading, so
one enormous line is never held whole. Write and Edit replace the file atomically
through a descriptor of its folder, reached from the root without following
symlinks.

Each tool carries an effect declaration (:mod:`plangate.policy.effects`): Read, Grep
and Glob are ``READ``; Write and Edit are ``WRITE``; Bash (:mod:`plangate.agent.bash_tool`)
is ``SHELL``.

A small sample project ships with the package (``sample_workspace/``): an
``inventory`` library whose ``Stock.reserve`` has an off-by-one bug that lets a
reservation take one unit more than is on hand, so exactly one of its five tests
fails. :func:`copy_sample_workspace` copies it into a folder, and :data:`SAMPLE_FIX`
is the Edit that fixes the bug::

    Edit(path="inventory/stock.py",
         old_string="        if quantity > on_hand + 1:\\n",
         new_string="        if quantity > on_hand:\\n")
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Any

import regex
from google.adk.tools import BaseTool

from plangate.adk.contract import DeclaredOnceFunctionTool
from plangate.agent.bash_tool import bash_tool
from plangate.agent.tool_errors import (
    BINARY_FILE,
    EDIT_AMBIGUOUS,
    EDIT_NO_MATCH,
    FILE_TOO_LARGE,
    HARDLINKED_FILE,
    INVALID_ARGS,
    IO_ERROR,
    NOT_A_FILE,
    NOT_FOUND,
    PATH_OUTSIDE_WORKSPACE,
    PATTERN_TIMEOUT,
    WorkspaceError,
)
from plangate.agent.tool_errors import require_str as _require_str
from plangate.agent.tool_errors import truncation_marker as _truncation_marker
from plangate.policy.authority import Authority, NoAuthority, ProtectedPath, require_authority
from plangate.policy.effects import Effect, declare_effect, declare_write_path

__all__ = [
    "SAMPLE_FIX",
    "TOOL_EFFECTS",
    "Workspace",
    "WorkspaceError",
    "copy_sample_workspace",
    "workspace_tools",
]

SAMPLE_FIX: dict[str, str] = {
    "path": "inventory/stock.py",
    "old_string": "        if quantity > on_hand + 1:\n",
    "new_string": "        if quantity > on_hand:\n",
}
"""The Edit arguments that fix the bug in the shipped sample workspace."""

TOOL_EFFECTS: dict[str, Effect] = {
    "Read": Effect.READ,
    "Grep": Effect.READ,
    "Glob": Effect.READ,
    "Write": Effect.WRITE,
    "Edit": Effect.WRITE,
    "Bash": Effect.SHELL,
}
"""The effect declared on each workspace tool, by tool name."""


# Folders Grep and Glob do not descend into while walking (an explicit ``path``
# pointing into one of them is still searched).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".venv",
        "node_modules",
    }
)

MAX_LINE_CHARS = 2000  # Read: longer lines are cut while reading, with a marker
READ_MAX_BYTES = 10_000_000  # Read stops reading a file after about this much, and says so
EDIT_MAX_FILE_BYTES = 10_000_000  # Edit refuses larger files (it holds the whole file)
GREP_MAX_MATCHES = 200
GREP_LINE_CHARS = 300  # Grep: longer matching lines are cut, with a marker
GREP_SCAN_LINE_CHARS = 20_000  # Grep searches only this much of each line, and says so
GREP_MAX_FILE_BYTES = 2_000_000  # Grep skips larger files, and says so
GREP_MAX_SCAN_BYTES = 50_000_000  # Grep stops after reading about this much per call
GREP_LINE_TIMEOUT_S = 1.0  # the most one line may take to match
GREP_PATTERN_BUDGET_S = 5.0  # the most matching may take in one Grep call
GLOB_MAX_PATHS = 1000
BINARY_SNIFF_BYTES = 8192

_SAMPLE_PACKAGE = "plangate.agent"
_SAMPLE_DIR = "sample_workspace"
_SAMPLE_SKIP = frozenset({"__pycache__", ".pytest_cache"})


class Workspace:
    """A confined root folder: every path a tool touches must resolve inside it."""

    def __init__(self, root: str | Path) -> None:
        resolved = Path(root).expanduser().resolve()
        if not resolved.is_dir():
            raise WorkspaceError(f"workspace root is not a directory: {root}", NOT_FOUND)
        self.root: Path = resolved

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free form of ``path`` (relative to the root).

        Raises WorkspaceError when the path escapes the root: through ``..``, as an
        absolute path elsewhere, or through a symlink (anywhere along the path,
        dangling or not) whose target lies outside. A path that does not exist yet
        is resolved through its existing parents, so a Write cannot escape either.
        """
        if not isinstance(path, str | os.PathLike):
            raise WorkspaceError(f"path must be a string, got {type(path).__name__}", INVALID_ARGS)
        text = os.fspath(path)
        if "\x00" in text:
            raise WorkspaceError("path contains a NUL character", INVALID_ARGS)
        candidate = Path(text)
        if text.startswith("~"):
            # "~/x" means the home folder, which is outside the workspace: say so
            # rather than silently creating a folder named "~".
            with contextlib.suppress(RuntimeError):
                candidate = candidate.expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
            raise WorkspaceError(f"cannot resolve {text}: {exc}", INVALID_ARGS) from exc
        if not resolved.is_relative_to(self.root):
            raise WorkspaceError(
                f"{text} resolves outside the workspace root {self.root}", PATH_OUTSIDE_WORKSPACE
            )
        return resolved

    def relative(self, resolved: Path) -> str:
        """The POSIX form of a resolved path relative to the root ('.' for the root)."""
        rel = resolved.relative_to(self.root).as_posix()
        return rel or "."


# --------------------------------------------------------------------------- helpers


def _cut(text: str, limit: int, dropped: int = 0) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was cut.

    ``dropped``: characters already cut from the end of ``text`` while reading.
    """
    if len(text) <= limit and not dropped:
        return text
    return text[:limit] + " " + _truncation_marker(len(text) - min(limit, len(text)) + dropped)


_LINE_CHUNK_CHARS = 64 * 1024


class _CappedLines:
    """The lines of a UTF-8 text file opened in binary mode, read in bounded pieces.

    Iterating yields ``(line, dropped)``: the line without its ending, cut to
    ``line_chars`` characters, and how many characters were cut. The rest of a long
    line is read in chunks and only counted, so an enormous line is never held whole.
    Reading stops once about ``max_bytes`` have been read; ``capped`` then says
    whether the file had more. Lines end at ``\\n`` only, as in ``cat -n``.
    """

    def __init__(self, raw: IO[bytes], line_chars: int, max_bytes: int) -> None:
        self._raw = raw
        self._text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n")
        self._line_chars = line_chars
        self._max_bytes = max_bytes
        self.capped = False

    def _at_cap(self) -> bool:
        # The buffered position runs ahead of the decoded text by at most one chunk.
        if self._raw.tell() < self._max_bytes:
            return False
        self.capped = self._text.read(1) != ""
        return True

    def __iter__(self) -> Iterator[tuple[str, int]]:
        while not self._at_cap():
            piece = self._text.readline(self._line_chars + 1)
            if not piece:
                return
            if piece.endswith("\n") or len(piece) <= self._line_chars:
                yield piece.rstrip("\r\n"), 0
                continue
            dropped = len(piece) - self._line_chars
            while not self._at_cap():
                rest = self._text.readline(_LINE_CHUNK_CHARS)
                if rest.endswith("\n") or not rest:
                    dropped += len(rest.rstrip("\r\n"))
                    break
                dropped += len(rest)
            yield piece[: self._line_chars], dropped


def _require_int(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise WorkspaceError(f"{name} must be an integer", INVALID_ARGS)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise WorkspaceError(f"{name} must be an integer", INVALID_ARGS)
    if value < minimum:
        raise WorkspaceError(f"{name} must be >= {minimum}, got {value}", INVALID_ARGS)
    return value


def _require_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    raise WorkspaceError(f"{name} must be true or false", INVALID_ARGS)


def _looks_binary(head: bytes) -> bool:
    return b"\x00" in head


def _existing_file(workspace: Workspace, path: str) -> Path:
    resolved = workspace.resolve(_require_str(path, "path"))
    if not resolved.exists():
        raise WorkspaceError(f"{path} does not exist", NOT_FOUND)
    if resolved.is_dir():
        raise WorkspaceError(f"{path} is a directory, not a file (use Glob to list it)", NOT_A_FILE)
    if not resolved.is_file():
        raise _special(path)
    return resolved


def _special(path: str) -> WorkspaceError:
    return WorkspaceError(
        f"{path} is not a regular file (a FIFO, socket or device): the file tools do not "
        "open it, since reading one can wait forever",
        NOT_A_FILE,
    )


def _open_regular(path: Path) -> IO[bytes] | None:
    """``path`` opened for reading if it is a regular file, else None. Opened without
    blocking and checked on the descriptor: a FIFO swapped in after a stat() cannot
    hang the tool (opening a FIFO to read waits for a writer; O_NONBLOCK does not)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


# Write and Edit reach a file's folder one name at a time from the root, each step
# opened with O_NOFOLLOW, and then replace the file by renaming a temporary file
# written in that folder. A symlink swapped in after Workspace.resolve() checked the
# path therefore cannot redirect the write: a symlinked folder fails to open, and the
# rename replaces a symlinked file itself instead of writing through it. The rename
# also never writes into the old file's inode, so hard-linked copies elsewhere are not
# changed even if a link appears after the check; the explicit HARDLINKED_FILE refusal
# tells the model why instead of silently splitting the copies.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _swapped(rel: str, name: str) -> WorkspaceError:
    return WorkspaceError(
        f"{rel} changed while it was being written: {name!r} became a symlink after the "
        "path was checked; nothing was written",
        PATH_OUTSIDE_WORKSPACE,
    )


def _is_symlink_at(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _open_folder(workspace: Workspace, folder: Path, rel: str, *, create: bool) -> Iterator[int]:
    """A descriptor of ``folder`` (resolved, inside the root), reached without symlinks.

    Missing folders are created when ``create`` is true.
    """
    fd = os.open(workspace.root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for name in folder.relative_to(workspace.root).parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink_at(fd, name):
                    raise _swapped(rel, name) from None
                raise
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _check_target(info: os.stat_result, rel: str) -> None:
    """Refuse to replace anything but a regular file with a single link."""
    if stat.S_ISLNK(info.st_mode):
        raise _swapped(rel, rel.rsplit("/", 1)[-1])
    if stat.S_ISDIR(info.st_mode):
        raise WorkspaceError(f"{rel} is a directory", NOT_A_FILE)
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{rel} is not a regular file", NOT_A_FILE)
    if info.st_nlink > 1:
        raise WorkspaceError(
            f"{rel} has {info.st_nlink} links (hard links): the same file is reachable "
            f"under {info.st_nlink - 1} other path(s), possibly outside the workspace, and "
            "writing it would change those copies too; nothing was written. Write the "
            "new content to a new path instead",
            HARDLINKED_FILE,
        )


def _replace_file(folder: int, name: str, data: bytes, mode: int | None) -> None:
    """Atomically make ``name`` in ``folder`` hold ``data``.

    ``mode``: the permissions to keep (an existing file's), or None for a new file,
    which gets the default permissions (0o666 less the umask).
    """
    temp = f".{name[:32]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temp, flags, 0o666 if mode is None else 0o600, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise


def _walk_files(workspace: Workspace, top: Path) -> Iterator[Path]:
    """Files under ``top`` (sorted, depth-first), skipping SKIP_DIRS and escapes.

    Symlinked folders are not followed; a symlinked file is yielded only when its
    target lies inside the workspace.
    """
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            candidate = Path(dirpath, name)
            if candidate.is_symlink():
                try:
                    target = candidate.resolve()
                except (OSError, RuntimeError):
                    continue
                if not target.is_relative_to(workspace.root) or not target.is_file():
                    continue
            yield candidate


def _expand_braces(pattern: str) -> list[str]:
    """``a/{b,c}.py`` -> ``["a/b.py", "a/c.py"]`` (nested braces allowed)."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                body = pattern[start + 1 : i]
                options: list[str] = []
                level = 0
                current = ""
                for c in body:
                    if c == "," and level == 0:
                        options.append(current)
                        current = ""
                        continue
                    level += c == "{"
                    level -= c == "}"
                    current += c
                options.append(current)
                if len(options) == 1:
                    continue  # "{x}" is not an alternation: keep literal
                head, tail = pattern[:start], pattern[i + 1 :]
                return [x for opt in options for x in _expand_braces(head + opt + tail)]
    return [pattern]


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over POSIX relative paths: ``*``, ``?``, ``[...]``, ``**``, ``{a,b}``."""
    alternatives = []
    for expanded in _expand_braces(pattern):
        parts = [p for p in expanded.split("/") if p not in ("", ".")]
        regex = ""
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part == "**":
                regex += ".*" if last else "(?:[^/]+/)*"
            else:
                regex += _segment_regex(part) + ("" if last else "/")
        alternatives.append(regex)
    return re.compile("(?:" + "|".join(alternatives) + r")\Z")


def _check_glob_pattern(pattern: str, name: str) -> None:
    if pattern.startswith(("/", "~")):
        raise WorkspaceError(
            f"{name} must be relative (pass the folder to search as path)", INVALID_ARGS
        )
    if ".." in pattern.replace("\\", "/").split("/"):
        raise WorkspaceError(f"{name} must not contain '..'", PATH_OUTSIDE_WORKSPACE)


def _glob_matches(glob: re.Pattern[str], rel: str) -> bool:
    """True when the path (relative to the search folder) or its basename matches."""
    return bool(glob.match(rel) or glob.match(rel.rsplit("/", 1)[-1]))


# ----------------------------------------------------------------- tool bodies (sync)


def _read(workspace: Workspace, path: Any, offset: Any, limit: Any, max_chars: int) -> dict:
    offset = _require_int(offset, "offset", minimum=0)
    limit = _require_int(limit, "limit", minimum=1)
    resolved = _existing_file(workspace, path)
    rel = workspace.relative(resolved)
    opened = _open_regular(resolved)
    if opened is None:
        raise _special(path)
    with opened as raw:
        if _looks_binary(raw.read(BINARY_SNIFF_BYTES)):
            return WorkspaceError(
                f"{rel} looks like a binary file; Read shows text only", BINARY_FILE
            ).to_result()
        raw.seek(0)
        size = os.fstat(raw.fileno()).st_size
        lines = _CappedLines(raw, MAX_LINE_CHARS, READ_MAX_BYTES)
        shown: list[str] = []
        used = 0
        total = 0
        cut_by_size = False
        long_lines = 0
        # Lines after the window are still counted (not kept), up to the byte cap,
        # so total_lines is exact for every file Read loads whole.
        for line, dropped in lines:
            total += 1
            if total <= offset or total > offset + limit or cut_by_size:
                continue
            if dropped:
                line = _cut(line, MAX_LINE_CHARS, dropped)
                long_lines += 1
            rendered = f"{total:>6}\t{line}"
            if used + len(rendered) + 1 > max_chars and shown:
                cut_by_size = True
                continue
            shown.append(rendered)
            used += len(rendered) + 1
    first = offset + 1
    last = offset + len(shown)
    truncated = last < total or lines.capped
    result: dict[str, Any] = {
        "path": rel,
        "content": "\n".join(shown),
        "total_lines": total,
        "truncated": truncated,
    }
    notes = []
    beyond = (
        f"use Bash (e.g. sed -n '{max(first, total + 1)},{max(first, total + 1) + limit - 1}p' "
        f"{rel}) for lines after {total}"
    )
    if total == 0 and not lines.capped:
        notes.append("the file is empty")
    elif offset >= total and lines.capped:
        notes.append(f"offset {offset} is past the part of the file Read loads; {beyond}")
    elif offset >= total:
        notes.append(f"offset {offset} is past the end of the file ({total} lines)")
    elif last < total:
        reason = f"output capped at {max_chars} chars" if cut_by_size else f"limit={limit}"
        notes.append(
            f"showing lines {first}-{last} of {total} ({reason}); "
            f"call Read with offset={last} to continue"
        )
    if lines.capped:
        notes.append(
            f"the file has {size} bytes and Read loads at most {READ_MAX_BYTES}: "
            f"total_lines counts only the first {total} lines; {beyond}"
        )
    if long_lines:
        notes.append(f"{long_lines} line(s) longer than {MAX_LINE_CHARS} chars were cut")
    if notes:
        result["note"] = "; ".join(notes)
    return result


def _compile_pattern(pattern: str) -> regex.Pattern[str]:
    # The `regex` package keeps Python `re` syntax (version 0) and, unlike `re`, can
    # stop a match that backtracks for too long (``timeout=``).
    try:
        return regex.compile(pattern)
    except (regex.error, ValueError, OverflowError) as exc:
        raise WorkspaceError(
            f"invalid regular expression {pattern!r}: {exc}", INVALID_ARGS
        ) from exc


class _PatternClock:
    """The time a Grep call's pattern may spend matching: per line and in total."""

    def __init__(self) -> None:
        self.spent = 0.0

    def search(self, compiled: regex.Pattern[str], line: str, where: str) -> bool:
        allowed = min(GREP_LINE_TIMEOUT_S, GREP_PATTERN_BUDGET_S - self.spent)
        started = time.monotonic()
        try:
            if allowed <= 0:
                raise TimeoutError
            found = compiled.search(line, timeout=allowed) is not None
        except TimeoutError:
            if allowed < GREP_LINE_TIMEOUT_S:
                limit = f"more than {GREP_PATTERN_BUDGET_S:g} s in total (last at {where})"
            else:
                limit = f"more than {GREP_LINE_TIMEOUT_S:g} s on one line ({where})"
            raise WorkspaceError(
                f"matching the pattern took {limit}; it probably backtracks "
                "catastrophically. Simplify it: avoid nested or overlapping repetition "
                "such as (a+)+ or (a|aa)+, anchor it, or search for a literal part of "
                "the text; narrowing path or glob also helps",
                PATTERN_TIMEOUT,
            ) from None
        self.spent += time.monotonic() - started
        return found


def _grep(workspace: Workspace, pattern: Any, path: Any, glob: Any, max_chars: int) -> dict:
    pattern = _require_str(pattern, "pattern")
    path = _require_str(path, "path")
    if glob is not None:
        glob = _require_str(glob, "glob")
        _check_glob_pattern(glob, "glob")
    compiled = _compile_pattern(pattern)
    top = workspace.resolve(path)
    if not top.exists():
        raise WorkspaceError(f"{path} does not exist", NOT_FOUND)
    glob_re = _glob_regex(glob) if glob else None

    if top.is_file():
        files: Iterator[Path] = iter([top])
    else:
        files = (
            f
            for f in _walk_files(workspace, top)
            if glob_re is None or _glob_matches(glob_re, f.relative_to(top).as_posix())
        )

    clock = _PatternClock()
    matches: list[dict[str, Any]] = []
    used = 0
    truncated = False
    skipped_binary = 0
    skipped_large = 0
    skipped_special = 0
    long_lines = 0
    scanned = 0
    scan_capped = False
    for file in files:
        if scanned >= GREP_MAX_SCAN_BYTES:
            scan_capped = truncated = True
            break
        try:
            info = file.stat()
            # FIFOs, sockets and devices are never opened: reading one can block forever.
            if not stat.S_ISREG(info.st_mode):
                skipped_special += 1
                continue
            if info.st_size > GREP_MAX_FILE_BYTES:
                skipped_large += 1
                continue
            opened = _open_regular(file)
            if opened is None:  # swapped for a special file since stat()
                skipped_special += 1
                continue
            raw = opened
        except OSError:
            continue
        rel = file.relative_to(workspace.root).as_posix()
        with raw:
            try:
                if _looks_binary(raw.read(BINARY_SNIFF_BYTES)):
                    skipped_binary += 1
                    continue
                raw.seek(0)
                # A file that grew past the size cap since stat() is read only that far.
                budget = min(GREP_MAX_FILE_BYTES, GREP_MAX_SCAN_BYTES - scanned)
                lines = _CappedLines(raw, GREP_SCAN_LINE_CHARS, budget)
                for number, (line, dropped) in enumerate(lines, start=1):
                    long_lines += bool(dropped)
                    if not clock.search(compiled, line, f"{rel}:{number}"):
                        continue
                    shown = _cut(line, GREP_LINE_CHARS, dropped)
                    cost = len(rel) + len(shown) + 16
                    if len(matches) >= GREP_MAX_MATCHES or (used + cost > max_chars and matches):
                        truncated = True
                        break
                    matches.append({"path": rel, "line": number, "text": shown})
                    used += cost
                scanned += raw.tell()
                if lines.capped and scanned >= GREP_MAX_SCAN_BYTES:
                    scan_capped = truncated = True
            except OSError:
                continue
        if truncated:
            break

    result: dict[str, Any] = {"matches": matches, "truncated": truncated}
    notes = []
    if scan_capped:
        notes.append(
            f"stopped after reading {GREP_MAX_SCAN_BYTES} bytes of files; narrow the path or glob"
        )
    elif truncated:
        notes.append(
            f"stopped after {len(matches)} matches (limit {GREP_MAX_MATCHES} matches or "
            f"{max_chars} chars); narrow the pattern, path or glob"
        )
    if skipped_binary:
        notes.append(f"skipped {skipped_binary} binary file(s)")
    if skipped_large:
        notes.append(f"skipped {skipped_large} file(s) larger than {GREP_MAX_FILE_BYTES} bytes")
    if skipped_special:
        notes.append(f"skipped {skipped_special} FIFO(s), socket(s) or device(s)")
    if long_lines:
        notes.append(
            f"{long_lines} line(s) longer than {GREP_SCAN_LINE_CHARS} chars were searched "
            "only in their first part"
        )
    if notes:
        result["note"] = "; ".join(notes)
    return result


def _glob(workspace: Workspace, pattern: Any, path: Any) -> dict:
    pattern = _require_str(pattern, "pattern")
    path = _require_str(path, "path")
    _check_glob_pattern(pattern, "pattern")
    top = workspace.resolve(path)
    if not top.exists():
        raise WorkspaceError(f"{path} does not exist", NOT_FOUND)
    if not top.is_dir():
        raise WorkspaceError(f"{path} is not a directory", INVALID_ARGS)
    regex = _glob_regex(pattern)
    found = sorted(
        Path(f).relative_to(workspace.root).as_posix()
        for f in _walk_files(workspace, top)
        if regex.match(f.relative_to(top).as_posix())
    )
    truncated = len(found) > GLOB_MAX_PATHS
    result: dict[str, Any] = {"paths": found[:GLOB_MAX_PATHS], "truncated": truncated}
    if truncated:
        result["note"] = (
            f"showing the first {GLOB_MAX_PATHS} of {len(found)} paths; narrow the pattern or path"
        )
    return result


def _check_writable(authority: Authority, rel: str, resolved: Path) -> None:
    """What the call's authority refuses whatever else allows it (the gate has checked
    the plan's scope already): a plan being made, git's program files, .plangate, the
    database. Asked after the path is resolved, so a symlink cannot lead around it."""
    reason = authority.refuses_write(rel, resolved)
    if reason is not None:
        raise ProtectedPath(reason)


def _write(workspace: Workspace, path: Any, content: Any, authority: Authority) -> dict:
    path = _require_str(path, "path")
    content = _require_str(content, "content", allow_empty=True)
    resolved = workspace.resolve(path)
    if resolved == workspace.root or resolved.is_dir():
        raise WorkspaceError(f"{path} is a directory", NOT_A_FILE)
    rel = workspace.relative(resolved)
    _check_writable(authority, rel, resolved)
    data = content.encode("utf-8")
    with _open_folder(workspace, resolved.parent, rel, create=True) as folder:
        try:
            existing: os.stat_result | None = os.stat(
                resolved.name, dir_fd=folder, follow_symlinks=False
            )
        except FileNotFoundError:
            existing = None
        if existing is not None:
            _check_target(existing, rel)
        mode = None if existing is None else stat.S_IMODE(existing.st_mode)
        _replace_file(folder, resolved.name, data, mode)
    return {"path": rel, "bytes_written": len(data), "created": existing is None}


def _edit(
    workspace: Workspace,
    path: Any,
    old_string: Any,
    new_string: Any,
    replace_all: Any,
    authority: Authority,
) -> dict:
    old_string = _require_str(old_string, "old_string")
    new_string = _require_str(new_string, "new_string", allow_empty=True)
    replace_all = _require_bool(replace_all, "replace_all")
    if old_string == new_string:
        raise WorkspaceError("old_string and new_string are identical; nothing to do", INVALID_ARGS)
    resolved = _existing_file(workspace, path)
    rel = workspace.relative(resolved)
    _check_writable(authority, rel, resolved)
    with _open_folder(workspace, resolved.parent, rel, create=False) as folder:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(resolved.name, flags, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _swapped(rel, resolved.name) from None
            raise
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            _check_target(info, rel)
            if info.st_size > EDIT_MAX_FILE_BYTES:
                raise WorkspaceError(
                    f"{rel} has {info.st_size} bytes; Edit changes files up to "
                    f"{EDIT_MAX_FILE_BYTES} bytes (use Bash, e.g. sed, for larger ones)",
                    FILE_TOO_LARGE,
                )
            data = fh.read(EDIT_MAX_FILE_BYTES + 1)
        if len(data) > EDIT_MAX_FILE_BYTES:
            raise WorkspaceError(f"{rel} grew past {EDIT_MAX_FILE_BYTES} bytes", FILE_TOO_LARGE)
        if _looks_binary(data[:BINARY_SNIFF_BYTES]):
            raise WorkspaceError(
                f"{rel} looks like a binary file; Edit changes text only", BINARY_FILE
            )
        text = data.decode("utf-8", errors="surrogateescape")
        count = text.count(old_string)
        if count == 0:
            raise WorkspaceError(
                f"old_string not found in {rel} (it must match exactly, including whitespace "
                "and indentation; Read the file first)",
                EDIT_NO_MATCH,
            )
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"old_string occurs {count} times in {rel}; pass more context or replace_all=true",
                EDIT_AMBIGUOUS,
            )
        updated = (
            text.replace(old_string, new_string)
            if replace_all
            else text.replace(old_string, new_string, 1)
        )
        encoded = updated.encode("utf-8", errors="surrogateescape")
        _replace_file(folder, resolved.name, encoded, stat.S_IMODE(info.st_mode))
    return {"path": rel, "replacements": count if replace_all else 1}


def _run_sync(body: Any, *args: Any) -> dict:
    try:
        return body(*args)
    except (WorkspaceError, ProtectedPath) as exc:
        return exc.to_result()
    except FileNotFoundError as exc:
        message = f"{exc.filename or ''}: {exc.strerror}".strip(": ")
        return WorkspaceError(message, NOT_FOUND).to_result()
    except (NotADirectoryError, IsADirectoryError) as exc:
        message = f"{exc.filename or ''}: {exc.strerror}".strip(": ")
        return WorkspaceError(message, NOT_A_FILE).to_result()
    except OSError as exc:
        return WorkspaceError(str(exc), IO_ERROR).to_result()


# --------------------------------------------------------------------------- tools


def _tool(func: Any, name: str, writes_in: Path | None = None) -> BaseTool:
    declare_effect(func, TOOL_EFFECTS[name])
    tool = DeclaredOnceFunctionTool(func)
    tool.name = name  # the declaration sent to the model uses func.__name__ == name
    declare_effect(tool, TOOL_EFFECTS[name])
    if writes_in is not None:
        declare_write_path(tool, "path", writes_in)
    return tool


def workspace_tools(
    workspace: Workspace,
    *,
    bash_timeout_s: float = 30,
    max_output_chars: int = 20_000,
    allow_network: bool = False,
) -> list[BaseTool]:
    """The six workspace tools bound to ``workspace``: Read, Grep, Glob, Write, Edit, Bash."""
    if not isinstance(workspace, Workspace):
        raise TypeError("workspace must be a Workspace")
    if bash_timeout_s <= 0:
        raise ValueError("bash_timeout_s must be positive")
    if max_output_chars < 100:
        raise ValueError("max_output_chars must be at least 100")
    max_chars = int(max_output_chars)

    async def Read(path: str, offset: int = 0, limit: int = 2000) -> dict:
        """Read a text file of the workspace, with line numbers (like `cat -n`).

        Args:
          path: File path, relative to the workspace root.
          offset: Number of lines to skip from the start (0 reads from line 1).
          limit: Maximum number of lines to return.

        Returns:
          {"path", "content", "total_lines", "truncated", "note"?}. Each content
          line is "<line number>\\t<text>". When truncated, the note gives the
          offset to continue from. Errors come back as {"error": "<CODE>: ..."}.
        """
        return await asyncio.to_thread(_run_sync, _read, workspace, path, offset, limit, max_chars)

    async def Grep(pattern: str, path: str = ".", glob: str | None = None) -> dict:
        """Search file contents for a Python regular expression, line by line.

        Binary files, files over 2 MB and folders such as .git, __pycache__,
        .venv and node_modules are skipped. Use "(?i)" for a case-insensitive search.
        A pattern that takes too long to match (catastrophic backtracking) is
        stopped with a PATTERN_TIMEOUT error: simplify it and search again.

        Args:
          pattern: Python `re` pattern, matched against each line.
          path: File or folder to search, relative to the workspace root.
          glob: Optional filename filter such as "*.py" or "tests/**/*.py".

        Returns:
          {"matches": [{"path", "line", "text"}], "truncated", "note"?}; paths are
          relative to the workspace root and lines are 1-based.
        """
        return await asyncio.to_thread(_run_sync, _grep, workspace, pattern, path, glob, max_chars)

    async def Glob(pattern: str, path: str = ".") -> dict:
        """Find files whose path matches a glob pattern.

        Supports *, ?, [abc], ** (any number of folders) and {a,b} alternatives,
        e.g. "**/*.py" or "src/**/test_*.py". Folders such as .git and
        __pycache__ are skipped.

        Args:
          pattern: Glob pattern, relative to `path`.
          path: Folder to search in, relative to the workspace root.

        Returns:
          {"paths": [sorted file paths relative to the workspace root], "truncated", "note"?}.
        """
        return await asyncio.to_thread(_run_sync, _glob, workspace, pattern, path)

    async def Write(path: str, content: str) -> dict:
        """Create or overwrite a file with the given content (parent folders are created).

        Prefer Edit to change part of an existing file.

        Args:
          path: File path, relative to the workspace root.
          content: The complete new content of the file.

        Returns:
          {"path", "bytes_written", "created"}; created is false when an existing
          file was overwritten.
        """
        try:
            authority = require_authority("Write")
        except NoAuthority as exc:
            return exc.to_result()
        return await asyncio.to_thread(_run_sync, _write, workspace, path, content, authority)

    async def Edit(path: str, old_string: str, new_string: str, replace_all: bool = False) -> dict:
        """Replace an exact string in a file.

        old_string must match the file exactly (whitespace and indentation
        included) and occur exactly once, unless replace_all is true. Read the
        file first and copy the text without the line-number prefix.

        Args:
          path: File path, relative to the workspace root.
          old_string: The exact text to replace.
          new_string: The replacement text (must differ from old_string).
          replace_all: Replace every occurrence instead of requiring a unique one.

        Returns:
          {"path", "replacements"}, or an error EDIT_NO_MATCH / EDIT_AMBIGUOUS.
        """
        try:
            authority = require_authority("Edit")
        except NoAuthority as exc:
            return exc.to_result()
        return await asyncio.to_thread(
            _run_sync, _edit, workspace, path, old_string, new_string, replace_all, authority
        )

    return [
        _tool(Read, "Read"),
        _tool(Grep, "Grep"),
        _tool(Glob, "Glob"),
        _tool(Write, "Write", workspace.root),
        _tool(Edit, "Edit", workspace.root),
        _tool(
            bash_tool(
                workspace,
                timeout_s=bash_timeout_s,
                max_chars=max_chars,
                allow_network=allow_network,
            ),
            "Bash",
        ),
    ]


# ------------------------------------------------------------------- sample project


def _sample_root() -> Traversable:
    return resources.files(_SAMPLE_PACKAGE).joinpath(_SAMPLE_DIR)


def _sample_files(node: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SAMPLE_SKIP or child.name.endswith(".pyc"):
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            yield from _sample_files(child, rel + "/")
        else:
            yield rel, child


def _looks_like_sample(dest: Path) -> bool:
    pyproject = dest / "pyproject.toml"
    try:
        declares_name = 'name = "inventory"' in pyproject.read_text(encoding="utf-8")
    except OSError:
        return False
    return (
        declares_name
        and (dest / "inventory" / "stock.py").is_file()
        and (dest / "tests" / "test_stock.py").is_file()
    )


def copy_sample_workspace(dest: str | Path) -> Path:
    """Copy the shipped sample project (an ``inventory`` library with one bug) into ``dest``.

    ``dest`` is created when missing. A non-empty ``dest`` is refused
    (FileExistsError) unless it already holds the sample, in which case the sample's
    files are restored to their shipped state (other files are left alone), so
    calling this twice gives the same result. Returns ``dest``.
    """
    dest = Path(dest).expanduser()
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()) and not _looks_like_sample(dest):
        raise FileExistsError(
            f"{dest} is not empty and does not look like the sample workspace; "
            "pick an empty or new folder"
        )
    dest.mkdir(parents=True, exist_ok=True)
    for rel, source in _sample_files(_sample_root()):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        target.write_bytes(source.read_bytes())
    for cache in ("inventory/__pycache__", "tests/__pycache__"):
        shutil.rmtree(dest / cache, ignore_errors=True)
    return dest
