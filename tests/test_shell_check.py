"""The shell read-only check: parser-proven allowlist, fail closed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from plangate.policy.shell import READ_ONLY_PROGRAMS, ShellVerdict, check_read_only_command

ALLOWED = [
    "ls -la",
    "cat README.md | head -5",
    "grep -rn foo src | wc -l",
    "find . -name '*.py'",
    "git status",
    "git log --oneline -5",
    "git diff HEAD~1",
    "rg TODO",
    "ls 2>/dev/null",
    "cat a 2>&1 | head",
    "sed -n 1,5p file",
    # beyond the basics
    "ls >/dev/null 2>&1",
    "ls >& /dev/null",
    "cat < input.txt",
    "ls |& head",
    "! grep -q foo a",
    "ls && pwd; whoami || true",
    "(ls src) | sort | uniq -c",
    "{ ls; pwd; }",
    "ls\n# a comment\npwd",
    "ls # trailing comment with $(rm x)",
    "echo $HOME ~/notes",
    "echo 'single $(quoted)'",
    "cat *.md",
    "[ -f README.md ] && cat README.md",
    "test -d src",
    "env",
    "printenv PATH",
    "jq '.name' package.json",
    "stat -c %s a | tr -d ' '",
    "sort -k2 -t, -n data.csv",
    "sort -u a",
    "uniq -c a",
    "date +%Y-%m-%d",
    "date -u -d yesterday +%F",
    "tree -L 2 src",
    "file README.md",
    "find src -type f -newer a -print",
    "rg -n --pre-glob '*.gz' TODO ./src/*.py",
    "sed -n '/start/,/end/p' f",
    "sed -E 's/(a+)/[\\1]/g;$!N;P;D' f",
    "sed -e 1d -e '$d' f",
    "sed --quiet --expression=2p f",
    "sed -n '/x/{p;q}' f",
    "git --no-pager log -p -- '*.py'",
    "git -C ../other status --short",
    "git show HEAD:README.md",
    "git branch -av",
    "git branch --show-current",
    "git rev-parse --abbrev-ref HEAD",
    "git ls-files --others --exclude-standard",
    "git blame -L 1,10 README.md",
    "git grep -n TODO",
    "git log -Sneedle --output-indicator-new=+",
]


@pytest.mark.parametrize("command", ALLOWED)
def test_read_only_commands_are_allowed(command: str) -> None:
    assert check_read_only_command(command) == ShellVerdict(True, "read-only")


DENIED = [
    # redirections that write
    ("echo hi > f", "redirection '>' to 'f'"),
    ("echo hi >> f", "redirection '>>' to 'f'"),
    ("ls 1> f", "redirection '1>' to 'f'"),
    ("ls 2> err.log", "redirection '2>' to 'err.log'"),
    ("ls &> f", "redirection '&>' to 'f'"),
    ("ls &>> f", "redirection '&>>' to 'f'"),
    ("ls >| f", "redirection '>|' to 'f'"),
    ("ls >& f", "redirection '>&' to 'f'"),
    ("ls <> f", "redirection '<>'"),
    ("ls 2>&1 > out", "redirection '>' to 'out'"),
    ("(ls) > f", "redirection '>' to 'f'"),
    ("printf x > f", "redirection '>' to 'f'"),
    ("echo hi 2>/dev/null", "'echo' with a redirection"),
    ('ls > "/dev/null"', "redirection '>'"),
    # here-documents and here-strings
    ("cat <<EOF > f\nx\nEOF", "here-document '<<'"),
    ("cat <<-EOF\n\tx\n\tEOF", "here-document '<<-'"),
    ("cat <<'EOF' > f\nx\nEOF", "here-document '<<'"),
    ("cat <<< hi", "here-string '<<<'"),
    ("python - <<'PY'\nopen('f','w').write('x')\nPY", "program 'python'"),
    # writers, interpreters, wrappers
    ("cat a | tee b", "program 'tee'"),
    ("python3 -c \"open('f','w').write('x')\"", "program 'python3'"),
    ("node -e \"require('fs').writeFileSync('f','x')\"", "program 'node'"),
    ("perl -e 'unlink \"f\"'", "program 'perl'"),
    ("awk '{print > \"f\"}' a", "program 'awk'"),
    ("ls | xargs rm", "program 'xargs'"),
    ('bash -c "rm x"', "program 'bash'"),
    ("sh -c 'ls'", "program 'sh'"),
    ("eval rm x", "program 'eval'"),
    ("exec ls", "program 'exec'"),
    ("source script.sh", "program 'source'"),
    (". script.sh", "program '.'"),
    ("timeout 5 ls", "program 'timeout'"),
    ("nohup ls", "program 'nohup'"),
    ("command ls", "program 'command'"),
    ("sudo ls", "program 'sudo'"),
    ("export X=1", "program 'export'"),
    ("time ls", "could not parse"),
    ("env rm x", "'env' with arguments"),
    ("env X=1 rm x", "'env' with arguments"),
    # plain programs that change things
    ("rm -rf /", "program 'rm' is not on the read-only list"),
    ("mv a b", "program 'mv'"),
    ("cp a b", "program 'cp'"),
    ("touch f", "program 'touch'"),
    ("mkdir d", "program 'mkdir'"),
    ("chmod +x f", "program 'chmod'"),
    # lists, pipelines and subshells are only as good as their worst command
    ("ls; rm x", "program 'rm'"),
    ("ls && rm x", "program 'rm'"),
    ("ls || rm x", "program 'rm'"),
    ("ls\nrm x", "program 'rm'"),
    ("ls | sh", "program 'sh'"),
    ("(rm x)", "program 'rm'"),
    ("{ ls; rm x; }", "program 'rm'"),
    ("ls & rm x", "background operator '&'"),
    # substitutions and expansions
    ("echo $(rm -rf x)", "command substitution '$(rm -rf x)'"),
    ("echo `rm x`", "command substitution '`rm x`'"),
    ('echo "$(rm x)"', "command substitution '$(rm x)'"),
    ("cat <(rm x)", "process substitution '<(rm x)'"),
    ("ls >(rm x)", "process substitution '>(rm x)'"),
    ("cat < $(rm x)", "command substitution '$(rm x)'"),
    ('echo "${x:-$(rm x)}"', "parameter expansion '${x:-$(rm x)}'"),
    ("echo ${a[$(rm x)]}", "parameter expansion '${a[$(rm x)]}'"),
    ("echo $((1 + 2))", "could not parse"),
    ("cat $'/etc/passwd'", "ANSI-C or locale quoting"),
    ("sed $'-\\x69' s/a/b/ f", "ANSI-C or locale quoting"),
    # assignments
    ("X=1 ls", "variable assignment 'X=1'"),
    ("X=1", "variable assignment 'X=1'"),
    # tricks in program position
    ('"r"m x', "program 'rm'"),
    ("\\rm x", "program 'rm'"),
    ('"ls"', "program word '\"ls\"' must be written plainly"),
    ("$CMD", "expansion in program position '$CMD'"),
    ("${X} a", "expansion in program position '${X}'"),
    ("/bin/rm x", "program path '/bin/rm'"),
    ("/bin/ls", "program path '/bin/ls'"),
    ("./ls", "program path './ls'"),
    # git
    ("git commit -m x", "git subcommand 'commit'"),
    ("git push", "git subcommand 'push'"),
    ("git checkout -- a", "git subcommand 'checkout'"),
    ("git mv a b", "git subcommand 'mv'"),
    ("git commit --amend", "git subcommand 'commit'"),
    ("git -c core.pager=x log", "git option '-c'"),
    ("git --exec-path=/tmp status", "git option '--exec-path=/tmp'"),
    ("git diff --output=f", "git option '--output=f'"),
    ("git log --outp=f", "git option '--outp=f'"),
    ("git diff --ext-diff", "git option '--ext-diff'"),
    ("git grep -nOvim TODO", "git grep option '-O'"),
    ("git grep --open-files-in-pager=vim TODO", "git grep option '--open-files-in-pager=vim'"),
    ("git branch -D main", "git branch argument '-D'"),
    ("git branch new-branch", "git branch argument 'new-branch'"),
    ("git", "git without a subcommand"),
    # sed
    ("sed -i s/a/b/ f", "sed option '-i'"),
    ("sed -i.bak s/a/b/ f", "sed option '-i'"),
    ("sed -ni p f", "sed option '-i'"),
    ("sed -n p f -i", "sed option '-i'"),
    ("sed --in-place s/a/b/ f", "sed option '--in-place'"),
    ("sed --in=.bak s/a/b/ f", "sed option '--in=.bak'"),
    ("sed -f script.sed f", "sed option '-f'"),
    ("sed 's/a/b/w out' f", "sed 's' flag 'w'"),
    ("sed 's/a/b/e' f", "sed 's' flag 'e'"),
    ("sed 's/a/b/ w out' f", "unexpected 'w'"),
    ("sed -n 'w out' f", "sed command 'w'"),
    ("sed '1e rm x' f", "sed command 'e'"),
    ("sed 'r /etc/passwd' f", "sed command 'r' is not supported"),
    ("sed -e 's/a/b\\' -e '/w out' f", "sed 's' flag 'w'"),
    ('sed -n "s/x\\/p/;s/y/w f" a', "quoting of argument"),
    ("sed -n p {-i,f}", "unquoted brace in argument '{-i,f}'"),
    ("sed -n p *", "unquoted glob '*'"),
    ("sort -n -*", "unquoted glob '-*'"),
    # find
    ("find . -exec rm {} \\;", "find action '-exec'"),
    ("find . -execdir rm {} +", "find action '-execdir'"),
    ("find . -ok rm {} \\;", "find action '-ok'"),
    ("find . -delete", "find action '-delete'"),
    ("find . -fprint out", "find action '-fprint'"),
    ("find . -fprintf out %p", "find action '-fprintf'"),
    ("find . -fls out", "find action '-fls'"),
    ("find . '-delete'", "find action '-delete'"),
    ("find * -print", "unquoted glob '*'"),
    # other checked programs
    ("sort -o out in", "sort option '-o'"),
    ("sort -uo out in", "sort option '-o'"),
    ("sort --out=f in", "sort option '--out=f'"),
    ("sort --compress-program=sh in", "sort option '--compress-program=sh'"),
    ("rg --pre cat x", "rg option '--pre'"),
    ("rg --pre=cat x", "rg option '--pre=cat'"),
    ("rg --hostname-bin=sh x", "rg option '--hostname-bin=sh'"),
    ("tree -o out", "tree option '-o'"),
    ("tree -R -H . ", "tree option '-R'"),
    ("uniq in out", "uniq with a second file operand"),
    ("uniq -- -in out", "uniq with a second file operand"),
    ("date -s 12:00", "date option '-s'"),
    ("date --set=12:00", "date option '--set=12:00'"),
    ("date 0101000025", "date operand '0101000025'"),
    ("file -C -m magic", "file option '-C'"),
    ("sort -o $OUT in", "expansion in argument '$OUT' to 'sort'"),
    ("sort $OPTS in", "expansion in argument '$OPTS' to 'sort'"),
    # constructs not understood
    ("f() { rm x; }", "function definition"),
    ("if true; then ls; fi", "'if' statements"),
    ("for i in a; do ls; done", "'for' statements"),
    ("while true; do ls; done", "'while' statements"),
    ("((x = 1))", "arithmetic command '(('"),
    ("case a in a) ls;; esac", "could not parse"),
    ("[[ -f x ]]", "could not parse"),
    ("< f", "has no program"),
    ("ls {fd}>f", "redirection '>' to 'f'"),
    # unparsable and empty
    ("ls (", "could not parse"),
    ("echo 'unterminated", "could not parse"),
    ("", "empty command"),
    ("   \n\t ", "empty command"),
    ("ls\x00rm", "NUL"),
]


@pytest.mark.parametrize(("command", "refused_part"), DENIED)
def test_bypasses_are_refused_with_a_reason(command: str, refused_part: str) -> None:
    verdict = check_read_only_command(command)
    assert not verdict.allowed
    assert refused_part in verdict.reason, verdict.reason


def test_empty_command_reason_is_exact() -> None:
    assert check_read_only_command("") == ShellVerdict(False, "empty command")


def test_verdict_is_immutable() -> None:
    verdict = check_read_only_command("ls")
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.allowed = False  # type: ignore[misc]


def test_read_only_programs_exclude_writers_and_runners() -> None:
    assert isinstance(READ_ONLY_PROGRAMS, frozenset)
    assert {"ls", "cat", "grep", "git", "sed", "find", "[", "env"} <= READ_ONLY_PROGRAMS
    for name in ("rm", "tee", "awk", "xargs", "bash", "sh", "python", "python3", "node"):
        assert name not in READ_ONLY_PROGRAMS


def test_every_listed_program_runs_bare() -> None:
    # Checked programs need arguments or none; all of them accept a bare invocation
    # except sed (needs a script) and git (needs a subcommand).
    for name in READ_ONLY_PROGRAMS - {"sed", "git"}:
        assert check_read_only_command(name).allowed, name


def test_module_imports_without_adk() -> None:
    code = textwrap.dedent(
        """
        import sys

        class BlockGoogle:
            def find_spec(self, name, path=None, target=None):
                if name == "google" or name.startswith("google."):
                    raise ImportError("blocked: " + name)
                return None

        sys.meta_path.insert(0, BlockGoogle())
        from plangate.policy.shell import check_read_only_command
        assert check_read_only_command("ls").allowed
        assert not any(m == "google" or m.startswith("google.") for m in sys.modules)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
