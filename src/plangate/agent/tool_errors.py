"""Error codes and argument checks shared by the workspace tools.

Tools never raise: a failure comes back as an error result (``plangate.errors``) so the
model can correct itself within the same run.
"""

from __future__ import annotations

from typing import Any

from plangate.errors import CodedError, ErrorCode, error_result

__all__ = [
    "BINARY_FILE",
    "EDIT_AMBIGUOUS",
    "EDIT_NO_MATCH",
    "FILE_TOO_LARGE",
    "HARDLINKED_FILE",
    "HINTS",
    "INVALID_ARGS",
    "IO_ERROR",
    "NOT_A_FILE",
    "NOT_FOUND",
    "PATH_OUTSIDE_WORKSPACE",
    "PATTERN_TIMEOUT",
    "TIMEOUT",
    "WorkspaceError",
    "error_result",
    "require_str",
    "truncation_marker",
]

# Kept as names of their own: the tools' modules import them.
PATH_OUTSIDE_WORKSPACE = ErrorCode.PATH_OUTSIDE_WORKSPACE
NOT_FOUND = ErrorCode.NOT_FOUND
NOT_A_FILE = ErrorCode.NOT_A_FILE
EDIT_NO_MATCH = ErrorCode.EDIT_NO_MATCH
EDIT_AMBIGUOUS = ErrorCode.EDIT_AMBIGUOUS
INVALID_ARGS = ErrorCode.INVALID_ARGS
TIMEOUT = ErrorCode.TIMEOUT
BINARY_FILE = ErrorCode.BINARY_FILE
IO_ERROR = ErrorCode.IO_ERROR
HARDLINKED_FILE = ErrorCode.HARDLINKED_FILE
FILE_TOO_LARGE = ErrorCode.FILE_TOO_LARGE
PATTERN_TIMEOUT = ErrorCode.PATTERN_TIMEOUT

HINTS: dict[ErrorCode, str] = {
    PATH_OUTSIDE_WORKSPACE: "use a path relative to the workspace root, inside it",
    NOT_FOUND: "list the folder with Glob and use a path that exists",
    NOT_A_FILE: "list a folder with Glob; Read, Edit and Write take files",
    EDIT_NO_MATCH: "Read the file and copy old_string exactly, whitespace included",
    EDIT_AMBIGUOUS: "include surrounding lines in old_string, or pass replace_all=true",
    INVALID_ARGS: "fix the argument and call the tool again",
    TIMEOUT: "narrow the command, or pass a larger timeout_s",
    BINARY_FILE: "inspect binary files with a read-only Bash command (file, xxd | head)",
    FILE_TOO_LARGE: "read a part with offset and limit, or search it with Grep",
    HARDLINKED_FILE: "write a new file instead, or ask the user to break the link",
    PATTERN_TIMEOUT: "simplify the pattern (no nested repetition)",
}
"""What to do next, by code; a message can be more precise but never contradicts it."""


class WorkspaceError(CodedError):
    """A path or argument a workspace tool refuses; ``code`` is the error code."""

    def __init__(
        self, message: str, code: ErrorCode = PATH_OUTSIDE_WORKSPACE, hint: str | None = None
    ) -> None:
        super().__init__(code, message, HINTS.get(code, "") if hint is None else hint)

    def __str__(self) -> str:
        return self.message


def truncation_marker(dropped: int) -> str:
    return f"... [truncated {dropped} chars]"


def require_str(value: Any, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WorkspaceError(f"{name} must be a string", INVALID_ARGS)
    if not allow_empty and value == "":
        raise WorkspaceError(f"{name} must not be empty", INVALID_ARGS)
    return value
