"""Parser holes: constructs where bash evaluates a name or arithmetic must never be read-only.

bash evaluates array subscripts (and so runs any ``$(...)`` inside them) wherever it
takes a variable name or, in arithmetic, a number. ``printf -v 'a[$(touch pwned.txt)]'
x`` and ``test -v 'a[$(cmd)]'`` once passed as read-only and ran arbitrary commands.
The parser is the first line; the sandbox is the guarantee. These tests keep every
such construct out of READ_ONLY, and keep the classifier from ever raising.
"""

from __future__ import annotations

import random

import pytest

from plangate.policy.shell import ShellKind, ShellVerdict, classify_command

PWN = "'a[$(touch pwned.txt)]'"

HOLES = [
    # printf -v assigns to a name, evaluating its subscript
    f"printf -v {PWN} x",
    f"printf -va x {PWN}",
    f"printf '-v' {PWN} x",
    f'printf "-v" {PWN} x',
    f"printf -- x; printf -v {PWN} y",
    f"ls -v; printf $_ {PWN} x",  # $_ is the last word of the previous command: -v
    f'printf "$FMT" {PWN} x',
    f"printf ?v {PWN} x",  # a file named -v would match
    f"printf {{-v,x}} {PWN}",
    # test / [ : -v and -R evaluate names; operands with [ or $; integer operands
    f"test -v {PWN}",
    f"[ -v {PWN} ]",
    f"[ ! -v {PWN} ]",
    "test -R ref",
    "[ -R ref ]",
    f"ls -v >/dev/null; [ $_ {PWN} ]",
    f"ls -v; test $_ {PWN}",
    # a variable only where the number of words fixes how test reads it
    '[ "$x" -eq 1 ]',
    '[ -v "$x" ]',
    '[ "$x" = y -o -v z ]',
    '[ "$x" "$y" ]',
    '[ "$x" = -v ]',
    "[ $x = y ]",
    "[ 'a[1]' = b ]",
    "test x = 'a[0]'",
    f"test {PWN} -eq 1",
    "[ x -lt 1 ]",
    "[ 1 -gt y ]",
    "test 1 -ne 0x1",
    "[ 1 -le ]",
    "test -ge 1",
    "[ ?v x ]",
    # [[ ]] evaluates integer operands arithmetically and supports -v
    f"[[ -v {PWN} ]]",
    f"[[ {PWN} -eq 1 ]]",
    "[[ -f x ]]",
    # declarations
    "declare -n ref=x",
    f"declare {PWN}=1",
    "declare x",
    "typeset -i x=1",
    "local x",
    "readonly x",
    "export X",
    f"export {PWN}",
    # builtins that read into or evaluate names
    f"read {PWN}",
    "read x",
    f"mapfile {PWN}",
    "readarray lines",
    f"let {PWN}",
    "let x=1",
    f"(( {PWN[1:-1]} ))",
    "((x = 1))",
    "echo $((1 + 2))",
    'echo "$((x))"',
    "echo $[1 + 2]",
    "ls 'a[$(touch p)]'; echo $[_]",
    "ls 'a[$(touch p)]'; echo $((_))",
    f"unset {PWN}",
    f"getopts a {PWN}",
    "shift",
    "shift 2",
    "eval ls",
    "source script.sh",
    ". script.sh",
    "trap 'touch x' EXIT",
    "enable -n echo",
    "hash -p /bin/sh ls",
    "ulimit -n 10",
    "set -e",
    "shopt -s extglob",
    "builtin printf -v x y",
    "command test -v x",
    # sort: temporary files, helper programs, memory
    "sort -T /tmp a",
    "sort -uT/tmp a",
    "sort --temporary-directory=/tmp a",
    "sort --temporary-directory /tmp a",
    "sort --temp=/tmp a",
    "sort --t /tmp a",
    "sort --compress-program=gzip a",
    "sort --compress=gzip a",
    "sort -S 1G a",
    "sort -S1G a",
    "sort -nS 50% a",
    "sort --buffer-size=1G a",
    # bash opens /dev/tcp and /dev/udp as network connections
    "cat < /dev/tcp/example.com/80",
    "cat < '/dev/tcp/example.com/80'",
    "head < /dev/udp/10.0.0.1/53",
    "ls /dev/tcp/example.com/80; cat < $_",
    "cat < $F",
]


@pytest.mark.parametrize("command", HOLES)
def test_constructs_that_evaluate_names_or_arithmetic_are_never_read_only(command: str) -> None:
    verdict = classify_command(command)
    assert verdict.kind is not ShellKind.READ_ONLY, verdict
    assert verdict.allowed is False
    assert verdict.reason != "read-only"


NEAR_MISSES = [
    # the safe neighbours of the holes stay read-only
    '[ "$x" = y ]',
    '[ -n "$HOME" ]',
    'test -z "${HOME}"',
    "printf '%s\\n' a b",
    "printf -- '-v %s' x",
    "test -f README.md",
    "[ -d src ] && ls src",
    "[ 1 -eq 1 ]",
    "test -n x",
    "sort -k2 -t, -n data.csv",
    "cat < input.txt",
]


@pytest.mark.parametrize("command", NEAR_MISSES)
def test_safe_neighbours_of_the_holes_stay_read_only(command: str) -> None:
    assert classify_command(command).kind is ShellKind.READ_ONLY


# ------------------------------------------------------------------------ robustness

_ALPHABET = "ls rm$(){}[]<>|&;'\"`\\\n\t -=*?!#~%+,./:@^_0123456789abcxyzEOF"
_TOKENS = [
    "ls", "rm", "git", "sed", "find", "printf", "test", "[", "]", "[[", "]]", "((", "))",
    "$(", ")", "`", "${", "}", "<<", "<<'EOF'", "EOF", "<<<", "<>", ">", ">>", "2>&1",
    "&>", "|", "|&", "&&", "||", ";", "&", "\n", "(", "{", "if", "then", "fi", "for",
    "in", "do", "done", "case", "esac", "function", "time", "!", "-v", "-exec", "-i",
    "'a[$(x)]'", '"', "'", "\\", "$_", "$[", "x=1", "/dev/tcp/a/1", "bash", "-c", "eval",
    "xargs", "env", "sudo", "--", "-o", "*", "?", "~", "#",
]  # fmt: skip
_SEEDS = [
    "ls -la",
    "cat README.md | head -5",
    "git log --oneline -5",
    "sed -n 's/a/b/p' f",
    "find . -name '*.py' -exec rm {} \\;",
    "for f in *.md; do wc -l $f; done",
    "printf -v 'a[$(touch p)]' x",
    "cat <<'EOF' > f\nx\nEOF",
    "bash -c 'echo $(rm x) > f'",
]


def _garbage(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.35:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
    if pick < 0.7:
        return " ".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 14)))
    text = list(rng.choice(_SEEDS))
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(text))
        if rng.random() < 0.5 and at < len(text):
            del text[at]
        else:
            text.insert(at, rng.choice(_ALPHABET))
    return "".join(text)


def test_random_garbage_never_raises_and_verdicts_stay_consistent() -> None:
    rng = random.Random(20240607)
    for _ in range(1500):
        command = _garbage(rng)
        verdict = classify_command(command)
        assert isinstance(verdict, ShellVerdict), command
        assert verdict.allowed == (verdict.kind is ShellKind.READ_ONLY), command
        assert verdict.reason, command
        if verdict.kind is ShellKind.READ_ONLY:
            assert verdict.reason == "read-only" and verdict.hint == ""


@pytest.mark.parametrize(
    "command",
    [
        "(" * 400 + "ls" + ")" * 400,
        "$(" * 300 + "rm x" + ")" * 300,
        "{ " * 300 + "ls; " + "}; " * 300,
        "ls | " * 1500 + "ls",
        "eval " * 50 + "rm x",
        "bash -c " * 20 + "'rm x'",
        "\x00",
        "\udcff",
        "ls \u00e9\u4e2d",
    ],
)
def test_pathological_commands_never_raise(command: str) -> None:
    verdict = classify_command(command)
    assert verdict.allowed == (verdict.kind is ShellKind.READ_ONLY)
