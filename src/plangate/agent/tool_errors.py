"""Error codes and argument checks shared by the workspace tools.

Tools never raise: a failure comes back as ``{"error": "<CODE>: message"}`` so the model
can correct itself within the same run.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BINARY_FILE",
    "EDIT_AMBIGUOUS",
    "EDIT_NO_MATCH",
    "FILE_TOO_LARGE",
    "HARDLINKED_FILE",
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

PATH_OUTSIDE_WORKSPACE = "PATH_OUTSIDE_WORKSPACE"
NOT_FOUND = "NOT_FOUND"
NOT_A_FILE = "NOT_A_FILE"
EDIT_NO_MATCH = "EDIT_NO_MATCH"
EDIT_AMBIGUOUS = "EDIT_AMBIGUOUS"
INVALID_ARGS = "INVALID_ARGS"
TIMEOUT = "TIMEOUT"
BINARY_FILE = "BINARY_FILE"
IO_ERROR = "IO_ERROR"
HARDLINKED_FILE = "HARDLINKED_FILE"
FILE_TOO_LARGE = "FILE_TOO_LARGE"
PATTERN_TIMEOUT = "PATTERN_TIMEOUT"


class WorkspaceError(Exception):
    """A path or argument a workspace tool refuses; ``code`` is the error code."""

    def __init__(self, message: str, code: str = PATH_OUTSIDE_WORKSPACE) -> None:
        super().__init__(message)
        self.code = code


def error_result(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": f"{code}: {message}", **extra}


def truncation_marker(dropped: int) -> str:
    return f"... [truncated {dropped} chars]"


def require_str(value: Any, name: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise WorkspaceError(f"{name} must be a string", INVALID_ARGS)
    if not allow_empty and value == "":
        raise WorkspaceError(f"{name} must not be empty", INVALID_ARGS)
    return value
