"""Which paths of the workspace a command may change under an approved plan scope.

The workspace is bound read-only and each path below is bound writable over it, so a
command can change exactly what the scope names and nothing beside it:

- an existing file the scope names: that file alone (writes in place work; a tool that
  replaces the file by renaming a temporary one over it fails, which is the price of
  not opening the folder);
- a folder, or a glob over a whole folder (``src/payments/**``): that folder;
- any other glob (``*.md``, ``docs/*.txt``): each existing file it matches, bound one by
  one -- a new file matching it cannot be created by a command (name it in the scope);
- a file or folder that does not exist yet: made empty just before the command (with
  the folders leading to it) and bound, so the command can write it and nothing next to
  it. What was made and is still untouched when the command ends is removed again
  (:meth:`WritableSet.tidy`), so a command that never wrote it leaves no trace.

Symlinks are resolved and anything that leaves the workspace is dropped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from plangate.plan.scope import Scope, glob_matches, literal_prefix

__all__ = ["MAX_GLOB_BINDS", "WritableSet", "prepare_writable", "writable_paths"]

MAX_GLOB_BINDS = 256
"""Files one glob entry binds one by one; past that the glob's folder is bound whole."""

_WHOLE_FOLDER = ("**", "**/*")


@dataclass
class WritableSet:
    """The paths to bind writable, and what was made so they could be bound."""

    paths: tuple[Path, ...]
    made: list[tuple[Path, tuple[int, int, int] | None]] = field(
        default_factory=list[tuple[Path, tuple[int, int, int] | None]]
    )
    """Files (with the signature they had when made) and folders (None) made for binds,
    in the order they were made."""

    def tidy(self) -> None:
        """Remove what was made and left as it was: an empty file nobody wrote or
        touched, a folder left empty. Deepest first."""
        for path, signature in reversed(self.made):
            with contextlib.suppress(OSError):
                if signature is None:
                    path.rmdir()  # only when empty
                elif _signature(path) == signature:
                    path.unlink()


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _inside(path: Path, root: Path) -> bool:
    resolved = path.resolve()
    return resolved == root or root in resolved.parents


def _make_folders(folder: Path, root: Path, made: WritableSet) -> bool:
    """Make ``folder`` and the missing folders leading to it; False when it would lie
    outside the workspace (through a symlink) or cannot be made."""
    missing: list[Path] = []
    candidate = folder
    while not candidate.exists():
        if candidate == root or candidate.is_symlink():
            return False
        missing.append(candidate)
        candidate = candidate.parent
    if not _inside(candidate, root) or not candidate.is_dir():
        return False
    for path in reversed(missing):
        try:
            path.mkdir()
        except OSError:
            return False
        made.made.append((path, None))
    return True


def _make_file(path: Path, root: Path, made: WritableSet) -> bool:
    if not _make_folders(path.parent, root, made):
        return False
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
    except OSError:
        return False
    made.made.append((path, _signature(path)))
    return True


def _files_under(top: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in (".git", ".plangate")]
        for name in files:
            yield Path(folder) / name


def _glob_binds(entry: str, prefix: str, root: Path) -> list[Path]:
    """The existing files a glob entry matches, or its folder when they are too many."""
    top = root / prefix if prefix else root
    if not top.is_dir() or not _inside(top, root):
        return []
    found: list[Path] = []
    for path in _files_under(top):
        if glob_matches(entry, path.relative_to(root).as_posix()):
            found.append(path)
            if len(found) > MAX_GLOB_BINDS:
                return [top]
    return found


def prepare_writable(scope: Scope, root: Path) -> WritableSet:
    """What a command may change under ``scope`` in the workspace ``root``, making what
    does not exist yet so that it can be bound (call :meth:`WritableSet.tidy` after)."""
    root = root.resolve()
    made = WritableSet(())
    found: list[Path] = []
    for entry in scope.write:
        prefix = literal_prefix(entry)
        if prefix != entry:  # a glob
            rest = entry[len(prefix) :].lstrip("/")
            if rest in _WHOLE_FOLDER:
                folder = root / prefix if prefix else root
                if folder == root or _make_folders(folder, root, made):
                    found.append(folder)
            else:
                found += _glob_binds(entry, prefix, root)
            continue
        target = root / entry
        if target.exists() or target.is_symlink() or _make_file(target, root, made):
            found.append(target)
    kept_inside = [p.resolve() for p in found if _inside(p, root)]
    # A bind of a folder already covers what is under it.
    unique = sorted(set(kept_inside), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    made.paths = tuple(kept)
    return made


def writable_paths(scope: Scope, root: Path) -> tuple[Path, ...]:
    """The paths :func:`prepare_writable` binds (making what it needs to)."""
    return prepare_writable(scope, root).paths
