"""Editing a plan in the user's ``$VISUAL`` / ``$EDITOR``, and the diff of the edits."""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

__all__ = ["Edited", "diff_text", "edit_text", "editor_command"]


@dataclass(frozen=True)
class Edited:
    """The text after editing, or why there is none (``error`` says what to do)."""

    text: str | None = None
    error: str | None = None


def editor_command() -> str:
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"


def edit_text(content: str, *, suffix: str = ".md") -> Edited:
    """Open ``content`` in the editor and return what was saved. The editor runs in the
    foreground with the terminal (the caller is waiting for it, as the user is)."""
    editor = editor_command()
    try:
        argv = shlex.split(editor)
    except ValueError as exc:
        return Edited(error=f"cannot read the editor command {editor!r}: {exc}")
    if not argv:
        return Edited(error="$EDITOR is empty; set it to your editor, e.g. EDITOR=nano")
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False, encoding="utf-8") as f:
        f.write(content)
        path = Path(f.name)
    try:
        try:
            result = subprocess.run([*argv, str(path)], check=False)
        except OSError as exc:
            return Edited(
                error=f"could not start the editor {editor!r} ({exc.strerror or exc}); "
                "set $EDITOR to an editor that is installed, e.g. EDITOR=nano"
            )
        if result.returncode != 0:
            return Edited(
                error=f"the editor {editor!r} exited with status {result.returncode}; "
                "your edits were not used"
            )
        try:
            return Edited(text=path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return Edited(error=f"could not read the edited plan: {exc}")
    finally:
        path.unlink(missing_ok=True)


def diff_text(old: str, new: str) -> Text:
    """A unified diff of the plan as shown and as edited; lines are plain text."""
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), "shown", "edited", lineterm="")
    )[2:]
    out = Text()
    for line in lines:
        style = (
            "green"
            if line.startswith("+")
            else "red"
            if line.startswith("-")
            else "cyan"
            if line.startswith("@@")
            else ""
        )
        out.append(line + "\n", style)
    out.rstrip()
    return out if lines else Text("(no changes)", "dim")
