"""The macOS path: a Seatbelt profile (``sandbox-exec -p PROFILE bash -c ...``) generated
from the same authority as the Linux sandboxes.

Pure: the authority and the workspace in, the profile text out. Nothing here runs it;
macOS is where it would run (``sandbox-exec`` is deprecated by Apple but is what Codex
CLI and Gemini CLI use there). Seatbelt, unlike Landlock, can deny beneath an allowed
folder, so the profile keeps ``.git`` and ``.plangate`` read-only inside a writable
workspace and hides the database wherever it lives. In SBPL the last rule that matches
an operation decides, so the denials come after the grants.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from plangate.plan.scope import literal_prefix
from plangate.policy.authority import Authority

__all__ = ["seatbelt_profile"]

_WHOLE_FOLDER = ("**", "**/*")


def _quote(text: str) -> str:
    """An SBPL string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _glob_regex(glob: str) -> str:
    """A workspace-relative scope glob as a POSIX extended regular expression."""
    out: list[str] = []
    parts = glob.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "([^/]+/)*")
            continue
        segment = ""
        for char in part:
            if char == "*":
                segment += "[^/]*"
            elif char == "?":
                segment += "[^/]"
            elif char in "[]!":
                segment += "^" if char == "!" and segment.endswith("[") else char
            else:
                segment += re.escape(char)
        out.append(segment + ("" if last else "/"))
    return "".join(out)


def _filters(workspace: Path, entries: Iterable[str]) -> list[str]:
    found: list[str] = []
    for entry in entries:
        prefix = literal_prefix(entry)
        if prefix == entry:
            found.append(f"(subpath {_quote(str(workspace / entry))})")
        elif entry[len(prefix) :].lstrip("/") in _WHOLE_FOLDER:
            found.append(
                f"(subpath {_quote(str(workspace / prefix) if prefix else str(workspace))})"
            )
        else:
            pattern = "^" + re.escape(str(workspace)) + "/" + _glob_regex(entry) + "$"
            found.append(f"(regex {_quote(pattern)})")
    return found


def seatbelt_profile(
    authority: Authority,
    workspace: Path,
    *,
    network: bool = False,
    hidden: Iterable[Path] = (),
) -> str:
    """The Seatbelt profile for one command under ``authority`` in ``workspace``.

    ``network`` is whether this command may use the network, as the ``Bash`` tool
    decides it (the agent's setting and the scope's grant; never while planning);
    ``hidden`` adds paths no command may read (the user's credentials), beside the
    authority's protected files.
    """
    ws = str(workspace)
    lines = [
        "(version 1)",
        "(deny default)",
        ";; Processes: run programs, fork, signal only what this sandbox started.",
        "(allow process-exec process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        '(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))',
        ";; Reads: everything but what is hidden below.",
        "(allow file-read*)",
        ";; Writes: the command's own temp folder and the null device.",
        '(allow file-write* (subpath (param "TMPDIR")) (literal "/dev/null"))',
    ]
    if not authority.planning:
        scope = authority.scope
        if scope is None:
            lines.append(";; Acting: the workspace.")
            lines.append(f"(allow file-write* (subpath {_quote(ws)}))")
        elif scope.write:
            lines.append(";; Acting under a plan scope: the paths it names, nothing beside.")
            lines.append(f"(allow file-write* {' '.join(_filters(workspace, scope.write))})")
        if network:
            lines.append("(allow network-outbound)")
            lines.append("(allow system-socket)")
    lines += [
        ";; Never written, whatever the plan: git's program files anywhere in the",
        ";; workspace (any .git), plangate's own folder.",
        f"(deny file-write* (regex {_quote('^' + re.escape(ws) + '/(.*/)?[.]git(/|$)')})",
        f"  (subpath {_quote(ws + '/.plangate')}))",
    ]
    secrets = [*authority.protected_files, *hidden]
    if secrets:
        filters: list[str] = []
        for path in secrets:
            filters.append(f"(subpath {_quote(str(path))})")
            if path.suffix == ".db":
                filters += [f"(literal {_quote(f'{path}-{tail}')})" for tail in ("wal", "shm")]
        lines.append(";; Hidden: plangate's database (with its WAL and SHM), credentials.")
        lines.append(f"(deny file-read* file-write* {' '.join(filters)})")
    return "\n".join(lines) + "\n"
