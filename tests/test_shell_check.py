"""The shell check: parser-proven read-only allowlist, explicit writes, fail closed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from plangate.policy.shell import (
    READ_ONLY_PROGRAMS,
    ShellKind,
    ShellVerdict,
    check_read_only_command,
    classify_command,
)

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
    # quoted or absolute program names, echo to /dev/null, cd, counted option values
    "'ls' -la",
    '"ls"',
    "\\ls",
    "/bin/ls",
    "/usr/bin/ls -la",
    "/usr/local/bin/jq . f",
    "'/usr/bin/git' status",
    "echo hi 2>/dev/null",
    "echo hi >&2",
    "printf '%s\\n' a b >/dev/null 2>&1",
    "printf -- -v",
    "cd inventory && ls",
    "cd",
    "cd -P /tmp && pwd",
    "git ls-files -o",
    "uniq -f 1 file",
    "uniq --skip-fields 2 -s 3 in",
    "[ 1 -eq 2 ] || [ -f README.md ]",
    "test -n x -a -1 -le +2",
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
    ("echo hi 2>out", "redirection '2>' to 'out'"),
    ("echo hi < f", "'echo' with the redirection '< f'"),
    ('ls > "/dev/null"', "redirection '>'"),
    # here-documents and here-strings
    ("cat <<EOF > f\nx\nEOF", "redirection '>' to 'f' writes a file"),
    ("cat <<EOF\nx\nEOF", "here-document '<<'"),
    ("cat <<-EOF\n\tx\n\tEOF", "here-document '<<-'"),
    ("cat <<'EOF' > f\nx\nEOF", "redirection '>' to 'f' writes a file"),
    ("cat <<'EOF'\nx\nEOF", "here-document '<<'"),
    ("cat <<< hi", "here-string '<<<'"),
    ("python - <<'PY'\nopen('f','w').write('x')\nPY", "program 'python'"),
    # writers, interpreters, wrappers
    ("cat a | tee b", "program 'tee'"),
    ("python3 -c \"open('f','w').write('x')\"", "program 'python3'"),
    ("node -e \"require('fs').writeFileSync('f','x')\"", "program 'node'"),
    ("perl -e 'unlink \"f\"'", "program 'perl'"),
    ("awk '{print > \"f\"}' a", "program 'awk'"),
    ("ls | xargs rm", "program 'rm' removes files (in 'xargs rm')"),
    ("ls | xargs wc -l", "program 'xargs'"),
    ('bash -c "rm x"', "program 'rm' removes files (in 'rm x', inside 'bash -c \"rm x\"')"),
    ('bash -c "ls"', "program 'bash'"),
    ("sh -c 'ls'", "program 'sh'"),
    ("eval rm x", "program 'rm' removes files (in 'rm x', inside 'eval rm x')"),
    ("eval ls", "program 'eval'"),
    ("exec ls", "program 'exec'"),
    ("source script.sh", "program 'source'"),
    (". script.sh", "program '.'"),
    ("timeout 5 ls", "program 'timeout'"),
    ("nohup ls", "program 'nohup'"),
    ("command ls", "program 'command'"),
    ("sudo ls", "program 'sudo'"),
    ("export X=1", "program 'export'"),
    ("time ls", "could not parse"),
    ("env rm x", "program 'rm' removes files (in 'env rm x')"),
    ("env X=1 rm x", "program 'rm' removes files (in 'env X=1 rm x')"),
    ("env X=1 ls", "'env' with arguments"),
    # plain programs that change things
    ("rm -rf /", "program 'rm' removes files"),
    ("make", "program 'make' is not on the read-only list"),
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
    ("ls & rm x", "program 'rm'"),
    ("ls & pwd", "background operator '&'"),
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
    ("'l'$'s'", "ANSI-C or locale quoting"),
    ("l\\s\\ x", "program 'ls x' is not on the read-only list"),
    ("$CMD", "expansion in program position '$CMD'"),
    ("${X} a", "expansion in program position '${X}'"),
    ("/bin/rm x", "program 'rm' removes files (in '/bin/rm x')"),
    ("/tmp/ls", "program path '/tmp/ls'"),
    ("/usr//bin/ls", "program path '/usr//bin/ls'"),
    ("/usr/bin/../bin/ls", "program path '/usr/bin/../bin/ls'"),
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
    ("sort -o $OUT in", "sort option '-o' writes a file"),
    ("sort -k $K in", "expansion in argument '$K' to 'sort'"),
    ("sort $OPTS in", "expansion in argument '$OPTS' to 'sort'"),
    # constructs not understood
    ("f() { rm x; }", "program 'rm' removes files"),
    ("f() { ls; }", "function definition"),
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


# ------------------------------------------------------------------ three verdicts


@pytest.mark.parametrize("command", ALLOWED)
def test_proven_commands_are_read_only_without_a_hint(command: str) -> None:
    verdict = classify_command(command)
    assert verdict.kind is ShellKind.READ_ONLY and verdict.allowed and verdict.hint == ""


@pytest.mark.parametrize(("command", "refused_part"), DENIED)
def test_refused_commands_are_never_read_only_and_say_what_to_do(
    command: str, refused_part: str
) -> None:
    verdict = classify_command(command)
    assert verdict.kind is not ShellKind.READ_ONLY
    assert verdict.allowed is False
    if command.strip():
        assert verdict.hint, verdict


HARMLESS = [
    ("cd inventory && ls", ShellKind.READ_ONLY),
    ("for f in *.md; do wc -l $f; done", ShellKind.UNPROVEN),
    ("ls | xargs wc -l", ShellKind.UNPROVEN),
    ("awk '{print $1}' README.md", ShellKind.UNPROVEN),
    ("'ls' -la", ShellKind.READ_ONLY),
    ("/bin/ls", ShellKind.READ_ONLY),
    ("echo hi 2>/dev/null", ShellKind.READ_ONLY),
    ("git ls-files -o", ShellKind.READ_ONLY),
    ("uniq -f 1 file", ShellKind.READ_ONLY),
    ("python -m pytest -q", ShellKind.UNPROVEN),
    ("make -n", ShellKind.UNPROVEN),
    ("cat README.md | head -5", ShellKind.READ_ONLY),
]


@pytest.mark.parametrize(("command", "kind"), HARMLESS)
def test_harmless_commands_a_model_uses_are_never_writes(command: str, kind: ShellKind) -> None:
    verdict = classify_command(command)
    assert verdict.kind is not ShellKind.WRITES, verdict.reason
    assert verdict.kind is kind, verdict.reason


# fmt: off
GIT_WRITING = (
    "commit -m x", "add .", "rm f", "mv a b", "reset --hard", "checkout main",
    "switch -c topic", "restore f", "merge topic", "rebase main", "cherry-pick abc",
    "revert abc", "init", "am patch.mbox", "gc", "prune", "update-index --refresh",
)
NETWORK_CLIENTS = ("curl", "wget", "ssh", "scp", "nc", "ncat", "telnet", "ftp")
# fmt: on

WRITES = [
    # redirections
    ("echo hi > out.txt", "redirection '>' to 'out.txt' writes a file"),
    ("ls >> log.txt", "redirection '>>' to 'log.txt' writes a file"),
    ("make 2> err.log", "redirection '2>' to 'err.log' writes a file"),
    ("ls &> all.log", "redirection '&>' to 'all.log' writes a file"),
    ("ls >| f", "redirection '>|' to 'f' writes a file"),
    ('ls > "$OUT"', "redirection '>' to '\"$OUT\"' writes a file"),
    ("cat a <> b", "redirection '<>' to 'b' opens a file for writing"),
    ("cat <<'EOF' > notes.md\n# notes\nEOF", "redirection '>' to 'notes.md' writes a file"),
    ("cat < /dev/tcp/example.com/80", "redirection '<' from '/dev/tcp/example.com/80' opens"),
    ("echo x > /dev/udp/10.0.0.1/53", "redirection '>' to '/dev/udp/10.0.0.1/53' opens"),
    # programs that change files
    ("rm -rf build", "program 'rm' removes files (in 'rm -rf build')"),
    ("rmdir empty", "program 'rmdir' removes directories"),
    ("unlink f", "program 'unlink'"),
    ("mv a b", "program 'mv' moves files"),
    ("cp -r a b", "program 'cp' copies files"),
    ("ln -s a b", "program 'ln' creates links"),
    ("touch f", "program 'touch' creates or updates files"),
    ("mkdir -p a/b", "program 'mkdir' creates directories"),
    ("chmod +x f", "program 'chmod'"),
    ("chown me f", "program 'chown'"),
    ("chgrp us f", "program 'chgrp'"),
    ("truncate -s 0 f", "program 'truncate'"),
    ("dd if=a of=b", "program 'dd'"),
    ("ls | tee listing.txt", "program 'tee' writes files (in 'tee listing.txt')"),
    ("install -m 755 a /usr/local/bin/a", "program 'install'"),
    ("shred f", "program 'shred'"),
    ("patch -p1 < fix.diff", "program 'patch' changes files"),
    # checked programs with a writing option
    ("sed -i s/a/b/ f", "sed option '-i' edits files in place (in 'sed -i s/a/b/ f')"),
    ("sed -n -i.bak p f", "sed option '-i' (in '-i.bak') edits files in place"),
    ("sed --in-place=.bak s/a/b/ f", "sed option '--in-place=.bak' edits files in place"),
    ("sed -f script.sed -i f", "sed option '-i' edits files in place"),
    ("sed -n 'w out' f", "sed command 'w'"),
    ("sed 's/a/b/w out' f", "sed 's' flag 'w'"),
    ("find . -delete", "find action '-delete' deletes files"),
    ("find . -name '*.pyc' -exec rm {} +", "find action '-exec' runs a program"),
    ("find . -execdir rm {} \\;", "find action '-execdir'"),
    ("find . -ok rm {} \\;", "find action '-ok'"),
    ("find . -okdir rm {} \\;", "find action '-okdir'"),
    ("find . -fprint out", "find action '-fprint' writes a file"),
    ("find . -fprint0 out", "find action '-fprint0'"),
    ("find . -fprintf out %p", "find action '-fprintf'"),
    ("find . -fls out", "find action '-fls'"),
    ("sort -o sorted.txt in", "sort option '-o' writes a file"),
    ("sort --output=sorted.txt in", "sort option '--output=sorted.txt' writes a file"),
    ("sort -T /tmp -o out in", "sort option '-o' writes a file"),
    ("tree -o tree.txt", "tree option '-o' writes a file"),
    ("uniq in out", "uniq with a second file operand 'out' writes its output"),
    ("date -s 12:00", "date option '-s' sets the system clock"),
    ("file -C -m magic", "file option '-C'"),
    # git
    *((f"git {sub}", f"git subcommand '{sub.split()[0]}'") for sub in GIT_WRITING),
    ("git push origin main", "git subcommand 'push' reaches the network"),
    ("git pull", "git subcommand 'pull' reaches the network"),
    ("git fetch", "git subcommand 'fetch' reaches the network"),
    ("git clone https://example.com/r.git", "git subcommand 'clone' reaches the network"),
    ("git -C ../other commit -am x", "git subcommand 'commit'"),
    ("git --no-pager -c user.name=x commit", "git subcommand 'commit'"),
    ("git stash", "git stash changes the repository"),
    ("git stash pop", "git stash 'pop' changes the repository"),
    ("git tag v1.0", "git tag argument 'v1.0' creates a tag"),
    ("git tag -d v1.0", "git tag argument '-d'"),
    ("git apply fix.patch", "git apply applies a patch"),
    ("git clean -fd", "git clean removes untracked files"),
    ("git config user.name me", "git config with a value ('user.name me')"),
    ("git config --unset user.name", "git config option '--unset'"),
    ("git config set user.name me", "git config 'set'"),
    ("git worktree add ../wt", "git worktree 'add'"),
    ("git submodule update --init", "git submodule 'update'"),
    ("git branch -d topic", "git branch argument '-d'"),
    ("git branch -D topic", "git branch argument '-D'"),
    ("git branch -m old new", "git branch argument '-m'"),
    ("git branch -c old new", "git branch argument '-c'"),
    ("git branch --delete topic", "git branch argument '--delete'"),
    ("git branch topic", "git branch argument 'topic' creates a branch"),
    ("git diff --output=d.patch", "git option '--output=d.patch' writes a file"),
    # packages
    ("pip install requests", "'pip install' installs or removes packages"),
    ("pip3 uninstall -y requests", "'pip uninstall'"),
    ("python -m pip install requests", "'python -m pip install'"),
    ("python3 -m pip install -e .", "'python -m pip install'"),
    ("uv add httpx", "'uv add'"),
    ("uv pip install httpx", "'uv pip install'"),
    ("npm install", "'npm install'"),
    ("npm i left-pad", "'npm i'"),
    ("pnpm add x", "'pnpm add'"),
    ("yarn add x", "'yarn add'"),
    ("yarn remove x", "'yarn remove'"),
    ("apt install -y jq", "'apt install'"),
    ("apt-get install -y jq", "'apt-get install'"),
    ("gem install rails", "'gem install'"),
    ("cargo install ripgrep", "'cargo install'"),
    # network
    *((f"{p} x", f"program '{p}' reaches the network") for p in NETWORK_CLIENTS),
    ("rsync -a src/ host:dst/", "program 'rsync'"),
    # privileges and processes
    ("sudo ls", "program 'sudo' runs commands as another user"),
    ("su -", "program 'su'"),
    ("doas ls", "program 'doas'"),
    ("kill 1234", "program 'kill' signals processes"),
    ("pkill python", "program 'pkill'"),
    ("killall python", "program 'killall'"),
    ("reboot", "program 'reboot'"),
    ("shutdown -h now", "program 'shutdown'"),
    ("systemctl restart nginx", "program 'systemctl'"),
    ("crontab -r", "program 'crontab'"),
    # anywhere in the command
    ("ls && rm x", "program 'rm'"),
    ("ls; git status; git commit -am x", "git subcommand 'commit'"),
    ("cat a | sort | tee b | wc -l", "program 'tee'"),
    ("(cd build && rm -rf out)", "program 'rm' removes files (in 'rm -rf out')"),
    ("{ ls; touch x; }", "program 'touch'"),
    ("echo $(rm x)", "program 'rm' removes files (in 'rm x', inside command substitution"),
    ("x=`touch f`", "program 'touch' creates or updates files (in 'touch f', inside command"),
    ("diff <(curl -s x) a", "program 'curl' reaches the network (in 'curl -s x', inside process"),
    ("for f in *.md; do rm $f; done", "program 'rm' removes files (in 'rm $f')"),
    ("if true; then mkdir out; fi", "program 'mkdir'"),
    ("while read l; do echo $l >> out; done < in", "redirection '>>' to 'out'"),
    ("f() { rm -rf x; }; f", "program 'rm'"),
    ("bash -c 'pip install x'", "'pip install' installs or removes packages"),
    ("sh -ec 'echo x > f'", "redirection '>' to 'f' writes a file (in \"sh -ec 'echo x > f'\")"),
    ("eval 'git push'", "git subcommand 'push'"),
    ("ls | xargs -n 1 -I{} cp {} /tmp", "program 'cp' copies files (in 'xargs -n 1 -I{} cp"),
    ("env -i PATH=/bin rm x", "program 'rm' removes files (in 'env -i PATH=/bin rm x')"),
    ("timeout -s KILL 5 rm x", "program 'rm' removes files (in 'timeout -s KILL 5 rm x')"),
    ("nice -n 10 rm x", "program 'rm'"),
    ("nohup curl x", "program 'curl'"),
    ("command rm x", "program 'rm'"),
    ("X=1 rm x", "program 'rm'"),
    ("/usr/bin/rm x", "program 'rm'"),
    ('"r"m x', "program 'rm'"),
    ("\\rm x", "program 'rm'"),
]


@pytest.mark.parametrize(("command", "part"), WRITES)
def test_explicit_writes_are_writes_and_name_the_part(command: str, part: str) -> None:
    verdict = classify_command(command)
    assert verdict.kind is ShellKind.WRITES, verdict
    assert verdict.allowed is False
    assert part in verdict.reason, verdict.reason
    assert "plan" in verdict.hint and "approved" in verdict.hint


UNPROVEN = [
    # not provable, but nothing in the text writes: the read-only sandbox contains them
    ("ls | xargs -n 1 wc -l", "program 'xargs' runs other programs"),
    ("python script.py", "program 'python' is an interpreter"),
    ("python -m pip list", "program 'python'"),
    ("pip show requests", "program 'pip' is not on the read-only list"),
    ("npm run build", "program 'npm'"),
    ("make", "program 'make'"),
    ("cargo build", "program 'cargo'"),
    ("pytest -q tests", "program 'pytest'"),
    ("./run.sh", "program path './run.sh'"),
    ("echo $(date)", "command substitution '$(date)'"),
    ("cat <<EOF\nx\nEOF", "here-document '<<'"),
    ("cat <<< hi", "here-string '<<<'"),
    ("git remote show origin", "git remote may only list"),
    ("git tag --annotate-me", "git tag option"),
    ("git config --get user.name", "git subcommand 'config'"),
    ("git config user.name", "git subcommand 'config'"),
    ("git clean -n", "git subcommand 'clean'"),
    ("git apply --check fix.patch", "git subcommand 'apply'"),
    ("git worktree list", "git subcommand 'worktree'"),
    ("git -c core.pager=less log", "git option '-c'"),
    ("git branch --list 'f*'", "git branch argument 'f*' is not a listing flag"),
    ("command -v rm", "program 'command'"),
    ("sh -c 'ls | wc -l'", "program 'sh'"),
    ("echo hi > /dev/stderr", "redirection '>' to '/dev/stderr'"),
    ("time ls", "could not parse"),
    ("case a in a) rm x;; esac", "could not parse"),
    ("echo 'unterminated > f", "could not parse"),
]


@pytest.mark.parametrize(("command", "why"), UNPROVEN)
def test_unprovable_commands_without_a_write_are_unproven(command: str, why: str) -> None:
    verdict = classify_command(command)
    assert verdict.kind is ShellKind.UNPROVEN, verdict
    assert verdict.allowed is False
    assert why in verdict.reason, verdict.reason
    assert "sandbox" in verdict.hint


def test_check_read_only_command_is_the_classifier() -> None:
    for command in ("ls", "rm x", "make", "echo $(date)"):
        assert check_read_only_command(command) == classify_command(command)


def test_kinds_are_plain_strings() -> None:
    assert [kind.value for kind in ShellKind] == ["read_only", "unproven", "writes"]
    assert ShellKind("writes") is ShellKind.WRITES


def test_verdict_kind_follows_allowed_unless_given() -> None:
    assert ShellVerdict(True, "read-only").kind is ShellKind.READ_ONLY
    assert ShellVerdict(False, "no").kind is ShellKind.UNPROVEN
    assert ShellVerdict(False, "no", ShellKind.WRITES, "later").hint == "later"
    with pytest.raises(ValueError, match="allowed verdict must be read_only"):
        ShellVerdict(True, "read-only", ShellKind.WRITES)
