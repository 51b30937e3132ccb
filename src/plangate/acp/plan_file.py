"""The plan under review as a Markdown file the editor can open, edit and save.

ACP permission requests carry no text, so the plan is written to
``<workspace>/.plangate/plan-<session>.md`` when its approval is asked. If the saved file
differs from what was shown when the user answers, the saved text is the reviewed
content: the approval sends it and the host approves it as a new revision, bound to the
revision and hash that were shown.

Beside it, ``plan-<session>.approval`` names the approval the file was written for, so a
request asked again -- after a cancel, or after ``session/load`` in a new process --
keeps the user's saved edits, and a file left from another approval is never taken for
them.
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["PlanFile"]

logger = logging.getLogger("plangate.acp")

FOLDER = ".plangate"


class PlanFile:
    def __init__(self, workspace: Path, session_id: str) -> None:
        self.path = workspace / FOLDER / f"plan-{session_id}.md"
        self.owner = self.path.with_suffix(".approval")

    def belongs_to(self, approval_id: str) -> bool:
        """Whether the file is there and was written for this approval."""
        try:
            return self.path.is_file() and self.owner.read_text().strip() == approval_id
        except (OSError, UnicodeDecodeError):
            return False

    def write(self, content: str, approval_id: str) -> bool:
        """Write the plan as shown for ``approval_id``; False when the folder is not
        writable."""
        folder = self.path.parent
        try:
            if not folder.exists():
                folder.mkdir(parents=True)
                # Our own files: keep them out of the project's version control.
                (folder / ".gitignore").write_text("*\n")
            self.path.write_text(content, encoding="utf-8")
            self.owner.write_text(approval_id, encoding="utf-8")
        except OSError as exc:
            logger.warning("could not write the plan file %s: %s", self.path, exc)
            return False
        return True

    def edited(self, shown: str) -> str | None:
        """The saved text when the user changed it, else None (also when it is gone or
        emptied: an empty file approves nothing new)."""
        try:
            saved = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if not saved.strip() or saved.strip() == shown.strip():
            return None
        return saved

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.owner.unlink(missing_ok=True)
