"""Prove a shell command read-only, or refuse it.

While a plan is being drafted the gate lets the shell tool run only commands that this
module proves read-only. The proof works on the syntax tree from ``bashlex`` (a
pure-Python bash parser), never on regexes or prefixes, and it is an allowlist: every
node kind, operator, redirection and program not explicitly understood below is
refused, and so is anything bashlex cannot parse (fail closed).

Rules
-----
* Structure: simple commands, pipelines (``|``, ``|&``, ``!``), lists joined by
  ``;``, ``&&``, ``||`` or newlines, subshells ``( ... )`` and groups ``{ ...; }``
  are allowed when every command inside is. Background ``&``, ``if``/``for``/
  ``while``/``until``/``case``, arithmetic ``(( ))``/``$(( ))``, ``[[ ]]``,
  ``coproc``, ``time`` and function definitions are refused.
* Programs: a bare name on :data:`READ_ONLY_PROGRAMS`, written plainly (no quotes,
  escapes or expansions). Any program word containing ``/`` is refused, absolute
  system paths included. Wrappers that run other programs (``xargs``, ``env cmd``,
  ``timeout``, ``nice``, ``nohup``, ``command``, ``builtin``, ``sudo``, ...), shells,
  interpreters (``awk`` included) and ``tee`` are refused outright, not unwrapped.
* Expansions: command substitution, backticks and process substitution are refused
  wherever they appear, without looking inside. Parameter expansion is allowed in
  arguments only in its simple forms (``$NAME``, ``${NAME}``, ``$1``, ``$?``, ...) and
  only for programs without an argument checker; never in program position.
  ANSI-C and locale quoting (``$'...'``, ``$"..."``) are refused (bashlex misreads
  them). Variable assignments are refused.
* Redirections: input ``< file`` and descriptor duplication/closing (``2>&1``,
  ``>&2``, ``<&3``, ``2>&-``) are allowed. Output redirections (``>``, ``>>``, ``>|``,
  ``&>``, ``&>>``, ``>&``, with any descriptor) are allowed only to the literal
  ``/dev/null``. ``<>``, here-documents (``<<``, ``<<-``) and here-strings (``<<<``)
  are always refused. ``echo`` and ``printf`` may not carry any redirection.
* Programs with options that write files or run programs have argument checkers;
  their arguments must be literal words (no expansions, no unquoted braces, no
  unquoted glob that could expand to an option-like name such as ``*`` or ``-*``;
  write ``./*`` instead), and the bash-correct unquoting must agree with bashlex's:

  - ``find``: no ``-exec``, ``-execdir``, ``-ok``, ``-okdir``, ``-delete``,
    ``-fprint``, ``-fprint0``, ``-fprintf``, ``-fls``.
  - ``sed``: no ``-i``/``--in-place``, no ``-f``/``--file`` (a script file cannot be
    inspected); the script must parse as a small whitelisted subset of sed (addresses,
    ``p P d D q Q = l n N g G h H x z F { }``, ``s`` with flags ``g p i I m M`` and a
    number, ``y``). Everything else, ``w``/``W``/``e``/``r`` commands, the ``s`` flags
    ``w`` and ``e``, labels, branches, text commands and comments included, is refused.
  - ``sort``: no ``-o``/``--output`` and no ``--compress-program``.
  - ``rg``: no ``--pre`` and no ``--hostname-bin`` (both run programs).
  - ``tree``: no ``-o`` (writes a file) and no ``-R`` (writes ``00Tree.html`` files).
  - ``uniq``: at most one file operand (a second one is an output file). Counted
    crudely: every word not starting with ``-`` counts, so ``uniq -f 1 file`` is refused
    (write ``-f1``).
  - ``date``: no ``-s``/``--set`` and no operand other than ``+FORMAT``.
  - ``file``: no ``-C``/``--compile``.
  - ``env``: only bare ``env``.
  - ``git``: global options only ``--no-pager``, ``-P``, ``--no-optional-locks``,
    ``--literal-pathspecs``, ``--no-replace-objects`` and ``-C DIR`` (``-c`` and
    everything else refused); subcommands only ``status``, ``log``, ``diff``,
    ``show``, ``branch`` (listing flags only), ``rev-parse``, ``ls-files``,
    ``blame``, ``grep``; no ``--output``, ``--ext-diff``, no short option starting
    with ``-o``/``-O``, and for ``grep`` no ``-O``/``--open-files-in-pager``.

  GNU ``getopt_long`` and git accept any unambiguous prefix of a long option, so a
  prefix of a refused option is refused too: ``sort --out=f`` like ``--output=f``.
* Coverage: text outside the trees bashlex returns must be blank or comments, so
  nothing the parser skipped can run unchecked. NUL characters are refused.

The proof covers the command text only. It trusts the environment the command runs
in: ``PATH``, exported shell functions, and configuration the listed programs read on
their own (for example a repository's git config, which can name an external diff or
an fsmonitor program).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import bashlex
from bashlex import ast as bash_ast

__all__ = ["READ_ONLY_PROGRAMS", "ShellVerdict", "check_read_only_command"]


@dataclass(frozen=True)
class ShellVerdict:
    """Whether a shell command is proven read-only, and why (or why not)."""

    allowed: bool
    reason: str
    """``"read-only"`` when allowed; otherwise names the part that was refused."""


class _Denied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _deny(reason: str) -> NoReturn:
    raise _Denied(reason)


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
    flags = []
    for letter in arg[1:]:
        flags.append(letter)
        if letter in takes_value:
            break
    return "".join(flags)


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
                if d == "`" or (d == "$" and i + 1 < n and _starts_expansion(raw[i + 1])):
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


def _starts_expansion(c: str) -> bool:
    return c.isalnum() or c in "_{(@*#?$!-'\""


# ------------------------------------------------------------------ argument checkers

_FIND_DENIED = {
    "-exec": "runs a program",
    "-execdir": "runs a program",
    "-ok": "runs a program",
    "-okdir": "runs a program",
    "-delete": "deletes files",
    "-fprint": "writes a file",
    "-fprint0": "writes a file",
    "-fprintf": "writes a file",
    "-fls": "writes a file",
}


def _check_find(args: list[str]) -> None:
    for arg in args:
        if arg in _FIND_DENIED:
            _deny(f"find action '{arg}' {_FIND_DENIED[arg]}")


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
                _deny(f"sed option '{arg}' edits files in place")
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
                    _deny(f"sed option '-i' (in '{arg}') edits files in place")
                if letter == "f":
                    _deny(
                        f"sed option '-f' (in '{arg}') reads a script file that cannot be checked"
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
                    _deny(f"sed 's' flag 'w' in {script!r} writes a file")
                if s[i] == "e":
                    _deny(f"sed 's' flag 'e' in {script!r} runs a shell command")
                if s[i] not in _SED_S_FLAGS:
                    bad(f"unknown 's' flag {s[i]!r}")
                i += 1
        elif command in "wW":
            _deny(f"sed command '{command}' in {script!r} writes a file")
        elif command == "e":
            _deny(f"sed command 'e' in {script!r} runs a shell command")
        else:
            bad(f"sed command {command!r} is not supported")
        i = skip_blanks(i)
        if i < n and s[i] not in ";\n}":
            bad(f"unexpected {s[i]!r} after command '{command}'")


def _check_sort(args: list[str]) -> None:
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _deny(f"sort option '{arg}' writes a file")
            if _abbreviates(name, "compress-program"):
                _deny(f"sort option '{arg}' runs a program")
        elif "o" in _short_flags(arg, takes_value="koStT"):
            _deny(f"sort option '-o' (in '{arg}') writes a file")


def _check_rg(args: list[str]) -> None:
    for arg in args:
        if _long_name(arg) in ("pre", "hostname-bin"):
            _deny(f"rg option '{arg}' runs a program")


def _check_tree(args: list[str]) -> None:
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _deny(f"tree option '{arg}' writes a file")
        elif "o" in _short_flags(arg):
            _deny(f"tree option '-o' (in '{arg}') writes a file")
        elif "R" in _short_flags(arg):
            _deny(f"tree option '-R' (in '{arg}') writes 00Tree.html files")


def _check_uniq(args: list[str]) -> None:
    operands, options_ended = 0, False
    for arg in args:
        if arg == "--" and not options_ended:
            options_ended = True
        elif options_ended or arg == "-" or not arg.startswith("-"):
            operands += 1
    if operands > 1:
        _deny("uniq with a second file operand writes its output to that file")


def _check_date(args: list[str]) -> None:
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "set"):
                _deny(f"date option '{arg}' sets the system clock")
            if "=" not in arg and name in ("date", "file", "reference", "rfc-3339"):
                i += 1
        elif flags := _short_flags(arg, takes_value="dfrsI"):
            if "s" in flags:
                _deny(f"date option '-s' (in '{arg}') sets the system clock")
            if flags[-1] in "dfr" and len(arg) == len(flags) + 1:
                i += 1
        elif not arg.startswith("+"):
            _deny(f"date operand '{arg}' would set the system clock")


def _check_file(args: list[str]) -> None:
    for arg in args:
        if (name := _long_name(arg)) is not None:
            if _abbreviates(name, "compile"):
                _deny(f"file option '{arg}' writes a compiled magic file")
        elif "C" in _short_flags(arg, takes_value="eFfmP"):
            _deny(f"file option '-C' (in '{arg}') writes a compiled magic file")


def _check_env(args: list[str]) -> None:
    if args:
        _deny(
            "'env' with arguments runs a program or changes its environment "
            f"('env {' '.join(args)}'); only bare 'env' is allowed"
        )


# fmt: off
_GIT_GLOBAL_FLAGS = {
    "--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects",
}
_GIT_SUBCOMMANDS = {
    "status", "log", "diff", "show", "branch", "rev-parse", "ls-files", "blame", "grep",
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
    for arg in rest:
        if sub == "branch":
            if arg not in _GIT_BRANCH_LISTING and not re.fullmatch(r"-[arvl]+", arg):
                _deny(f"git branch argument '{arg}' is not a listing flag")
        elif (name := _long_name(arg)) is not None:
            if _abbreviates(name, "output"):
                _deny(f"git option '{arg}' writes a file")
            if _abbreviates(name, "ext-diff"):
                _deny(f"git option '{arg}' runs an external diff program")
            if sub == "grep" and _abbreviates(name, "open-files-in-pager"):
                _deny(f"git grep option '{arg}' runs a program")
        elif flags := _short_flags(arg):
            if flags[0] in "oO":
                _deny(f"git option '-{flags[0]}' (in '{arg}') is not allowed")
            if sub == "grep" and "O" in flags:
                _deny(f"git grep option '-O' (in '{arg}') runs a program")


_ARG_CHECKERS: dict[str, Callable[[list[str]], None]] = {
    "date": _check_date,
    "env": _check_env,
    "file": _check_file,
    "find": _check_find,
    "git": _check_git,
    "rg": _check_rg,
    "sed": _check_sed,
    "sort": _check_sort,
    "tree": _check_tree,
    "uniq": _check_uniq,
}

# fmt: off
READ_ONLY_PROGRAMS: frozenset[str] = frozenset({
    "[", "basename", "cat", "cmp", "column", "cut", "df", "diff", "dirname", "du", "echo",
    "egrep", "false", "fgrep", "grep", "head", "jq", "ls", "md5sum", "nl", "printenv",
    "printf", "pwd", "readlink", "realpath", "seq", "sha256sum", "stat", "tail", "test",
    "tr", "true", "uname", "wc", "which", "whoami",
    *_ARG_CHECKERS,  # date env file find git rg sed sort tree uniq
})
# fmt: on
"""Programs the shell tool may run while planning (some only with checked arguments)."""

_RUNS_PROGRAMS = "runs other programs"
_INTERPRETER = "is an interpreter that can write files and run programs"
_SHELL_STATE = "changes the shell's state"
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
        ("export", "alias", "unalias", "set", "unset", "declare", "typeset", "local",
         "readonly", "cd"),
        _SHELL_STATE,
    ),
    "source": "runs a script in the current shell",
    ".": "runs a script in the current shell",
    "tee": "writes files",
}
# fmt: on

# --------------------------------------------------------------------- tree walking

_LIST_OPERATORS = {";", "&&", "||", "\n"}
_OUTPUT_REDIRECTIONS = {">", ">>", ">|", "&>", "&>>", ">&"}
_SIMPLE_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-]")
_TILDE = re.compile(r"~[A-Za-z0-9_.-]*|~[+-]")
_PLAIN_PROGRAM = re.compile(r"[A-Za-z0-9_.+-]+|\[")


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

    def command(self, node: Any) -> None:
        words, redirects = [], []
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
        if program in ("echo", "printf") and redirects:
            _deny(f"'{program}' with a redirection is not allowed")
        checker = _ARG_CHECKERS.get(program)
        if checker is not None:
            # First prove bashlex's reading of each argument is what bash will pass, then
            # check those values, then refuse words that bash could still expand into
            # other arguments (braces, globs that may match option-like file names).
            for word in words[1:]:
                self.literal_argument(program, word)
            checker([word.word for word in words[1:]])
            for word in words[1:]:
                self.unexpandable_argument(program, word)

    def expansions(self, word: Any) -> None:
        """Refuse substitutions and non-trivial expansions anywhere in a word."""
        raw = self.text(word)
        if "$'" in raw or '$"' in raw:
            _deny(f"ANSI-C or locale quoting in {raw!r} is not allowed")
        for part in word.parts:
            if part.kind == "commandsubstitution":
                _deny(f"command substitution {self.text(part)!r} is not allowed")
            elif part.kind == "processsubstitution":
                _deny(f"process substitution {self.text(part)!r} is not allowed")
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
        if "/" in name:
            _deny(f"program path '{name}' is not allowed; use the bare program name")
        if name not in READ_ONLY_PROGRAMS:
            why = _WHY_REFUSED.get(name, "is not on the read-only list")
            _deny(f"program '{name}' {why}")
        if raw != name or not _PLAIN_PROGRAM.fullmatch(name):
            _deny(f"program word {raw!r} must be written plainly, without quotes or escapes")
        return name

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
            return
        if kind in _OUTPUT_REDIRECTIONS and is_word:
            if self.text(target) == "/dev/null":
                return
            _deny(
                f"redirection '{shown}' to {self.text(target)!r} is not read-only "
                "(only /dev/null is allowed)"
            )
        _deny(f"redirection '{shown}' is not allowed")

    def literal_argument(self, program: str, word: Any) -> None:
        """Refuse an argument whose value bash could make differ from bashlex's reading."""
        raw = self.text(word)
        if any(part.kind != "tilde" for part in word.parts):
            _deny(f"expansion in argument {raw!r} to '{program}' is not allowed")
        chars = _unquote(raw)
        if chars is None or "".join(c for c, _ in chars) != word.word:
            _deny(f"quoting of argument {raw!r} to '{program}' cannot be checked reliably")

    def unexpandable_argument(self, program: str, word: Any) -> None:
        """Refuse a (literal) argument that brace or glob expansion could turn into options."""
        raw = self.text(word)
        chars = _unquote(raw) or []
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


def check_read_only_command(command: str) -> ShellVerdict:
    """Prove ``command`` read-only by walking its bash syntax tree, or say what is refused."""
    if not command.strip():
        return ShellVerdict(False, "empty command")
    if "\x00" in command:
        return ShellVerdict(False, "command contains a NUL character")
    try:
        trees = bashlex.parse(command)
    except Exception as exc:  # bashlex raises several types; all mean "not understood"
        return ShellVerdict(False, _reason_for_unparsed(command, exc))
    try:
        _walk(command, trees)
    except _Denied as denied:
        return ShellVerdict(False, denied.reason)
    except Exception as exc:  # an AST shape this module does not expect: fail closed
        return ShellVerdict(False, f"could not check command: {exc!r}")
    return ShellVerdict(True, "read-only")


def _walk(command: str, trees: list[Any]) -> None:
    checker = _Checker(command)
    for tree in trees:
        checker.visit(tree)
    checker.whole_text_parsed(trees)


def _reason_for_unparsed(command: str, exc: Exception) -> str:
    """Why an unparsable command is refused.

    It is refused regardless. This only looks for a more telling reason with a lenient
    parse of the command, then of its first line (bashlex cannot read here-documents
    with a quoted delimiter, ``<<'EOF'``, but their first line names what they feed).
    """
    for text in dict.fromkeys((command, command.split("\n", 1)[0])):
        try:
            _walk(text, bashlex.parse(text, strictmode=False))
        except _Denied as denied:
            return f"{denied.reason} (and the command could not be fully parsed)"
        except Exception:
            continue
    return f"could not parse command: {exc}"
