"""What makes the user's own git run a program, checked around every command.

A command that may change the workspace can plant a program the host's git runs the
next time the user types ``git status``: a new ``.git/config`` (``core.fsmonitor``,
``core.hooksPath``, aliases, filters...), a ``.git/commondir`` pointing at a copy with its
own config, a repository under ``.git/modules`` or ``.git/worktrees``, hooks, a
submodule gitlink in the index whose repository has its own config, or a ``.git``
renamed away and rebuilt. The sandbox keeps most of that read-only (``.git`` is a mount
point, its program files are bound read-only); what it cannot hold without breaking
git inside the sandbox (a ``commondir`` or ``config.worktree`` that does not exist yet,
the index's gitlinks, a ``core.hooksPath`` folder in the working tree such as
``.husky``) and everything in parser-only mode is caught here:

:func:`snapshot` records git's program-running surface before the command (``lstat``
and the bytes of a handful of small files), :func:`restore` compares it afterwards and
puts back whatever changed, returning one line per change for the tool result. Nothing
here runs the repository's configuration: the one git call (listing gitlinks, only when
the index changed) runs with every program-running setting overridden.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from plangate.sandbox.policy import GIT_HARDENING

__all__ = ["MISSING_GIT_DIRS", "GitSurface", "make_missing_git_dirs", "restore", "snapshot"]

_FILES = ("config", "config.worktree", "commondir", "gitdir")
"""Files of a git directory that name programs or another repository."""
_TREES = ("hooks", "info", "modules", "worktrees")
"""Folders of a git directory whose content can run programs or hold repositories."""
MISSING_GIT_DIRS = _TREES
"""Made empty before a sandboxed command so they can be bound read-only (an empty one is
harmless to git); a file such as ``commondir`` cannot be held that way, since git inside
the sandbox would then fail to read it, so the check after the command covers it."""

_MAX_BYTES = 1024 * 1024
"""Files larger than this are kept as a digest only (restoring one removes it)."""
_MAX_ENTRIES = 4096
"""Paths recorded per workspace; past that the surface is cut (and the cut reported)."""
_GIT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class _State:
    kind: str
    """``file``, ``dir``, ``link`` or ``other`` (a path that is absent has no state)."""
    mode: int = 0
    data: bytes | None = None
    digest: str = ""
    identity: tuple[int, int] = (0, 0)
    """(device, inode) of a ``.git`` folder: a rebuilt one has another."""

    def same(self, other: _State) -> bool:
        return (self.kind, self.mode, self.digest, self.identity) == (
            other.kind,
            other.mode,
            other.digest,
            other.identity,
        )


@dataclass
class GitSurface:
    """Git's program-running surface of one workspace at one moment."""

    workspace: Path
    states: dict[str, _State] = field(default_factory=dict[str, _State])
    """Workspace-relative path -> state; a path not in it was absent."""
    gitlinks: frozenset[str] = frozenset()
    """Submodule paths (mode 160000) in the index."""
    hooks: str | None = None
    """The workspace folder ``core.hooksPath`` names, when it lies in the workspace
    (``.husky``): its files are hooks the user's next commit runs."""
    cut: bool = False


_read_cache: dict[str, tuple[tuple[int, ...], _State]] = {}
"""A file's state by its stat data (device, inode, size, mode, mtime, ctime): a file
not touched since the last look is not read again. Any write changes its ctime."""


def _state_of(path: str, *, identity: bool = False) -> _State | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    mode = stat.S_IMODE(info.st_mode)
    ident = (info.st_dev, info.st_ino) if identity else (0, 0)
    if stat.S_ISLNK(info.st_mode):
        return _State("link", digest=os.readlink(path))
    if stat.S_ISDIR(info.st_mode):
        return _State("dir", mode, identity=ident)
    if not stat.S_ISREG(info.st_mode):
        return _State("other", mode)
    signature = (
        info.st_dev, info.st_ino, info.st_size, info.st_mode, info.st_mtime_ns, info.st_ctime_ns
    )  # fmt: skip
    key = path
    cached = _read_cache.get(key)
    if cached is not None and cached[0] == signature:
        return cached[1] if not identity else _with_identity(cached[1], ident)
    data: bytes | None = None
    digest = f"unreadable {info.st_size}"
    with contextlib.suppress(OSError):
        with open(path, "rb") as handle:
            read = handle.read(_MAX_BYTES + 1)
        digest = hashlib.sha256(read).hexdigest()
        data = read if len(read) <= _MAX_BYTES else None
    state = _State("file", mode, data, digest)
    if len(_read_cache) > 8192:
        _read_cache.clear()
    _read_cache[key] = (signature, state)
    return _with_identity(state, ident) if identity else state


def _with_identity(state: _State, identity: tuple[int, int]) -> _State:
    return _State(state.kind, state.mode, state.data, state.digest, identity)


class _Recorder:
    def __init__(self, surface: GitSurface) -> None:
        self.surface = surface
        self.root = f"{surface.workspace}/"  # strings: pathlib costs more than lstat

    def add(self, rel: str, *, identity: bool = False) -> _State | None:
        if len(self.surface.states) >= _MAX_ENTRIES:
            self.surface.cut = True
            return None
        state = _state_of(self.root + rel, identity=identity)
        if state is not None:
            self.surface.states[rel] = state
        return state

    def tree(self, rel: str, depth: int) -> None:
        """Everything under the folder ``rel``; repositories in it as git folders."""
        with contextlib.suppress(OSError):
            names = sorted(os.listdir(self.root + rel))
            if depth > 0 and ("HEAD" in names or "config" in names or "commondir" in names):
                self.git_dir(rel, depth)
                return
            for name in names:
                child = f"{rel}/{name}"
                state = self.add(child)
                if state is not None and state.kind == "dir" and depth < 6:
                    self.tree(child, depth + 1)

    def git_dir(self, rel: str, depth: int) -> None:
        """The program-running entries of the git folder ``rel`` (not its objects)."""
        for name in _FILES:
            self.add(f"{rel}/{name}")
        for name in _TREES:
            state = self.add(f"{rel}/{name}")
            if state is not None and state.kind == "dir" and depth < 6:
                self.tree(f"{rel}/{name}", depth + 1)

    def dot_git(self, rel: str) -> None:
        """A ``.git`` entry: a folder (recorded with its identity) or a gitfile."""
        state = self.add(rel, identity=True)
        if state is not None and state.kind == "dir":
            self.git_dir(rel, 0)


def snapshot(workspace: Path) -> GitSurface:
    """Git's program-running surface of ``workspace`` now: its ``.git``, and the ``.git``
    of every submodule the index names."""
    surface = GitSurface(workspace)
    recorder = _Recorder(surface)
    recorder.dot_git(".git")
    surface.gitlinks = _gitlinks(workspace)
    for path in sorted(surface.gitlinks):
        recorder.dot_git(f"{path}/.git")
    config = surface.states.get(".git/config")
    surface.hooks = _hooks_in_workspace(workspace, config.data if config else None)
    if surface.hooks is not None and recorder.add(surface.hooks) is not None:
        recorder.tree(surface.hooks, 0)
    return surface


_HOOKS_PATH = re.compile(rb"^\s*hookspath\s*=\s*(.*?)\s*$", re.I | re.M)


def _hooks_in_workspace(workspace: Path, config: bytes | None) -> str | None:
    """The workspace-relative folder of ``core.hooksPath`` in ``config``, if inside the
    workspace and outside ``.git`` (already watched). A setting under another section
    is read too: a miss would only watch a folder more."""
    if not config:
        return None
    found = _HOOKS_PATH.findall(config)
    if not found:
        return None
    value = os.fsdecode(found[-1]).strip('"')
    target = Path(os.path.normpath(workspace / value))  # relative: to the work tree
    if target == workspace or not target.is_relative_to(workspace):
        return None
    rel = target.relative_to(workspace).as_posix()
    return None if rel == ".git" or rel.startswith(".git/") else rel


def make_missing_git_dirs(workspace: Path) -> None:
    """Make the program-running folders a real ``.git`` folder lacks, empty, so the
    sandbox can bind them read-only (a command cannot then create hooks or a repository
    under ``modules``/``worktrees``). They stay: an empty one changes nothing for git,
    and removing it could race a command started meanwhile."""
    git_dir = workspace / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir():
        return
    for name in MISSING_GIT_DIRS:
        with contextlib.suppress(FileExistsError, OSError):
            (git_dir / name).mkdir(mode=0o755)


# ---------------------------------------------------------------------- gitlinks

_gitlink_cache: dict[tuple[str, int, int, int, int], frozenset[str]] = {}


def _gitlinks(workspace: Path) -> frozenset[str]:
    """The submodule paths of the workspace's index (cached by the index's stat data)."""
    git_dir = workspace / ".git"
    try:
        info = os.stat(git_dir / "index", follow_symlinks=False)
    except OSError:
        return frozenset()
    if git_dir.is_symlink() or not git_dir.is_dir() or not stat.S_ISREG(info.st_mode):
        return frozenset()
    key = (str(workspace), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _gitlink_cache.get(key)
    if cached is not None:
        return cached
    found = frozenset(_list_gitlinks(workspace))
    if len(_gitlink_cache) > 256:
        _gitlink_cache.clear()
    _gitlink_cache[key] = found
    return found


def _hardened_git(workspace: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run git on the workspace's own ``.git`` with nothing of its config that runs a
    program in force (the settings given by environment rank above the repository's)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "GIT_DIR": str(workspace / ".git"),
        "GIT_WORK_TREE": str(workspace),
        **GIT_HARDENING,
    }
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=false", *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        timeout=_GIT_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _list_gitlinks(workspace: Path) -> list[str]:
    try:
        done = _hardened_git(workspace, "ls-files", "--stage", "-z")
    except (OSError, subprocess.TimeoutExpired):
        return []
    links: list[str] = []
    for record in done.stdout.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        if meta.startswith(b"160000 "):
            links.append(os.fsdecode(path))
    return links


# ------------------------------------------------------------------------ restore


def restore(before: GitSurface) -> list[str]:
    """Put back every change to ``before``'s surface; one line per change made."""
    root = before.workspace
    after = snapshot(root)
    done: list[str] = []
    new_links = sorted(after.gitlinks - before.gitlinks)
    dot_git = _restore_dot_git(before, after, done)
    if dot_git == "moved":
        after = snapshot(root)
    watched = [f"{path}/.git" for path in sorted(before.gitlinks)]
    if before.hooks is not None:
        watched.append(before.hooks)
    if dot_git != "adopted" and (".git" in after.states or ".git" not in before.states):
        watched.append(".git")  # (a lost .git is reported above, not rebuilt empty)
    changed = sorted(
        rel
        for rel in before.states.keys() | after.states.keys()
        if any(rel == top or rel.startswith(f"{top}/") for top in watched)
        and not _same(before.states.get(rel), after.states.get(rel))
    )
    removed: list[str] = []
    for rel in changed:  # shallow first: what a removed folder held goes with it
        if any(rel.startswith(f"{gone}/") for gone in removed):
            continue
        old, new = before.states.get(rel), after.states.get(rel)
        if new is not None and (old is None or old.kind != "dir" or new.kind != "dir"):
            _remove(root / rel)
            removed.append(rel)
        if old is not None:
            _put_back(root / rel, old)
        done.append(_describe(rel, old, new))
    for path in new_links:
        nested = root / path / ".git"
        if nested.exists() or nested.is_symlink():
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                _hardened_git(root, "update-index", "--force-remove", "--", path)
            done.append(
                f"the index gained a submodule '{path}' with a repository of its own "
                "(its configuration would run for the user's git): removed from the index"
            )
    if after.cut or before.cut:
        done.append(f"more than {_MAX_ENTRIES} git paths: only the first were checked")
    return done


def _same(old: _State | None, new: _State | None) -> bool:
    if old is None or new is None:
        return old is new
    return old.same(new)


def _restore_dot_git(before: GitSurface, after: GitSurface, done: list[str]) -> str:
    """A ``.git`` renamed away and rebuilt (or made where there was none): set the new
    one aside and bring the original back when it is still in the workspace.

    Returns ``same`` (nothing to do here), ``adopted`` (a fresh ``git init`` where there
    was no repository: kept) or ``moved``."""
    root = before.workspace
    old, new = before.states.get(".git"), after.states.get(".git")
    if new is None or (
        old is not None
        and old.kind == new.kind
        and (old.kind != "dir" or old.identity == new.identity)
    ):
        return "same"  # a gitfile rewritten is put back like any other file
    if old is None and new.kind == "dir" and _fresh_repository(root / ".git"):
        return "adopted"  # `git init`: a repository with nothing that runs a program
    aside = _free_name(root, ".git-refused-by-plangate")
    try:
        os.rename(root / ".git", aside)
    except OSError:
        return "same"
    found = _find_identity(root, old.identity) if old is not None else None
    if found is not None:
        with contextlib.suppress(OSError):
            os.rename(found, root / ".git")
            done.append(
                f"'.git' was replaced: the original came back from '{found.name}', the "
                f"replacement was moved to '{aside.name}'"
            )
            return "moved"
    why = "made" if old is None else "replaced and the original is not in the workspace"
    done.append(f"'.git' was {why}: the new one was moved to '{aside.name}'")
    return "moved"


def _free_name(root: Path, stem: str) -> Path:
    for n in range(1, 1000):
        candidate = root / f"{stem}-{n}"
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
    return root / f"{stem}-{os.getpid()}"


def _find_identity(root: Path, identity: tuple[int, int]) -> Path | None:
    """The folder with ``identity`` among the workspace's entries, two levels deep."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if not entry.is_dir(follow_symlinks=False):
                continue
            info = entry.stat(follow_symlinks=False)
            if (info.st_dev, info.st_ino) == identity:
                return Path(entry.path)
            with contextlib.suppress(OSError):
                for inner in os.scandir(entry.path):
                    info = inner.stat(follow_symlinks=False)
                    if (
                        inner.is_dir(follow_symlinks=False)
                        and (
                            info.st_dev,
                            info.st_ino,
                        )
                        == identity
                    ):
                        return Path(inner.path)
    return None


_PLAIN_KEYS = {
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
}
_SECTION = re.compile(r"\[\s*([A-Za-z0-9.-]+)\s*\]")
_KEY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(=.*)?")


def _fresh_repository(git_dir: Path) -> bool:
    """``git init``'s output: a config of plain core settings, sample hooks only, no
    ``commondir``, ``config.worktree``, ``modules`` or ``worktrees``."""
    if any((git_dir / name).exists() for name in ("commondir", "config.worktree", "gitdir")):
        return False
    for name in ("modules", "worktrees"):
        if (git_dir / name).exists() and any((git_dir / name).iterdir()):
            return False
    hooks = git_dir / "hooks"
    if hooks.exists() and not all(p.name.endswith(".sample") for p in hooks.iterdir()):
        return False
    info = git_dir / "info"
    if info.exists() and not {p.name for p in info.iterdir()} <= {"exclude"}:
        return False
    try:
        text = (git_dir / "config").read_text()
    except (OSError, UnicodeDecodeError):
        return False
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if header := _SECTION.fullmatch(line):
            section = header.group(1).lower()
            continue
        key = _KEY.fullmatch(line)
        if key is None or f"{section}.{key.group(1).lower()}" not in _PLAIN_KEYS:
            return False
    return True


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _put_back(path: Path, state: _State) -> None:
    with contextlib.suppress(OSError):
        if state.kind == "dir":
            path.mkdir(mode=state.mode or 0o755, parents=True, exist_ok=True)
        elif state.kind == "file" and state.data is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.plangate-restore")
            temporary.write_bytes(state.data)
            temporary.chmod(state.mode)
            os.replace(temporary, path)
        elif state.kind == "link":
            path.symlink_to(state.digest)


def _describe(rel: str, old: _State | None, new: _State | None) -> str:
    if old is None:
        return f"'{rel}' was made: removed"
    if new is None:
        return f"'{rel}' was removed: put back"
    if old.kind == "file" and old.data is None:
        return f"'{rel}' was changed and is too large to keep: removed"
    return f"'{rel}' was changed: put back"
