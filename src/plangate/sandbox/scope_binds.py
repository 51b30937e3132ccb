"""Which paths of the workspace a command may change under an approved plan scope.

The workspace is bound read-only and each path below is bound writable over it:

- an existing file the scope names: that file alone (writes in place work; a tool that
  replaces the file by renaming a temporary one over it fails, which is the price of
  not opening the folder);
- a folder, or the folder part of a glob (``src/payments`` for ``src/payments/**``):
  that folder;
- a file that does not exist yet: its nearest existing folder, so the command can create
  it. A bind mount needs a source that exists, and pre-creating an empty file would
  change the workspace before anything ran and leave it behind if the command never
  writes it. The folder is the smallest thing that can be bound; ``Write``/``Edit`` are
  still checked against the exact path at the gate. At the workspace top that folder is
  the workspace itself, so a scope naming a new top-level file leaves the whole
  workspace writable for commands: name new files inside a folder when that matters.

Symlinks are resolved and anything that leaves the workspace is dropped.
"""

from __future__ import annotations

from pathlib import Path

from plangate.plan.scope import Scope, literal_prefix

__all__ = ["writable_paths"]


def writable_paths(scope: Scope, root: Path) -> tuple[Path, ...]:
    root = root.resolve()
    found: list[Path] = []
    for entry in scope.write:
        prefix = literal_prefix(entry)
        target = root / prefix if prefix else root
        candidate = target
        while candidate != root and not candidate.exists():
            candidate = candidate.parent
        resolved = candidate.resolve()
        if resolved != root and root not in resolved.parents:
            continue  # a symlink out of the workspace is never opened
        found.append(resolved)
    # A bind of a folder already covers what is under it.
    unique = sorted(set(found), key=lambda p: (len(p.parts), str(p)))
    kept: list[Path] = []
    for path in unique:
        if not any(path == k or k in path.parents for k in kept):
            kept.append(path)
    return tuple(kept)
