"""The plan scope: what an approved plan may write, run and reach, as data.

A scope sits beside the plan's Markdown and is approved with it. After approval the
gate lets a call through only when the scope covers it; anything else pauses for an
amendment the human approves or refuses. A plan without a scope keeps the behaviour of
plans before scopes existed: the whole workspace, every command.

Pure: no clock, no file system. Paths are workspace-relative POSIX paths, already
resolved by the host (symlinks followed) before they are matched here.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    StrictBool,
    ValidationError,
    field_validator,
    model_serializer,
)

from plangate.plan.visible import hidden_characters, visible_text

__all__ = [
    "MAX_ENTRIES",
    "Permission",
    "Scope",
    "ScopeError",
    "Wants",
    "check_shown_entries",
    "glob_matches",
    "literal_prefix",
    "needs_network",
    "parse_permission",
    "parse_scope",
    "plan_sha256",
    "scope_or_none",
]

MAX_ENTRIES = 200
_MAX_ENTRY_CHARS = 500
_GLOB_CHARS = frozenset("*?[")

Permission = Literal["auto", "ask_each_edit"]
"""How an approved plan acts within its scope: ``auto`` runs what the scope covers;
``ask_each_edit`` still pauses every file write, with its diff, for the human."""


class ScopeError(ValueError):
    """A scope or permission that does not validate; the message says which part and why."""


def _check_path_entry(entry: str) -> str:
    if not entry or not entry.strip():
        raise ValueError("a write entry is empty")
    if len(entry) > _MAX_ENTRY_CHARS:
        raise ValueError(f"write entry is longer than {_MAX_ENTRY_CHARS} characters")
    if "\x00" in entry or "\n" in entry or "\\" in entry:
        raise ValueError(f"write entry {entry!r} has a NUL, newline or backslash")
    if entry.startswith(("/", "~")):
        raise ValueError(f"write entry {entry!r} must be relative to the workspace")
    parts = [p for p in entry.strip().split("/") if p not in ("", ".")]
    if not parts:
        raise ValueError(f"write entry {entry!r} names the workspace itself; use '**'")
    if ".." in parts:
        raise ValueError(f"write entry {entry!r} leaves the workspace ('..')")
    normal = "/".join(parts)
    # "src/" means the folder and everything in it.
    return normal + "/**" if entry.strip().endswith("/") else normal


def _check_command_entry(entry: str) -> str:
    entry = entry.strip()
    if not entry:
        raise ValueError("a command entry is empty")
    if len(entry) > _MAX_ENTRY_CHARS:
        raise ValueError(f"command entry is longer than {_MAX_ENTRY_CHARS} characters")
    if "\x00" in entry or "\n" in entry:
        raise ValueError(f"command entry {entry!r} has a NUL or newline")
    return entry


def _named(entry: str, limit: int = 120) -> str:
    """An entry as an error message names it: hidden characters as markers, cut short."""
    shown = visible_text(entry, keep_layout=False)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def _check_shown(kind: str, entry: str) -> None:
    """Refuse an entry a reviewer could not read as it is: control characters, escape
    sequences, bidi overrides, zero-width or non-ASCII spaces (see plan/visible.py)."""
    hidden = hidden_characters(entry)
    if hidden:
        raise ValueError(
            f"{kind} entry `{_named(entry)}` has characters a reviewer cannot see "
            f"({', '.join(hidden)}); write it in plain text"
        )


def _check_simple_command(entry: str) -> None:
    """Refuse a command entry that is more than one simple command: an entry grants what
    its words say, so it may not hide a second command (``;``, ``&&``, ``||``, ``|``),
    a substitution (``$(``, backticks, ``$VAR``) or a redirection (``<``, ``>``).
    Quoted text is an argument: single quotes keep everything literal, double quotes
    still expand ``$`` and backticks."""
    quote: str = ""
    for index, char in enumerate(entry):
        if quote == "'":
            quote = "" if char == "'" else quote
            continue
        if char == "\\" and quote == "":
            raise ValueError(
                f"command entry `{entry}` has a backslash outside quotes; quote the argument"
            )
        if char in "$`" and not (char == "$" and entry[index + 1 : index + 2] in ("", " ")):
            raise ValueError(
                f"command entry `{entry}` has a substitution or expansion ({char!r}); "
                "name one simple command, written as it runs"
            )
        if char == '"':
            quote = "" if quote else '"'
        elif char == "'" and not quote:
            quote = "'"
        elif quote == "" and char in ";&|<>()":
            raise ValueError(
                f"command entry `{entry}` has the shell operator {char!r}; an entry grants "
                "one simple command, so name each command as its own entry"
            )


def check_shown_entries(scope: Scope) -> Scope:
    """``scope`` when every entry is plain text and every command entry one simple
    command; raises :class:`ScopeError` naming the first entry that is not. Applied to
    scopes a model proposes or a reviewer sends (``parse_scope``), not to stored ones:
    what was stored is shown, with hidden characters made visible."""
    try:
        for path in scope.write:
            _check_shown("write", path)
        for command in scope.commands + tuple(getattr(scope, "exact_commands", ())):
            _check_shown("command", command)
            _check_simple_command(command)
    except ValueError as exc:
        raise ScopeError(f"invalid scope: {exc}") from None
    return scope


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


class Scope(BaseModel):
    """Files and globs the plan writes, command prefixes it runs, and whether it needs
    the network."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    write: tuple[str, ...] = ()
    """Workspace-relative paths or globs (``*``, ``?``, ``[..]``, ``**`` for any folders);
    ``dir/`` is the folder and everything in it."""
    commands: tuple[str, ...] = ()
    """Command prefixes, matched word by word: ``python -m pytest`` covers
    ``python -m pytest -q tests``. Every command of a ``&&``/``;``/``|`` line must match."""
    exact_commands: tuple[str, ...] = ()
    """Commands granted as they were shown, argv for argv: ``rm -rf build`` covers
    ``rm -rf build`` and nothing longer. An approved amendment grants these; a prefix
    only where the reviewer wrote one into the scope they sent back."""
    network: StrictBool = False
    """The network for every command of the plan (the plan's own scope may ask for it)."""
    network_commands: tuple[str, ...] = ()
    """Commands granted the network as they were shown: an approved amendment for one
    ``curl`` opens the network for that command, not for every command in scope."""

    @model_serializer(mode="wrap")
    def _omit_empty_grants(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Grants only amendments add are written only when present, so a scope without
        # them reads (and is stored) as it always did.
        data: dict[str, Any] = handler(self)
        for name in ("exact_commands", "network_commands"):
            if not data.get(name):
                data.pop(name, None)
        return data

    @field_validator("write", mode="before")
    @classmethod
    def _write(cls, value: Any) -> tuple[str, ...]:
        return _unique(_check_path_entry(v) for v in _strings(value, "write"))

    @field_validator("commands", mode="before")
    @classmethod
    def _commands(cls, value: Any) -> tuple[str, ...]:
        return _unique(_check_command_entry(v) for v in _strings(value, "commands"))

    @field_validator("exact_commands", mode="before")
    @classmethod
    def _exact_commands(cls, value: Any) -> tuple[str, ...]:
        return _unique(_check_command_entry(v) for v in _strings(value, "exact_commands"))

    @field_validator("network_commands", mode="before")
    @classmethod
    def _network_commands(cls, value: Any) -> tuple[str, ...]:
        return _unique(_check_command_entry(v) for v in _strings(value, "network_commands"))

    def is_empty(self) -> bool:
        return not (
            self.write
            or self.commands
            or self.exact_commands
            or self.network
            or self.network_commands
        )

    def all_commands(self) -> tuple[str, ...]:
        """Every command entry, prefixes first, for a human to read."""
        return (*self.commands, *self.exact_commands)

    def as_exact(self) -> Scope:
        """This scope with its command prefixes turned into exact grants: what approving
        an amendment grants (its card showed whole commands, not prefixes). The network
        it asks for goes to those commands alone."""
        exact = _unique(self.all_commands())
        network_commands = self.network_commands
        if self.network and exact:
            network_commands = _unique((*network_commands, *exact))
        return self.model_copy(
            update={
                "commands": (),
                "exact_commands": exact,
                "network": self.network and not exact,
                "network_commands": network_commands,
            }
        )

    def grants_network(self, command: str, segments: Sequence[Sequence[str]] | None) -> bool:
        """Whether ``command`` may use the network: the whole plan may, or the command
        (each of its simple commands that needs it) was granted it as shown."""
        if self.network:
            return True
        if not self.network_commands:
            return False
        if command.strip() in self.network_commands:
            return True
        needing = [argv for argv in segments or () if needs_network(argv)]
        return bool(needing) and all(shlex.join(argv) in self.network_commands for argv in needing)

    def canonical(self) -> str:
        """The JSON form the plan hash covers (sorted, so order never changes the hash)."""
        data: dict[str, Any] = {
            "write": sorted(self.write),
            "commands": sorted(self.commands),
            "network": self.network,
        }
        if self.exact_commands:
            # Only when present, so a scope without them hashes as it did before.
            data["exact_commands"] = sorted(self.exact_commands)
        if self.network_commands:
            data["network_commands"] = sorted(self.network_commands)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def union(self, other: Scope) -> Scope:
        return Scope(
            write=(*self.write, *other.write),
            commands=(*self.commands, *other.commands),
            exact_commands=(*self.exact_commands, *other.exact_commands),
            network=self.network or other.network,
            network_commands=(*self.network_commands, *other.network_commands),
        )

    def allows_path(self, rel: str) -> bool:
        return any(glob_matches(entry, rel) for entry in self.write)

    def allows_command(self, command: str, segments: Sequence[Sequence[str]] | None) -> bool:
        """Whether ``command`` is covered: its exact text is an entry, or it split into
        simple commands (``segments``) each of which starts with a prefix entry's words
        or is an exact entry's words, no more and no fewer."""
        if command.strip() in self.commands or command.strip() in self.exact_commands:
            return True
        if not segments:
            return False
        prefixes = [words for entry in self.commands if (words := _words(entry))]
        exact = {words for entry in self.exact_commands if (words := _words(entry))}
        return all(
            tuple(argv) in exact or any(tuple(argv[: len(p)]) == p for p in prefixes)
            for argv in segments
            if argv
        )

    def missing(self, wants: Wants) -> Scope:
        """What ``wants`` needs beyond this scope (empty when the scope covers it)."""
        paths = [p for p in wants.paths if not self.allows_path(p)]
        commands: list[str] = []
        if wants.command is not None and not self.allows_command(wants.command, wants.segments):
            # Least privilege: an amendment asks for exactly the commands not covered
            # (the reviewer may widen them to a prefix when approving).
            if wants.segments:
                commands += [
                    shlex.join(argv)
                    for argv in wants.segments
                    if not self.allows_command("", [argv])
                ]
            else:
                commands.append(wants.command.strip())
        network = wants.network and not self.grants_network(wants.command or "", wants.segments)
        return Scope(write=tuple(paths), commands=tuple(commands), network=network)

    def summary(self) -> str:
        """One line for a human: what approving this scope grants."""
        parts: list[str] = []
        if self.write:
            parts.append("write " + _listed(self.write))
        if self.commands:
            parts.append("run " + _listed(self.commands))
        if self.exact_commands:
            parts.append("run exactly " + _listed(self.exact_commands))
        if self.network:
            parts.append("use the network")
        elif self.network_commands:
            parts.append("the network only for " + _listed(self.network_commands))
        else:
            parts.append("no network")
        if not self.write and not self.commands and not self.exact_commands:
            parts.insert(0, "write nothing, run no command")
        return "This plan may " + "; ".join(parts) + "."

    def asks(self) -> str:
        """One line naming what an amendment asks for ("write `a`; run `b`")."""
        parts: list[str] = []
        if self.write:
            parts.append("write " + _listed(self.write))
        if self.commands:
            parts.append("run " + _listed(self.commands))
        if self.exact_commands:
            parts.append("run exactly " + _listed(self.exact_commands))
        if self.network:
            parts.append("use the network")
        return "; ".join(parts) or "nothing more"


@dataclass(frozen=True)
class Wants:
    """What one tool call needs, as the host computed it."""

    paths: tuple[str, ...] = ()
    """Workspace-relative paths the call writes (symlinks resolved)."""
    command: str | None = None
    segments: tuple[tuple[str, ...], ...] | None = None
    """The simple commands of ``command``; None when it could not be split reliably."""
    network: bool = False


def _strings(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValueError(f"'{name}' must be a list of strings")
    items = cast("list[object]", list(value))  # pyright: ignore[reportUnknownArgumentType]
    if len(items) > MAX_ENTRIES:
        raise ValueError(f"'{name}' has more than {MAX_ENTRIES} entries")
    strings = [v for v in items if isinstance(v, str)]
    if len(strings) != len(items):
        raise ValueError(f"'{name}' must be a list of strings")
    return strings


def _words(entry: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(entry))
    except ValueError:
        return ()


def _code(value: str) -> str:
    """``value`` as inline code whose delimiters no backtick inside it can close."""
    ticks = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def _listed(values: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(_code(v) for v in values[:limit])
    more = len(values) - limit
    return shown + (f" and {more} more" if more > 0 else "")


def parse_scope(value: Any) -> Scope | None:
    """A scope from a tool or reply argument; None for no scope. Raises ScopeError,
    also for an entry a reviewer could not read as it runs (:func:`check_shown_entries`)."""
    if value is None or isinstance(value, Scope):
        return value
    scope = _read_scope(value)
    return None if scope is None else check_shown_entries(scope)


def _read_scope(value: Any) -> Scope | None:
    if value is None:
        return None
    if isinstance(value, Scope):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ScopeError("'scope' must be an object, or JSON text of one") from None
    if not isinstance(value, dict):
        raise ScopeError(
            "'scope' must be an object like "
            '{"write": ["src/app.py"], "commands": ["python -m pytest"], "network": false}'
        )
    try:
        return Scope.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "scope"
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field; use write, commands, exact_commands and network"
        raise ScopeError(f"invalid scope.{where}: {message}") from None


def scope_or_none(value: Any) -> Scope | None:
    """The scope a stored payload carries, for display: None when absent or unreadable
    (what was stored was validated when it was written; a surface shows, not judges)."""
    try:
        return _read_scope(value)
    except ScopeError:
        return None


def parse_permission(value: Any) -> Permission:
    if value in ("auto", "ask_each_edit"):
        return value
    raise ScopeError(f"'permission' must be 'auto' or 'ask_each_edit', got {value!r}")


def plan_sha256(content: str, scope: Scope | None) -> str:
    """The hash an approval is bound to: the content, and the scope when there is one
    (a plan without a scope hashes as before scopes existed)."""
    data = content if scope is None else f"{content}\n\x00scope:{scope.canonical()}"
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def literal_prefix(entry: str) -> str:
    """The folders of a write entry before its first glob character ("" for the top)."""
    parts = entry.split("/")
    literal: list[str] = []
    for part in parts:
        if _GLOB_CHARS & set(part):
            return "/".join(literal)
        literal.append(part)
    return "/".join(literal)


def glob_matches(pattern: str, rel: str) -> bool:
    return _glob_regex(pattern).fullmatch(rel) is not None


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    parts = pattern.split("/")
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment(part) + ("" if last else "/"))
    return re.compile("".join(out))


def _segment(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := part.find("]", i + 2)) != -1:
            body = part[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


_NETWORK_PROGRAMS = frozenset(
    {"curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp"}
)
_NETWORK_SUBCOMMANDS = {
    "git": {"push", "pull", "fetch", "clone", "ls-remote", "submodule"},
    "pip": {"install", "download"},
    "pip3": {"install", "download"},
    "uv": {"add", "sync", "pip", "lock", "tool"},
    "npm": {"install", "i", "ci", "publish", "update"},
    "pnpm": {"install", "add", "update"},
    "yarn": {"install", "add"},
    "cargo": {"install", "fetch", "update", "publish"},
    "go": {"get", "install", "mod"},
}


def needs_network(argv: Sequence[str]) -> bool:
    """Whether a simple command plainly uses the network (a download, a push...).

    This names the obvious cases so the user is asked; it is no proof of the opposite:
    the sandbox keeps the network closed for everything else when the scope has none.
    """
    if not argv:
        return False
    program = argv[0].rsplit("/", 1)[-1]
    if program in ("python", "python3") and tuple(argv[1:3]) == ("-m", "pip"):
        return any(a in ("install", "download") for a in argv[3:4])
    if program in _NETWORK_PROGRAMS:
        return True
    words = [a for a in argv[1:] if not a.startswith("-")]
    return bool(words) and words[0] in _NETWORK_SUBCOMMANDS.get(program, ())
