"""Classify a shell command: proven read-only, unproven, or an explicit write.

While a plan is being drafted the gate asks this module about every command the shell
tool would run. :func:`classify_command` answers with one of three kinds
(:class:`ShellKind`):

* ``READ_ONLY``: the proof below shows the command cannot write, run other programs or
  reach the network. It runs even where no OS sandbox exists.
* ``WRITES``: the command text plainly writes or has a side effect: an output
  redirection to a file (not ``/dev/null``, ``/dev/stdout``, ``/dev/stderr``), ``<>``,
  a ``/dev/tcp`` or ``/dev/udp`` redirection, a program that changes files, processes
  or the system (``rm``, ``mv``, ``tee``, ``kill``, ``sudo``, ...) or reaches the
  network (``curl``, ``ssh``, ``git ls-remote URL``, ...), a writing option (``sed -i``,
  ``find -delete``, a ``find -exec`` of a writing program, ``sort -o``, ...), a
  changing git subcommand, a package installation.
  It is refused while planning, even with a sandbox: the change belongs in the plan
  and runs after approval. Here-documents and here-strings alone are not writes.
* ``UNPROVEN``: everything else: not provable, but no explicit write was seen (loops,
  ``xargs``, interpreters, ``make``, unknown programs, substitutions, anything bashlex
  cannot parse). Only the read-only sandbox may run it; without one it is refused.

A ``WRITES`` finding anywhere (a pipeline element, list member, subshell, loop body,
visible substitution body, ``sh -c`` / ``eval`` string, or the program a wrapper such as
``xargs``, ``env`` or ``timeout`` runs) makes the whole command ``WRITES``. The write
scan is a best-effort description for the model, not a guarantee; the sandbox is the
guarantee. An unparsable command is ``UNPROVEN`` unless a lenient parse of it (or of
its first line, as with a quoted here-document) shows an explicit write.

The read-only proof
-------------------
The proof works on the syntax tree from ``bashlex`` (a pure-Python bash parser), never
on regexes or prefixes, and it is an allowlist: every node kind, operator, redirection
and program not explicitly understood below is refused, and so is anything bashlex
cannot parse (fail closed).

* Structure: simple commands, pipelines (``|``, ``|&``, ``!``), lists joined by
  ``;``, ``&&``, ``||`` or newlines, subshells ``( ... )`` and groups ``{ ...; }``
  are allowed when every command inside is. Background ``&``, ``if``/``for``/
  ``while``/``until``/``case``, arithmetic ``(( ))``/``$(( ))``/``$[ ]``, ``[[ ]]``,
  ``coproc``, ``time`` and function definitions are refused.
* Programs: a name on :data:`READ_ONLY_PROGRAMS`, optionally quoted or escaped
  (``'ls'``, ``"ls"``, ``\\ls``) as long as it contains no expansion, or an absolute
  path in a standard system directory (``/bin``, ``/usr/bin``, ``/usr/local/bin``,
  ``/sbin``, ``/usr/sbin``) whose last component is such a name. Other paths
  (``./ls``, ``/tmp/ls``, ``/usr//bin/ls``) are refused. Wrappers that run other
  programs (``xargs``, ``env cmd``, ``timeout``, ``nice``, ``nohup``, ``command``,
  ``builtin``, ``sudo``, ...), shells, interpreters (``awk`` included) and ``tee`` are
  refused outright, not unwrapped.
* Names and arithmetic: bash evaluates array subscripts and arithmetic (and so runs
  any ``$(...)`` inside them) wherever it takes a variable name or a number. So every
  builtin that does is refused: ``declare``, ``typeset``, ``local``, ``readonly``,
  ``export``, ``read``, ``mapfile``/``readarray``, ``let``, ``unset``, ``getopts``,
  ``shift``, ``eval``, ``source``/``.``, ``trap``, ``enable``, ``hash``, ``ulimit``,
  ``set``, ``shopt``; ``printf`` may not take an option (``-v`` assigns to a name);
  ``test``/``[`` are checked (below).
* Expansions: command substitution, backticks, process substitution and arithmetic
  expansion are refused wherever they appear, without looking inside. Parameter
  expansion is allowed in arguments only in its simple forms (``$NAME``, ``${NAME}``,
  ``$1``, ``$?``, ...) and only for programs without an argument checker; never in
  program position, in the first argument of ``printf``, or in an input redirection.
  ANSI-C and locale quoting (``$'...'``, ``$"..."``) are refused (bashlex misreads
  them); a ``$`` inside quotes before the closing quote (``'def$'``, ``"def$"``) is
  literal text. Variable assignments are refused.
* Redirections: input ``< file`` from a literal file name other than bash's network
  paths ``/dev/tcp/*/*`` and ``/dev/udp/*/*``, and descriptor duplication/closing
  (``2>&1``, ``>&2``, ``<&3``, ``2>&-``) are allowed. Output redirections (``>``,
  ``>>``, ``>|``, ``&>``, ``&>>``, ``>&``, with any descriptor) are allowed only to the
  literal ``/dev/null``. ``<>``, here-documents (``<<``, ``<<-``) and here-strings
  (``<<<``) are always refused. ``echo`` and ``printf`` may carry only redirections to
  ``/dev/null`` and duplications.
* Programs with options that write files or run programs, and the builtins that
  evaluate their operands, have argument checkers; their arguments must be literal
  words (no expansions, no unquoted braces, no unquoted glob that could expand to an
  option-like name such as ``*`` or ``-*``; write ``./*`` instead), and the
  bash-correct unquoting must agree with bashlex's:

  - ``find``: no ``-delete``, ``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls``;
    ``-exec``, ``-execdir``, ``-ok`` and ``-okdir`` only when the program they run is
    proven read-only like a command of its own, ``{}`` standing for a file name (a
    whole word only; no ``--`` among find's own arguments, so no name begins with
    ``-``).
  - ``sed``: no ``-i``/``--in-place``, no ``-f``/``--file`` (a script file cannot be
    inspected); the script must parse as a small whitelisted subset of sed (addresses,
    ``p P d D q Q = l n N g G h H x z F { }``, ``s`` with flags ``g p i I m M`` and a
    number, ``y``). Everything else, ``w``/``W``/``e``/``r`` commands, the ``s`` flags
    ``w`` and ``e``, labels, branches, text commands and comments included, is refused.
  - ``sort``: no ``-o``/``--output``, no ``--compress-program``, no
    ``-T``/``--temporary-directory`` (writes temporary files there) and no
    ``-S``/``--buffer-size``.
  - ``rg``: no ``--pre`` and no ``--hostname-bin`` (both run programs).
  - ``tree``: no ``-o`` (writes a file) and no ``-R`` (writes ``00Tree.html`` files).
  - ``uniq``: at most one file operand (a second one is an output file); the values
    of ``-f``, ``-s``, ``-w`` and their long forms are not operands.
  - ``date``: no ``-s``/``--set`` and no operand other than ``+FORMAT``.
  - ``file``: no ``-C``/``--compile``.
  - ``env``: only bare ``env``.
  - ``cd``: at most one operand, options only ``-L``, ``-P``, ``--``.
  - ``test`` and ``[``: no ``-v`` or ``-R`` (they evaluate a variable name), no
    operand containing ``[`` or ``$``, and the operands of ``-eq``, ``-ne``, ``-lt``,
    ``-le``, ``-gt``, ``-ge`` must be literal integers. A double-quoted variable
    (``"$HOME"``) is allowed only where the number of words fixes how test reads it:
    ``[ "$V" ]``, ``[ -n "$V" ]`` (``-z``, file tests), ``[ "$V" = word ]``.
  - ``git``: global options only ``--no-pager``, ``-P``, ``--no-optional-locks``,
    ``--literal-pathspecs``, ``--no-replace-objects`` and ``-C DIR`` (``-c`` and
    everything else refused); subcommands only ``status``, ``log``, ``diff``,
    ``show``, ``branch`` (listing flags only), ``rev-parse``, ``ls-files``,
    ``blame``, ``grep``, ``rev-list``, ``cat-file`` (no ``--textconv``/``--filters``,
    which run the repository's programs), ``ls-tree``, ``describe`` (no ``--dirty``/
    ``--broken``, which rewrite the index), ``tag`` (listing options only), ``remote``
    (``-v``, ``get-url``), ``stash list``/``show``, ``reflog`` (not ``expire``/
    ``delete``); no ``--output``, ``--ext-diff``, no short option starting
    with ``-o``/``-O`` (``ls-files -o``, "others", excepted), and for ``grep`` no
    ``-O``/``--open-files-in-pager``.

  GNU ``getopt_long`` and git accept any unambiguous prefix of a long option, so a
  prefix of a refused option is refused too: ``sort --out=f`` like ``--output=f``.
* Coverage: text outside the trees bashlex returns must be blank or comments, so
  nothing the parser skipped can run unchecked. NUL characters are refused.

The proof covers the command text only. It trusts the environment the command runs
in: ``PATH``, exported shell functions, the programs in the system directories above,
and configuration the listed programs read on their own (for example a repository's git
config, which can name an external diff or an fsmonitor program).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn, cast

import bashlex
from bashlex import ast as bash_ast

__all__ = [
    "READ_ONLY_PROGRAMS",
    "ShellKind",
    "ShellVerdict",
    "check_read_only_command",
    "classify_command",
]


class ShellKind(StrEnum):
    """What the gate may do with a shell command while a plan is being made."""

    READ_ONLY = "read_only"
    """Proven read-only by the parser: runs, with or without a sandbox."""
    UNPROVEN = "unproven"
    """Not provable, but no explicit write seen: runs only inside the read-only sandbox."""
    WRITES = "writes"
    """An explicit write or side effect: refused while planning, even with a sandbox."""


_WRITES_HINT = "describe the change in the plan; it runs after the plan is approved"
_UNPROVEN_HINT = (
    "it can run only inside the read-only sandbox (no writes, no network); without "
    "a sandbox, use a plainly read-only command or run it after the plan is approved"
)


@dataclass(frozen=True)
class ShellVerdict:
    """The kind of a shell command, why, and what to do instead.

    Without an explicit ``kind`` the verdict follows ``allowed`` (``READ_ONLY`` when
    allowed, else ``UNPROVEN``), so ``ShellVerdict(True, "read-only")`` still reads as
    before; an allowed verdict of any other kind is a contradiction and raises.
    """

    allowed: bool
    """True exactly for ``READ_ONLY``: the command may run even without a sandbox."""
    reason: str
    """``"read-only"`` when allowed; otherwise names the part that was refused."""
    kind: ShellKind = ShellKind.READ_ONLY
    """Read-only, unproven or writes; see :class:`ShellKind`."""
    hint: str = ""
    """What to do instead, in plain words (empty when allowed)."""

    def __post_init__(self) -> None:
        if not self.allowed and self.kind is ShellKind.READ_ONLY:
            object.__setattr__(self, "kind", ShellKind.UNPROVEN)
        elif self.allowed and self.kind is not ShellKind.READ_ONLY:
            raise ValueError(f"an allowed verdict must be read_only, not {self.kind.value}")


_READ_ONLY = ShellVerdict(True, "read-only", ShellKind.READ_ONLY)


def _unproven(reason: str, hint: str = _UNPROVEN_HINT) -> ShellVerdict:
    return ShellVerdict(False, reason, ShellKind.UNPROVEN, hint)


def _writes_verdict(reason: str) -> ShellVerdict:
    return ShellVerdict(False, reason, ShellKind.WRITES, _WRITES_HINT)


class _Denied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Writes(_Denied):
    """A denial that is also an explicit write (the classifier reports it as WRITES)."""


def _deny(reason: str) -> NoReturn:
    raise _Denied(reason)


def _writes(reason: str) -> NoReturn:
    raise _Writes(reason)


# --------------------------------------------------------------------------- helpers


def _long_name(arg: str) -> str | None:
    """The name of a long option (``--name`` or ``--name=value``), else None."""
    if arg.startswith("--") and len(arg) > 2:
        return arg[2:].split("=", 1)[0]
    return None


def _abbreviates(name: str, full: str) -> bool:
    """Whether ``--name`` may select ``--full`` (getopt_long accepts unique prefixes)."""
    return bool(name) and full.startswith(name)


def _short_flags(arg: str, takes_value: str = "") -> str:
    """The option letters of a short-option cluster such as ``-nr`` or ``-k2``.

    Scanning stops after the first letter in ``takes_value``: the rest of the word is
    that option's value. Returns ``""`` for words that are not short options.
    """
    if not arg.startswith("-") or arg.startswith("--") or arg == "-":
        return ""
    flags: list[str] = []
    for letter in arg[1:]:
        flags.append(letter)
        if letter in takes_value:
            break
    return "".join(flags)


def _takes_next(
    arg: str, short_with_value: str, long_with_value: frozenset[str] = frozenset()
) -> bool:
    """Whether the option word ``arg`` takes the next word as its value."""
    if (name := _long_name(arg)) is not None:
        return name in long_with_value and "=" not in arg
    flags = _short_flags(arg, short_with_value)
    return bool(flags) and flags[-1] in short_with_value and len(arg) == len(flags) + 1


def _flag(letter: str, arg: str) -> str:
    """``'-o'``, or ``'-o' (in '-uo')`` when the option came in a cluster."""
    return f"'-{letter}'" + ("" if arg == f"-{letter}" else f" (in '{arg}')")


def _unquote(raw: str) -> list[tuple[str, bool]] | None:
    """Bash quote removal of a literal word: ``(character, was_quoted)`` pairs.

    Returns None when the word holds anything but literal text and quotes (an
    expansion, a backtick), so the caller can refuse it.
    """
    out: list[tuple[str, bool]] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append((raw[i + 1], True))
            i += 2
        elif c == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                return None
            out.extend((ch, True) for ch in raw[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and raw[i] != '"':
                d = raw[i]
                if d == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append((raw[i + 1], True))
                    i += 2
                    continue
                if d == "`" or (
                    # `$"` and `$'` inside double quotes are a literal dollar sign
                    d == "$"
                    and i + 1 < n
                    and raw[i + 1] not in "'\""
                    and _starts_expansion(raw[i + 1])
                ):
                    return None
                out.append((d, True))
                i += 1
            if i >= n:
                return None
            i += 1
        elif c == "`" or (c == "$" and i + 1 < n and _starts_expansion(raw[i + 1])):
            return None
        else:
            out.append((c, False))
            i += 1
    return out


def _ansi_c_or_locale_quoted(raw: str) -> bool:
    """Whether ``raw`` holds ``$'...'`` or ``$"..."`` (bashlex misreads both). Only a ``$``
    outside quotes starts one: a regular expression ending in ``$`` inside quotes
    (``'def$'``, ``"def$"``) is plain text."""
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            i += 2
        elif c == "'":
            end = raw.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif c == '"':
            i += 1
            while i < n and raw[i] != '"':
                i += 2 if raw[i] == "\\" else 1
            i += 1
        elif c == "$" and i + 1 < n and raw[i + 1] in "'\"":
            return True
        else:
            i += 1
    return False


def _starts_expansion(c: str) -> bool:
    return c.isalnum() or c in "_{([@*#?$!-'\""


# ------------------------------------------------------------------ argument checkers

_FIND_WRITES = {
    "-delete": "deletes files",
    "-fprint": "writes a file",
    "-fprint0": "writes a file",
    "-fprintf": "writes a file",
    "-fls": "writes a file",
}
_FIND_RUNS = ("-exec", "-execdir", "-ok", "-okdir")
_FIND_PLACEHOLDER = "./_"
"""What ``{}`` stands for when the program an action runs is checked. find names every
file after the starting point it came from, and a starting point never begins with
``-`` (find would read it as an expression), so no name it passes reads as an option.
Where a checker judges an operand by its value (a sed script, a date, a git subcommand,
an integer for ``test``), this stand-in is refused, so a real name is never judged by
a milder value than its own."""


def _find_programs(args: list[str]) -> list[tuple[str, list[str]]]:
    """The ``-exec``/``-execdir``/``-ok``/``-okdir`` actions of a find command line:
    (action, argv) with ``{}`` replaced by :data:`_FIND_PLACEHOLDER`."""
    found: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(args):
        action = args[i]
        i += 1
        if action not in _FIND_RUNS:
            continue
        argv: list[str] = []
        while i < len(args) and args[i] not in (";", "+"):
            word = args[i]
            if "{}" in word and word != "{}":
                _deny(f"find action '{action}' with '{{}}' inside the word {word!r}")
            argv.append(_FIND_PLACEHOLDER if word == "{}" else word)
            i += 1
        if i >= len(args):
            _deny(f"find action '{action}' has no ';' or '+' to end it")
        i += 1
        found.append((action, argv))
    return found


def _check_find(args: list[str]) -> None:
    for arg in args:
        if arg in _FIND_WRITES:
            _writes(f"find action '{arg}' {_FIND_WRITES[arg]}")
    programs = _find_programs(args)
    for action, argv in programs:
        if (write := _argv_writes(argv, 0)) is not None:
            _writes(f"find action '{action}' runs a program that writes: {write.reason()}")
    if not programs:
        return
    # The program a find action runs is proven like a command of its own (find runs it
    # without a shell: no expansion, no redirection), '{}' standing for a file name.
    own = args[: next(k for k, arg in enumerate(args) if arg in _FIND_RUNS)]
    if "--" in own:  # `find -- -o ...` would pass names that begin with '-'
        _deny("find with '--' and an action that runs a program is not allowed")
    for action, argv in programs:
        if not argv:
            _deny(f"find action '{action}' names no program")
        _prove_program_argv(argv, f"find action '{action}'")


_SED_LONG_WITH_VALUE = {"expression", "line-length"}
_SED_LONG = _SED_LONG_WITH_VALUE | {
    "quiet", "silent", "regexp-extended", "separate", "null-data", "zero-terminated",
    "posix", "debug", "sandbox", "unbuffered", "help", "version",
}  # fmt: skip


def _check_sed(args: list[str]) -> None:
    scripts: list[str] = []
    operands: list[str] = []
    i, options_ended = 0, False

    def value_of(option: str) -> str:
        nonlocal i
        if i >= len(args):
            _deny(f"sed option '{option}' is missing its value")
        i += 1
        return args[i - 1]

    while i < len(args):
        arg = args[i]
        i += 1
        if options_ended or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        elif arg == "--":
            options_ended = True
        elif (name := _long_name(arg)) is not None:
            if _abbreviates(name, "in-place"):
                _writes(f"sed option '{arg}' edits files in place")
            if _abbreviates(name, "file"):
                _deny(f"sed option '{arg}' reads a script file that cannot be checked")
            matches = [full for full in _SED_LONG if full.startswith(name)]
            full = name if name in _SED_LONG else (matches[0] if len(matches) == 1 else None)
            if full is None:
                _deny(f"sed option '{arg}' is not allowed")
            if full in _SED_LONG_WITH_VALUE:
                value = arg.split("=", 1)[1] if "=" in arg else value_of(arg)
                if full == "expression":
                    scripts.append(value)
        else:
            for j, letter in enumerate(arg[1:], start=2):
                if letter == "i":
                    _writes(f"sed option {_flag('i', arg)} edits files in place")
                if letter == "f":
                    _deny(
                        f"sed option {_flag('f', arg)} reads a script file that cannot be checked"
                    )
                if letter in "el":
                    value = arg[j:] or value_of(f"-{letter}")
                    if letter == "e":
                        scripts.append(value)
                    break
                if letter not in "nrsuzE":
                    _deny(f"sed option '-{letter}' is not allowed")
    if not scripts:
        if not operands:
            _deny("sed without a script is not allowed")
        scripts.append(operands[0])
    _check_sed_script("\n".join(scripts))


_SED_SIMPLE_COMMANDS = set("pPdDqQ=lnNgGhHxzF")
_SED_S_FLAGS = set("gpiImM0123456789")
_DIGITS = "0123456789"


def _check_sed_script(script: str) -> None:
    """Accept only a whitelisted subset of sed; scan delimiters exactly as GNU sed does."""
    s, n = script, len(script)

    def bad(why: str) -> NoReturn:
        _deny(f"sed script {script!r} is not allowed: {why}")

    def digits(i: int) -> int:
        start = i
        while i < n and s[i] in _DIGITS:
            i += 1
        if i == start:
            bad("expected a number")
        return i

    def delimited(i: int, delim: str) -> int:
        """``i`` is just past an opening delimiter; return the index past the closing one."""
        while i < n:
            c = s[i]
            if c == "\\":
                i += 2
            elif c == "\n":
                bad("unterminated regular expression or replacement")
            elif c == delim:
                return i + 1
            else:
                i += 1
        bad("unterminated regular expression or replacement")

    def address(i: int, second: bool) -> int:
        if i < n and s[i] in _DIGITS:
            i = digits(i)
            if i < n and s[i] == "~":
                i = digits(i + 1)
        elif i < n and s[i] == "$":
            i += 1
        elif second and i < n and s[i] in "+~":
            i = digits(i + 1)
        elif i < n and s[i] in "/\\":
            if s[i] == "\\":
                i += 1
                if i >= n or s[i] in "\n\\":
                    bad("bad regular expression delimiter")
            i = delimited(i + 1, s[i])
            while i < n and s[i] in "IM":
                i += 1
        elif second:
            bad("expected an address after ','")
        return i

    def skip_blanks(i: int) -> int:
        while i < n and s[i] in " \t":
            i += 1
        return i

    i = 0
    while True:
        while i < n and s[i] in " \t\n;":
            i += 1
        if i >= n:
            return
        i = address(i, second=False)
        if i < n and s[i] == ",":
            i = address(i + 1, second=True)
        i = skip_blanks(i)
        if i < n and s[i] == "!":
            i = skip_blanks(i + 1)
        if i >= n:
            bad("missing command")
        command = s[i]
        i += 1
        if command in _SED_SIMPLE_COMMANDS:
            if command in "qQl":
                i = skip_blanks(i)
                while i < n and s[i] in _DIGITS:
                    i += 1
        elif command in "{}":
            continue
        elif command in "sy":
            if i >= n or s[i] in "\n\\":
                bad(f"bad delimiter for '{command}'")
            delim = s[i]
            i = delimited(delimited(i + 1, delim), delim)
            while command == "s" and i < n and s[i] not in " \t\n;}":
                if s[i] == "w":
                    _writes(f"sed 's' flag 'w' in {script!r} writes a file")
                if s[i] == "e":
                    _writes(f"sed 's' flag 'e' in {script!r} runs a shell command")
                if s[i] not in _SED_S_FLAGS:
                    bad(f"unknown 's' flag {s[i]!r}")
                i += 1
        elif command in "wW":
            _writes(f"sed command '{command}' in {script!r} writes a file")
        elif command == "e":
            _writes(f"sed command 'e' in {script!r} runs a shell command")
        else:
            bad(f"sed command {command!r} is not supported")
        i = skip_blanks(i)
        if i < n and s[i] not in ";\n}":
            bad(f"unexpected {s[i]!r} after command '{command}'")


def _check_sort(args: list[str]) -> None:
    for arg in args:  # explicit writes first, so the classifier sees them
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _writes(f"sort option '{arg}' writes a file")
        elif "o" in _short_flags(arg, takes_value="koStT"):
            _writes(f"sort option {_flag('o', arg)} writes a file")
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "compress-program"):
                _deny(f"sort option '{arg}' runs a program")
            if _abbreviates(name, "temporary-directory"):
                _deny(f"sort option '{arg}' writes temporary files into a directory")
            if _abbreviates(name, "buffer-size"):
                _deny(f"sort option '{arg}' is not allowed")
        elif "T" in (flags := _short_flags(arg, takes_value="koStT")):
            _deny(f"sort option {_flag('T', arg)} writes temporary files into a directory")
        elif "S" in flags:
            _deny(f"sort option {_flag('S', arg)} is not allowed")


def _check_rg(args: list[str]) -> None:
    for arg in args:
        if _long_name(arg) in ("pre", "hostname-bin"):
            _deny(f"rg option '{arg}' runs a program")


def _check_tree(args: list[str]) -> None:
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _writes(f"tree option '{arg}' writes a file")
        elif "o" in _short_flags(arg):
            _writes(f"tree option {_flag('o', arg)} writes a file")
        elif "R" in _short_flags(arg):
            _writes(f"tree option {_flag('R', arg)} writes 00Tree.html files")


_UNIQ_LONG_WITH_VALUE = {"skip-fields", "skip-chars", "check-chars"}
_UNIQ_LONG = _UNIQ_LONG_WITH_VALUE | {
    "all-repeated", "count", "repeated", "group", "ignore-case", "unique",
    "zero-terminated", "help", "version",
}  # fmt: skip


def _check_uniq(args: list[str]) -> None:
    # Miscounting must only ever overcount: a word is taken as an option's value only
    # when the option certainly takes one (an ambiguous long prefix does not).
    operands: list[str] = []
    i, options_ended = 0, False
    while i < len(args):
        arg = args[i]
        i += 1
        if options_ended or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        elif arg == "--":
            options_ended = True
        elif (name := _long_name(arg)) is not None:
            matches = [full for full in _UNIQ_LONG if full.startswith(name)]
            full = name if name in _UNIQ_LONG else (matches[0] if len(matches) == 1 else None)
            if full in _UNIQ_LONG_WITH_VALUE and "=" not in arg:
                i += 1
        elif _takes_next(arg, "fsw"):
            i += 1
    if len(operands) > 1:
        _writes(f"uniq with a second file operand {operands[1]!r} writes its output to that file")


def _check_date(args: list[str]) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "set"):
                _writes(f"date option '{arg}' sets the system clock")
            if "=" not in arg and name in ("date", "file", "reference", "rfc-3339"):
                i += 1
        elif flags := _short_flags(arg, takes_value="dfrsI"):
            if "s" in flags:
                _writes(f"date option {_flag('s', arg)} sets the system clock")
            if flags[-1] in "dfr" and len(arg) == len(flags) + 1:
                i += 1
        elif not arg.startswith("+"):
            _writes(f"date operand '{arg}' would set the system clock")


def _check_file(args: list[str]) -> None:
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "compile"):
                _writes(f"file option '{arg}' writes a compiled magic file")
        elif "C" in _short_flags(arg, takes_value="eFfmP"):
            _writes(f"file option {_flag('C', arg)} writes a compiled magic file")


def _check_env(args: list[str]) -> None:
    if args:
        _deny(
            "'env' with arguments runs a program or changes its environment "
            f"('env {' '.join(args)}'); only bare 'env' is allowed"
        )


def _check_cd(args: list[str]) -> None:
    operands = [arg for arg in args if arg not in ("-L", "-P", "--")]
    if any(arg.startswith("-") and arg != "-" for arg in operands):
        _deny(f"'cd' options other than -L and -P are not allowed ('cd {' '.join(args)}')")
    if len(operands) > 1:
        _deny(f"'cd' with more than one operand is not allowed ('cd {' '.join(args)}')")


_TEST_INTEGER_OPERATORS = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}
_INTEGER = re.compile(r"[+-]?[0-9]+")


_VARIABLE = "\x00variable"
"""A ``"$NAME"`` operand of ``test``/``[``, as the checker sees it (NUL never occurs in
a command the parser reads, so no literal word can look like it)."""
_TEST_UNARY = {"-n", "-z", "-e", "-f", "-d", "-r", "-w", "-x", "-s", "-L", "-h"}
_TEST_STRING_OPERATORS = {"=", "==", "!="}


def _check_test(args: list[str]) -> None:
    # bash evaluates the subscript of a name given to -v or -R (running any $(...) in
    # it), and evaluates integer operands arithmetically inside [[ ]]; keep test and [
    # far from both.
    if _VARIABLE in args:
        _check_test_with_variables(args)
    for k, arg in enumerate(args):
        if arg in ("-v", "-R"):
            _deny(f"test operator '{arg}' evaluates a variable name, which can run commands")
        if "[" in arg or "$" in arg:
            _deny(f"test operand {arg!r} contains '[' or '$', which bash may evaluate")
        if arg in _TEST_INTEGER_OPERATORS:
            left = args[k - 1] if k > 0 else ""
            right = args[k + 1] if k + 1 < len(args) else ""
            for side in (left, right):
                if not _INTEGER.fullmatch(side):
                    _deny(f"test operator '{arg}' needs literal integers, not {side!r}")


def _check_test_with_variables(args: list[str]) -> None:
    """A variable's value may be anything, an operator included, so it is allowed only
    where the number of words fixes how test reads it: ``[ "$V" ]``, ``[ -n "$V" ]`` (and
    the other unary tests above), ``[ "$V" = word ]``."""
    words = args[:-1] if args[-1:] == ["]"] else args
    shapes = (
        len(words) == 1,
        len(words) == 2 and words[0] in _TEST_UNARY and words[1] == _VARIABLE,
        len(words) == 3
        and words[1] in _TEST_STRING_OPERATORS
        and all(w == _VARIABLE or not w.startswith(("-", "(", "!")) for w in (words[0], words[2])),
    )
    if not any(shapes):
        _deny(
            'test with a variable operand is allowed only as [ "$V" ], [ -n "$V" ] or '
            '[ "$V" = word ]'
        )


# fmt: off
_GIT_GLOBAL_FLAGS = {
    "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects",
}
_GIT_SUBCOMMANDS = {
    "status", "log", "diff", "show", "branch", "rev-parse", "ls-files", "blame", "grep",
    "rev-list", "cat-file", "ls-tree", "describe", "tag", "remote", "stash", "reflog",
}
# cat-file runs the repository's textconv and filter programs with these
_GIT_CAT_FILE_PROGRAMS = ("textconv", "filters")
_GIT_TAG_LISTING = {
    "list", "sort", "contains", "no-contains", "merged", "no-merged", "points-at", "format",
    "ignore-case", "column", "no-column", "color", "no-color",
}
_GIT_BRANCH_LISTING = {
    "--list", "--all", "--remotes", "--verbose", "--show-current", "--color", "--no-color",
    "--no-column", "--no-abbrev",
}
# fmt: on


def _check_git(args: list[str]) -> None:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        if arg in _GIT_GLOBAL_FLAGS:
            i += 1
        elif arg == "-C" and i + 1 < len(args):
            i += 2
        elif arg == "-c" or arg.startswith("-c") or _long_name(arg) == "config-env":
            _deny(f"git option '{arg}' sets configuration and is not allowed")
        else:
            _deny(f"git option '{arg}' is not allowed")
    if i >= len(args):
        _deny("git without a subcommand is not allowed")
    sub, rest = args[i], args[i + 1 :]
    if sub not in _GIT_SUBCOMMANDS:
        _deny(f"git subcommand '{sub}' is not read-only")
    _check_git_listing(sub, rest)
    for arg in rest:
        if sub == "branch":
            if arg not in _GIT_BRANCH_LISTING and not re.fullmatch(r"-[arvl]+", arg):
                _deny(f"git branch argument '{arg}' is not a listing flag")
        elif (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _writes(f"git option '{arg}' writes a file")
            if _abbreviates(name, "ext-diff"):
                _deny(f"git option '{arg}' runs an external diff program")
            if sub == "grep" and _abbreviates(name, "open-files-in-pager"):
                _deny(f"git grep option '{arg}' runs a program")
        elif flags := _short_flags(arg):
            if flags[0] in "oO" and sub != "ls-files":  # ls-files -o: list other files
                _deny(f"git option {_flag(flags[0], arg)} is not allowed")
            if sub == "grep" and "O" in flags:
                _deny(f"git grep option {_flag('O', arg)} runs a program")


def _check_git_listing(sub: str, rest: list[str]) -> None:
    """The subcommands that list or change, depending on their arguments: only listing."""
    operands = _operands(rest)
    if sub == "tag":
        if (why := _git_tag_writes(rest)) is not None:
            _writes(f"git tag {why}")
        for arg in rest:
            name = _long_name(arg)
            if name is not None and not any(_abbreviates(name, full) for full in _GIT_TAG_LISTING):
                _deny(f"git tag option '{arg}' is not a listing option")
            if name is None and arg.startswith("-") and not re.fullmatch(r"-[li]+|-n[0-9]*", arg):
                _deny(f"git tag option '{arg}' is not a listing option")
    elif sub == "remote":
        if not (
            all(arg in ("-v", "--verbose") for arg in rest)
            or (
                operands[:1] == ["get-url"]
                and all(a in ("--push", "--all") for a in rest[1:] if a.startswith("-"))
            )
        ):
            _deny("git remote may only list (git remote -v) or show a URL (get-url)")
    elif sub == "stash":
        if operands[:1] not in (["list"], ["show"]):
            _deny("git stash may only list or show (git stash list, git stash show)")
    elif sub == "reflog":
        if operands[:1] in (["expire"], ["delete"]):
            _writes(f"git reflog '{operands[0]}' {_GIT_CHANGES}")
    elif sub == "describe":
        for arg in rest:
            name = _long_name(arg)
            if name is not None and any(_abbreviates(name, f) for f in ("dirty", "broken")):
                # refreshes and writes the index to tell a dirty tree
                _deny(f"git describe option '{arg}' rewrites the index")
    elif sub == "cat-file":
        for arg in rest:
            name = _long_name(arg)
            if name is not None and any(
                _abbreviates(name, full) for full in _GIT_CAT_FILE_PROGRAMS
            ):
                _deny(f"git cat-file option '{arg}' runs the repository's textconv or filters")


_ARG_CHECKERS: dict[str, Callable[[list[str]], None]] = {
    "[": _check_test,
    "cd": _check_cd,
    "date": _check_date,
    "env": _check_env,
    "file": _check_file,
    "find": _check_find,
    "git": _check_git,
    "rg": _check_rg,
    "sed": _check_sed,
    "sort": _check_sort,
    "test": _check_test,
    "tree": _check_tree,
    "uniq": _check_uniq,
}

# fmt: off
READ_ONLY_PROGRAMS: frozenset[str] = frozenset({
    "base64", "basename", "cat", "cmp", "column", "cut", "df", "diff", "dirname", "du",
    "echo", "egrep", "false", "fgrep", "grep", "head", "jq", "ls", "md5sum", "nl", "od",
    "printenv", "printf", "pwd", "readlink", "realpath", "seq", "sha256sum", "stat",
    "tac", "tail", "tr", "true", "uname", "wc", "which", "whoami",
    *_ARG_CHECKERS,  # [ cd date env file find git rg sed sort test tree uniq
})
# fmt: on
"""Programs the shell tool may run while planning (some only with checked arguments)."""


def _prove_program_argv(argv: list[str], where: str) -> None:
    """Prove a program run without a shell (``find -exec``) read-only, as the parser
    proves a simple command with literal arguments."""
    name = argv[0]
    directory, slash, base = name.rpartition("/")
    if slash and directory not in _SYSTEM_BIN_DIRS:
        _deny(f"{where} runs '{name}', which is not a program from a system directory")
    if base not in READ_ONLY_PROGRAMS or base == "cd":
        why = _WHY_REFUSED.get(base, "is not on the read-only list")
        _deny(f"{where} runs '{base}', which {why}")
    if base == "printf" and len(argv) > 1 and argv[1].startswith("-") and argv[1] != "--":
        _deny(f"{where}: printf option {argv[1]!r} is not allowed")
    checker = _ARG_CHECKERS.get(base)
    if checker is not None:
        checker(argv[1:])


_RUNS_PROGRAMS = "runs other programs"
_INTERPRETER = "is an interpreter that can write files and run programs"
_SHELL_STATE = "changes the shell's state"
_EVALUATES = "evaluates variable names or arithmetic, which can run commands"
# fmt: off
_WHY_REFUSED = {
    **dict.fromkeys(
        (
            "xargs", "sudo", "doas", "su", "timeout", "nice", "nohup", "command", "builtin",
            "exec", "eval", "time", "watch", "stdbuf", "ionice", "setsid", "chroot",
            "strace", "parallel",
        ),
        _RUNS_PROGRAMS,
    ),
    **dict.fromkeys(
        (
            "bash", "sh", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "python", "python2",
            "python3", "node", "deno", "bun", "perl", "ruby", "php", "lua", "awk", "gawk",
            "mawk", "nawk",
        ),
        _INTERPRETER,
    ),
    **dict.fromkeys(
        ("alias", "unalias", "set", "shopt", "trap", "enable", "hash", "ulimit", "umask",
         "shift"),
        _SHELL_STATE,
    ),
    **dict.fromkeys(
        ("export", "unset", "declare", "typeset", "local", "readonly", "read", "mapfile",
         "readarray", "let", "getopts"),
        _EVALUATES,
    ),
    "source": "runs a script in the current shell",
    ".": "runs a script in the current shell",
    "tee": "writes files",
}
# fmt: on

# --------------------------------------------------------------------- tree walking

_LIST_OPERATORS = {";", "&&", "||", "\n"}
_OUTPUT_REDIRECTIONS = {">", ">>", ">|", "&>", "&>>", ">&"}
_QUOTED_VARIABLE = re.compile(r'"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})"')
_SIMPLE_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_TILDE = re.compile(r"~[A-Za-z0-9_.-]*|~[+-]")
_PLAIN_PROGRAM = re.compile(r"[A-Za-z0-9_.+-]+|\[")
_SYSTEM_BIN_DIRS = {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"}
_NETWORK_PATHS = ("/dev/tcp/", "/dev/udp/")


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def text(self, node: Any) -> str:
        start, end = node.pos
        return self.source[start:end]

    def visit(self, node: Any) -> None:
        kind = node.kind
        if kind == "command":
            self.command(node)
        elif kind == "list":
            for part in node.parts:
                if part.kind != "operator":
                    self.visit(part)
                elif part.op == "&":
                    _deny("background operator '&' is not allowed")
                elif part.op not in _LIST_OPERATORS:
                    _deny(f"operator {part.op!r} is not allowed")
        elif kind == "pipeline":
            for part in node.parts:
                if part.kind == "pipe":
                    if part.pipe not in ("|", "|&"):
                        _deny(f"pipe {part.pipe!r} is not allowed")
                elif part.kind == "reservedword":
                    if part.word != "!":
                        _deny(f"reserved word {part.word!r} is not allowed here")
                else:
                    self.visit(part)
        elif kind == "compound":
            self.compound(node)
        elif kind == "function":
            _deny(f"function definition {self.text(node)!r} is not allowed")
        elif kind in ("if", "for", "while", "until"):
            _deny(f"'{kind}' statements are not allowed")
        else:
            _deny(f"shell construct '{kind}' is not allowed")

    def compound(self, node: Any) -> None:
        if self.source.startswith("((", node.pos[0]):
            _deny("arithmetic command '((' is not allowed")
        for part in node.list:
            if part.kind == "reservedword":
                if part.word not in ("(", ")", "{", "}"):
                    _deny(f"reserved word {part.word!r} is not allowed here")
            else:
                self.visit(part)
        for redirect in node.redirects:
            self.words_in_redirect(redirect)
            self.redirect(redirect)

    def command(self, node: bash_ast.node) -> None:
        words: list[bash_ast.node] = []
        redirects: list[bash_ast.node] = []
        for part in node.parts:
            if part.kind == "assignment":
                _deny(f"variable assignment '{part.word}' is not allowed")
            elif part.kind == "word":
                words.append(part)
            elif part.kind == "redirect":
                redirects.append(part)
            else:
                _deny(f"command part '{part.kind}' is not allowed")
        for word in words:
            self.expansions(word)
        for redirect in redirects:
            self.words_in_redirect(redirect)
        if not words:
            _deny(f"command {self.text(node)!r} has no program to run")
        program = self.program(words[0])
        for redirect in redirects:
            self.redirect(redirect)
        if program in ("echo", "printf"):
            for redirect in redirects:
                if not self.to_null_or_duplication(redirect):
                    _deny(
                        f"'{program}' with the redirection {self.text(redirect)!r} is not "
                        "allowed (only to /dev/null or duplicating a descriptor)"
                    )
        if program == "printf" and len(words) > 1:
            # `printf -v NAME` assigns, evaluating any subscript in NAME; bash takes
            # options only before the format, so the first argument settles it.
            self.literal_argument(program, words[1])
            self.unexpandable_argument(program, words[1])
            if words[1].word.startswith("-") and words[1].word != "--":
                _deny(f"printf option {words[1].word!r} is not allowed (-v assigns a variable)")
        checker = _ARG_CHECKERS.get(program)
        if checker is not None:
            # First prove bashlex's reading of each argument is what bash will pass, then
            # check those values, then refuse words that bash could still expand into
            # other arguments (braces, globs that may match option-like file names).
            values: list[str] = []
            for word in words[1:]:
                if program in ("test", "[") and _QUOTED_VARIABLE.fullmatch(self.text(word)):
                    values.append(_VARIABLE)  # one word whatever its value: "$HOME"
                    continue
                self.literal_argument(program, word)
                values.append(word.word)
            checker(values)
            for word, value in zip(words[1:], values, strict=True):
                if value != _VARIABLE:
                    self.unexpandable_argument(program, word)

    def expansions(self, word: Any) -> None:
        """Refuse substitutions and non-trivial expansions anywhere in a word."""
        raw = self.text(word)
        if _ansi_c_or_locale_quoted(raw):
            _deny(f"ANSI-C or locale quoting in {raw!r} is not allowed")
        for part in word.parts:
            if part.kind == "commandsubstitution":
                _deny(f"command substitution {self.text(part)!r} is not allowed")
            elif part.kind == "processsubstitution":
                _deny(f"process substitution {self.text(part)!r} is not allowed")
            elif part.kind == "parameter" and self.text(part) == "$":
                continue  # a lone `$` before a closing quote is literal text ("def$")
            elif part.kind == "parameter":
                value = getattr(part, "value", None)
                if value is None or not _SIMPLE_PARAMETER.fullmatch(value):
                    _deny(f"parameter expansion {self.text(part)!r} is not allowed")
            elif part.kind == "tilde":
                if not _TILDE.fullmatch(getattr(part, "value", "")):
                    _deny(f"tilde expansion {self.text(part)!r} is not allowed")
            else:
                _deny(f"expansion {self.text(part)!r} ({part.kind}) is not allowed")

    def words_in_redirect(self, redirect: Any) -> None:
        if isinstance(redirect.output, bash_ast.node):
            self.expansions(redirect.output)

    def program(self, word: Any) -> str:
        raw, name = self.text(word), word.word
        if word.parts:
            _deny(f"expansion in program position {raw!r} is not allowed")
        chars = _unquote(raw)
        if chars is None or "".join(c for c, _ in chars) != name:
            _deny(f"program word {raw!r} cannot be checked reliably")
        directory, slash, base = name.rpartition("/")
        if slash and directory not in _SYSTEM_BIN_DIRS:
            _deny(
                f"program path '{name}' is not allowed; use the bare program name or a "
                "standard system directory such as /usr/bin"
            )
        if base not in READ_ONLY_PROGRAMS:
            why = _WHY_REFUSED.get(base, "is not on the read-only list")
            _deny(f"program '{base}' {why}")
        if not _PLAIN_PROGRAM.fullmatch(base):
            _deny(f"program word {raw!r} is not a plain program name")
        return base

    def redirect(self, redirect: Any) -> None:
        kind, target = redirect.type, redirect.output
        fd = redirect.input
        if fd is not None and not isinstance(fd, int):
            _deny(f"redirection with a named file descriptor {fd!r} is not allowed")
        shown = f"{'' if fd is None else fd}{kind}"
        if kind in ("<<", "<<-"):
            _deny(f"here-document '{shown}' is not allowed")
        if kind == "<<<":
            _deny(f"here-string '{shown}' is not allowed")
        if kind in (">&", "<&") and (isinstance(target, int) or target == "-"):
            return  # duplicating or closing a descriptor
        is_word = isinstance(target, bash_ast.node)
        if kind == "<" and is_word:
            self.input_file(target)
            return
        if kind in _OUTPUT_REDIRECTIONS and is_word:
            if self.text(target) == "/dev/null":
                return
            _deny(
                f"redirection '{shown}' to {self.text(target)!r} is not read-only "
                "(only /dev/null is allowed)"
            )
        _deny(f"redirection '{shown}' is not allowed")

    def input_file(self, target: Any) -> None:
        """Refuse an input file bash could open as a network connection (/dev/tcp/...)."""
        raw = self.text(target)
        chars = _unquote(raw)
        if target.parts or chars is None or "".join(c for c, _ in chars) != target.word:
            _deny(f"input redirection from {raw!r} must name a literal file")
        if target.word.startswith(_NETWORK_PATHS):
            _deny(f"input redirection from {raw!r} opens a network connection")

    def to_null_or_duplication(self, redirect: Any) -> bool:
        kind, target = redirect.type, redirect.output
        if kind in (">&", "<&") and (isinstance(target, int) or target == "-"):
            return True
        return (
            kind in _OUTPUT_REDIRECTIONS
            and isinstance(target, bash_ast.node)
            and self.text(target) == "/dev/null"
        )

    def literal_argument(self, program: str, word: Any) -> None:
        """Refuse an argument whose value bash could make differ from bashlex's reading."""
        raw = self.text(word)
        if any(part.kind != "tilde" and self.text(part) != "$" for part in word.parts):
            _deny(f"expansion in argument {raw!r} to '{program}' is not allowed")
        chars = _unquote(raw)
        if chars is None or "".join(c for c, _ in chars) != word.word:
            _deny(f"quoting of argument {raw!r} to '{program}' cannot be checked reliably")

    def unexpandable_argument(self, program: str, word: Any) -> None:
        """Refuse a (literal) argument that brace or glob expansion could turn into options."""
        raw = self.text(word)
        chars = _unquote(raw) or []
        if raw == "{}":
            return  # bash leaves an empty pair of braces as it is (find's file name)
        if any(c == "{" and not quoted for c, quoted in chars):
            _deny(f"unquoted brace in argument {raw!r} to '{program}' may expand; quote it")
        glob_at = next((k for k, (c, q) in enumerate(chars) if c in "*?[" and not q), None)
        if glob_at is not None and (glob_at == 0 or chars[0][0] == "-"):
            _deny(
                f"unquoted glob {raw!r} to '{program}' may expand to option-like file "
                "names; quote it or start it with ./"
            )

    def whole_text_parsed(self, trees: list[Any]) -> None:
        """Refuse text outside the parsed trees that is not blank or a comment."""
        position = 0
        for start, end in [*sorted(tree.pos for tree in trees), (len(self.source),) * 2]:
            for line in self.source[position:start].split("\n"):
                stripped = line.strip()
                if stripped and not stripped.startswith("#"):
                    _deny(f"part of the command was not understood: {stripped!r}")
            position = max(position, end)


# ----------------------------------------------------------------- explicit writes

_NETWORK = "reaches the network"
# fmt: off
_WRITERS: dict[str, str] = {
    "rm": "removes files", "rmdir": "removes directories", "unlink": "removes a file",
    "mv": "moves files", "cp": "copies files", "ln": "creates links",
    "touch": "creates or updates files", "mkdir": "creates directories",
    "chmod": "changes file permissions", "chown": "changes file owners",
    "chgrp": "changes file groups", "truncate": "changes file sizes",
    "dd": "copies data to files", "tee": "writes files", "install": "copies files",
    "shred": "overwrites files", "patch": "changes files",
    **dict.fromkeys(("curl", "wget", "ssh", "scp", "nc", "ncat", "telnet", "ftp"), _NETWORK),
    "rsync": "copies files, possibly over the network",
    **dict.fromkeys(("sudo", "su", "doas"), "runs commands as another user"),
    **dict.fromkeys(("kill", "pkill", "killall"), "signals processes"),
    **dict.fromkeys(("reboot", "shutdown"), "stops the machine"),
    "systemctl": "controls system services", "crontab": "changes scheduled jobs",
}
# fmt: on

_SHELLS = {"bash", "sh", "zsh", "dash", "ksh", "fish"}


@dataclass(frozen=True)
class _Write:
    """An explicit write: what does it (``program 'rm' removes files``) and where."""

    what: str
    where: tuple[str, ...] = ()

    def inside(self, place: str) -> _Write:
        return _Write(self.what, (*self.where, place))

    def reason(self) -> str:
        return self.what + (f" (in {', inside '.join(self.where)})" if self.where else "")


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _operands(
    args: list[str], short_with_value: str = "", long_with_value: frozenset[str] = frozenset()
) -> list[str]:
    """The non-option words of ``args``, skipping the values of options that take one."""
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif _takes_next(arg, short_with_value, long_with_value):
            i += 1
    return operands


def _after_options(
    args: list[str], short_with_value: str = "", long_with_value: frozenset[str] = frozenset()
) -> list[str]:
    """The words from the first operand on: the command a wrapper runs."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return args[i + 1 :]
        if not arg.startswith("-") or arg == "-":
            return args[i:]
        i += 2 if _takes_next(arg, short_with_value, long_with_value) else 1
    return []


def _unwrap_env(args: list[str]) -> list[str]:
    rest = _after_options(args, "uCS", frozenset({"unset", "chdir", "split-string"}))
    while rest and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", rest[0]):
        rest = rest[1:]
    return rest


def _unwrap_xargs(args: list[str]) -> list[str]:
    long_with_value = {"arg-file", "delimiter", "max-args", "max-procs", "max-chars"}
    return _after_options(args, "adEILnPs", frozenset(long_with_value | {"process-slot-var"}))


def _unwrap_timeout(args: list[str]) -> list[str]:
    return _after_options(args, "ks", frozenset({"kill-after", "signal"}))[1:]


def _unwrap_command(args: list[str]) -> list[str]:
    if any(arg in ("-v", "-V", "-pv", "-pV") for arg in args):
        return []  # describes the command instead of running it
    return _after_options(args)


_WRAPPERS: dict[str, Callable[[list[str]], list[str]]] = {
    "env": _unwrap_env,
    "xargs": _unwrap_xargs,
    "timeout": _unwrap_timeout,
    "nice": lambda args: _after_options(args, "n", frozenset({"adjustment"})),
    "nohup": _after_options,
    "setsid": _after_options,
    "builtin": _after_options,
    "command": _unwrap_command,
    "exec": lambda args: _after_options(args, "a"),
    "time": _after_options,
    "stdbuf": lambda args: _after_options(args, "ioe", frozenset({"input", "output", "error"})),
    "ionice": lambda args: _after_options(args, "cn", frozenset({"class", "classdata"})),
}


def _shell_script(args: list[str]) -> str | None:
    """The command string of ``sh -c STRING``, if there is one."""
    has_c, i = False, 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith(("-", "+")) and len(arg) > 1 and not arg.startswith("--"):
            has_c = has_c or "c" in arg[1:]
            if arg[-1] in "oO":  # -o OPTION, +O SHOPT
                i += 1
        elif not arg.startswith("--"):
            return arg if has_c else None
    return None


# fmt: off
_PACKAGE_VERBS: dict[str, set[str]] = {
    "pip": {"download"}, "python -m pip": {"download"}, "pipx": {"inject", "upgrade"},
    "uv": {"sync"}, "uv pip": {"sync"}, "uv tool": {"upgrade"}, "poetry": {"update"},
    "npm": {"i", "in", "ci", "un", "rm", "r", "unlink", "update", "up", "upgrade"},
    "pnpm": {"i", "rm", "un", "up", "update"}, "yarn": {"upgrade"}, "bun": {"i", "rm"},
    "apt": {"purge", "autoremove", "upgrade", "full-upgrade", "update", "reinstall"},
    "apt-get": {"purge", "autoremove", "upgrade", "dist-upgrade", "update", "reinstall"},
    "gem": {"update"}, "cargo": {"update"}, "conda": {"update"}, "mamba": {"update"},
    "brew": {"upgrade", "reinstall"}, "dnf": {"erase", "upgrade", "update"},
    "yum": {"erase", "upgrade", "update"}, "apk": {"del", "upgrade", "update"},
}
# fmt: on
_BASE_PACKAGE_VERBS = {"install", "add", "remove", "uninstall"}
_PIP = re.compile(r"pip[0-9.]*")
_PYTHON = re.compile(r"python[0-9.]*")


def _python_module(args: list[str]) -> tuple[str, list[str]] | None:
    """The module and its arguments in ``python [options] -m MODULE ARGS...``."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return (args[i + 1], args[i + 2 :]) if i + 1 < len(args) else None
        if arg.startswith("-m"):
            return arg[2:], args[i + 1 :]
        if not arg.startswith("-") or arg.startswith("-c"):
            return None  # a script or a command string
        i += 2 if arg in ("-W", "-X") else 1
    return None


def _package_writes(name: str, args: list[str]) -> _Write | None:
    if _PYTHON.fullmatch(name):
        module = _python_module(args)
        if module is None or not _PIP.fullmatch(module[0]):
            return None
        manager, operands = "python -m pip", _operands(module[1])
    else:
        manager, operands = ("pip" if _PIP.fullmatch(name) else name), _operands(args)
        if manager == "uv" and operands[:1] in (["pip"], ["tool"]):
            manager, operands = f"uv {operands[0]}", operands[1:]
    verbs = _PACKAGE_VERBS.get(manager)
    if verbs is not None and operands and operands[0] in _BASE_PACKAGE_VERBS | verbs:
        return _Write(f"'{manager} {operands[0]}' installs or removes packages")
    return None


_GIT_CHANGES = "changes the repository or the working tree"
# fmt: off
_GIT_WRITING = {
    "commit", "add", "rm", "mv", "reset", "checkout", "switch", "restore", "merge",
    "rebase", "cherry-pick", "revert", "init", "am", "gc", "prune", "update-index",
    "update-ref", "repack", "pack-refs", "filter-branch", "maintenance", "mergetool",
}
_GIT_NETWORK = {"push", "pull", "fetch", "clone", "ls-remote"}
_GIT_WRITING_ACTIONS = {
    "submodule": {"add", "update", "init", "deinit", "sync", "set-branch", "set-url",
                  "absorbgitdirs"},
    "remote": {"add", "remove", "rm", "rename", "set-url", "set-head", "set-branches",
               "prune", "update"},
    "notes": {"add", "copy", "append", "edit", "merge", "remove", "prune"},
    "sparse-checkout": {"set", "add", "init", "disable", "reapply"},
    "reflog": {"expire", "delete"},
}
_GIT_READING_ACTIONS = {"stash": {"list", "show"}, "worktree": {None, "list"}}
_GIT_CONFIG_WRITE_OPTIONS = {
    "--add", "--replace-all", "--unset", "--unset-all", "--rename-section",
    "--remove-section", "--edit", "-e",
}
_GIT_CONFIG_READ_OPTIONS = {
    "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
    "--get-colorbool", "--list", "-l",
}
_GIT_LISTING = {
    "-l", "--list", "-a", "--all", "-r", "--remotes", "--contains", "--no-contains",
    "--merged", "--no-merged", "--points-at", "--show-current", "-n", "-v", "--verify",
}
_GIT_LIST_VALUES = frozenset({
    "contains", "no-contains", "merged", "no-merged", "points-at", "sort", "format",
})
# fmt: on


def _git_subcommand(args: list[str]) -> tuple[str, list[str]] | None:
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"):
            i += 1
        elif not arg.startswith("-"):
            return arg, args[i:]
    return None


def _git_writes(args: list[str]) -> _Write | None:
    found = _git_subcommand(args)
    if found is None:
        return None
    sub, rest = found
    if sub in _GIT_WRITING:
        return _Write(f"git subcommand '{sub}' {_GIT_CHANGES}")
    if sub in _GIT_NETWORK and not (sub == "ls-remote" and _local_repository(rest)):
        return _Write(f"git subcommand '{sub}' {_NETWORK}")
    for arg in rest:
        if arg == "--":
            break
        if (name := _long_name(arg)) is not None and _abbreviates(name, "output"):
            return _Write(f"git option '{arg}' writes a file")
    check = _GIT_CHECKS.get(sub)
    why = check(rest) if check is not None else _git_action_writes(sub, rest)
    return None if why is None else _Write(f"git {sub} {why}")


def _local_repository(rest: list[str]) -> bool:
    """``git ls-remote .`` and other repositories named by a path: no network (without
    an operand git asks the default remote, which is)."""
    operands = _operands(rest, "", frozenset({"upload-pack", "sort", "server-option"}))
    if not operands:
        return False
    target = operands[0]
    return ":" not in target and (target in (".", "..") or target.startswith(("./", "../", "/")))


def _git_action_writes(sub: str, rest: list[str]) -> str | None:
    """For subcommands whose first operand is an action (``git stash list``)."""
    operands = _operands(rest)
    action = operands[0] if operands else None
    if sub in _GIT_READING_ACTIONS:
        writes = action not in _GIT_READING_ACTIONS[sub]
    else:
        writes = action in _GIT_WRITING_ACTIONS.get(sub, ())
    if not writes:
        return None
    return f"'{action}' {_GIT_CHANGES}" if action else _GIT_CHANGES


def _git_branch_writes(rest: list[str]) -> str | None:
    for arg in rest:
        if arg == "--":
            break
        name = _long_name(arg)
        if name in ("delete", "move", "copy", "set-upstream-to", "unset-upstream",
                    "edit-description", "force", "track"):  # fmt: skip
            return f"argument '{arg}' deletes, moves, copies or changes a branch"
        if name is None and set(_short_flags(arg, "u")) & set("dDmMcCfu"):
            return f"argument '{arg}' deletes, moves, copies or changes a branch"
    operands = _operands(rest, "u", _GIT_LIST_VALUES | {"set-upstream-to"})
    if operands and not any(arg.split("=")[0] in _GIT_LISTING for arg in rest):
        return f"argument '{operands[0]}' creates a branch"
    return None


def _git_tag_writes(rest: list[str]) -> str | None:
    for arg in rest:
        if arg == "--":
            break
        name = _long_name(arg)
        if name in ("delete", "annotate", "sign", "force", "message", "file", "local-user"):
            return f"argument '{arg}' creates or deletes a tag"
        if name is None and set(_short_flags(arg, "mFu")) & set("dasfmFu"):
            return f"argument '{arg}' creates or deletes a tag"
    operands = _operands(rest, "", _GIT_LIST_VALUES)
    if operands and not any(arg.split("=")[0] in _GIT_LISTING for arg in rest):
        return f"argument '{operands[0]}' creates a tag"
    return None


def _git_config_writes(rest: list[str]) -> str | None:
    options = {arg.split("=")[0] for arg in rest}
    if written := sorted(options & _GIT_CONFIG_WRITE_OPTIONS):
        return f"option '{written[0]}' changes configuration"
    value_options = frozenset({"file", "blob", "type", "default", "comment", "value"})
    operands = _operands(rest, "f", value_options)
    action = operands[0] if operands else None
    if action in ("set", "unset", "rename-section", "remove-section", "edit"):
        return f"'{action}' changes configuration"
    if action in ("get", "list") or options & _GIT_CONFIG_READ_OPTIONS:
        return None
    if len(operands) >= 2:
        return f"with a value ('{operands[0]} {operands[1]}') changes configuration"
    return None


def _git_apply_writes(rest: list[str]) -> str | None:
    if "--apply" not in rest and {"--check", "--stat", "--numstat", "--summary"} & set(rest):
        return None
    return "applies a patch"


def _git_clean_writes(rest: list[str]) -> str | None:
    if "--dry-run" in rest or any("n" in _short_flags(arg, "e") for arg in rest):
        return None
    return "removes untracked files"


_GIT_CHECKS: dict[str, Callable[[list[str]], str | None]] = {
    "branch": _git_branch_writes,
    "tag": _git_tag_writes,
    "config": _git_config_writes,
    "apply": _git_apply_writes,
    "clean": _git_clean_writes,
    "format-patch": lambda rest: None if "--stdout" in rest else "writes patch files",
    "archive": lambda rest: "writes a file" if "-o" in rest else None,
}


def _sed_writes(args: list[str]) -> _Write | None:
    # -i anywhere counts, even after an option the proof would refuse first.
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "in-place"):
                return _Write(f"sed option '{arg}' edits files in place")
            if name in _SED_LONG_WITH_VALUE | {"file"} and "=" not in arg:
                i += 1
        elif flags := _short_flags(arg, takes_value="efl"):
            if "i" in flags:
                return _Write(f"sed option {_flag('i', arg)} edits files in place")
            if flags[-1] in "efl" and len(arg) == len(flags) + 1:
                i += 1
    try:
        _check_sed(args)
    except _Writes as found:
        return _Write(found.reason)
    except _Denied:
        pass
    return None


_CHECKED_WRITERS = {"find", "sort", "tree", "uniq", "date", "file"}


def _argv_writes(argv: list[str], depth: int) -> _Write | None:
    """An explicit write by the program ``argv`` runs (as bashlex read the words)."""
    if not argv:
        return None
    name, args = argv[0].rpartition("/")[2], argv[1:]
    if name in _WRITERS:
        return _Write(f"program '{name}' {_WRITERS[name]}")
    if name == "git":
        return _git_writes(args)
    if name == "sed":
        return _sed_writes(args)
    if name in _CHECKED_WRITERS:
        try:
            _ARG_CHECKERS[name](args)
        except _Writes as found:
            return _Write(found.reason)
        except _Denied:
            pass
        return None
    if name in _WRAPPERS:
        return _argv_writes(_WRAPPERS[name](args), depth)
    if name in _SHELLS:
        script = _shell_script(args)
        return None if script is None else _script_writes(script, depth + 1)
    if name == "eval":
        return _script_writes(" ".join(args), depth + 1)
    return _package_writes(name, args)


def _script_writes(script: str, depth: int) -> _Write | None:
    """An explicit write in a command string run by ``sh -c`` or ``eval``."""
    if depth > 3:
        return None
    try:
        trees = bashlex.parse(script)
    except Exception:  # an unparsable inner script shows no explicit write
        return None
    return _WriteScan(script, depth).trees(trees)


def _children(node: bash_ast.node) -> Iterator[bash_ast.node]:
    value: object
    for value in vars(node).values():
        items = cast("list[object]", value) if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, bash_ast.node):
                yield item


class _WriteScan:
    """Finds the first explicit write anywhere in a syntax tree."""

    def __init__(self, source: str, depth: int = 0) -> None:
        self.source = source
        self.depth = depth

    def text(self, node: Any) -> str:
        start, end = node.pos
        return self.source[start:end]

    def trees(self, trees: list[Any]) -> _Write | None:
        for tree in trees:
            if found := self.find(tree):
                return found
        return None

    def find(self, node: Any) -> _Write | None:
        kind = node.kind
        found = None
        if kind == "command":
            found = self.command(node)
        elif kind == "redirect":
            found = self.redirect(node)
        if found:
            return found
        for child in _children(node):
            if found := self.find(child):
                if kind in ("commandsubstitution", "processsubstitution"):
                    label = "command" if kind == "commandsubstitution" else "process"
                    return found.inside(f"{label} substitution {self.text(node)!r}")
                return found
        return None

    def command(self, node: Any) -> _Write | None:
        argv = [part.word for part in node.parts if part.kind == "word"]
        found = _argv_writes(argv, self.depth)
        return found.inside(_shown(self.text(node))) if found else None

    def redirect(self, node: Any) -> _Write | None:
        kind, target, fd = node.type, node.output, node.input
        if not isinstance(target, bash_ast.node):
            return None  # duplicating or closing a descriptor
        shown = f"redirection '{'' if fd is None else fd}{kind}'"
        value = target.word
        if value.startswith(_NETWORK_PATHS) and kind not in ("<<", "<<-", "<<<"):
            direction = "from" if kind.startswith("<") else "to"
            return _Write(f"{shown} {direction} {self.text(target)!r} opens a network connection")
        if kind == "<>":
            return _Write(f"{shown} to {self.text(target)!r} opens a file for writing")
        if kind not in _OUTPUT_REDIRECTIONS or value in _HARMLESS_OUTPUTS:
            return None
        if kind == ">&" and value.isdigit():
            return None
        return _Write(f"{shown} to {self.text(target)!r} writes a file")


_HARMLESS_OUTPUTS = {"/dev/null", "/dev/stdout", "/dev/stderr"}


def _find_write(command: str, trees: list[Any]) -> _Write | None:
    try:
        return _WriteScan(command).trees(trees)
    except Exception:  # the scan only describes; it must never break the verdict
        return None


# ------------------------------------------------------------------------ verdicts


def classify_command(command: str) -> ShellVerdict:
    """Classify ``command`` as proven read-only, unproven, or an explicit write."""
    if not command.strip():
        return _unproven("empty command", hint="")
    if "\x00" in command:
        return _unproven("command contains a NUL character")
    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # bashlex raises several types; all mean "not understood"
        return _classify_unparsed(command, exc)
    if found := _find_write(command, trees):
        return _writes_verdict(found.reason())
    try:
        _walk(command, trees)
    except _Denied as denied:
        return _unproven(denied.reason)
    except Exception as exc:  # an AST shape this module does not expect: fail closed
        return _unproven(f"could not check command: {exc!r}")
    return _READ_ONLY


def check_read_only_command(command: str) -> ShellVerdict:
    """Prove ``command`` read-only, or say what is refused (see :func:`classify_command`)."""
    return classify_command(command)


def _walk(command: str, trees: list[Any]) -> None:
    checker = _Checker(command)
    for tree in trees:
        checker.visit(tree)
    checker.whole_text_parsed(trees)


def _classify_unparsed(command: str, exc: Exception) -> ShellVerdict:
    """The verdict for a command bashlex cannot parse: unproven, or an explicit write.

    It is never read-only. A lenient parse of the command, then of its first line
    (bashlex cannot read here-documents with a quoted delimiter, ``<<'EOF'``, but their
    first line names what they feed and where the output goes), may still show an
    explicit write, or at least a more telling reason.
    """
    reason = f"could not parse command: {exc}"
    for text in dict.fromkeys((command, command.split("\n", 1)[0])):
        try:
            trees = bashlex.parse(text, strictmode=False)
        except Exception:
            continue
        if found := _find_write(text, trees):
            return _writes_verdict(f"{found.reason()} (and the command could not be fully parsed)")
        try:
            _walk(text, trees)
        except _Denied as denied:
            reason = f"{denied.reason} (and the command could not be fully parsed)"
            break
        except Exception:
            continue
    return _unproven(reason)
