"""The macOS Seatbelt profile generated from the authority: its text, read here (it can
only run on macOS). Its regular expressions are checked against paths with Python's
``re``, which reads the subset the generator writes the same way."""

from __future__ import annotations

import re
from pathlib import Path

from plangate.plan.scope import Scope
from plangate.policy.authority import Authority
from plangate.sandbox.seatbelt import seatbelt_profile

WS = Path("/Users/me/project")


def _balanced(profile: str) -> bool:
    depth, quoted, escaped = 0, False, False
    for char in profile:
        if quoted:
            quoted = escaped or char != '"'
            escaped = not escaped and char == "\\"
        elif char == '"':
            quoted = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and not quoted


def _regexes(profile: str) -> list[re.Pattern[str]]:
    found = re.findall(r'\(regex "((?:[^"\\]|\\.)*)"\)', profile)
    return [re.compile(text.replace('\\"', '"').replace("\\\\", "\\")) for text in found]


def test_planning_writes_nothing_but_its_temp_folder_and_has_no_network() -> None:
    profile = seatbelt_profile(Authority(planning=True), WS, network=True)
    assert _balanced(profile)
    assert profile.startswith("(version 1)\n(deny default)\n")
    writes = [line for line in profile.splitlines() if line.startswith("(allow file-write*")]
    assert writes == ['(allow file-write* (subpath (param "TMPDIR")) (literal "/dev/null"))']
    assert "network" not in profile.replace(";;", "").split("(deny file-write*")[0].lower()


def test_acting_writes_the_workspace_but_never_git_or_plangate() -> None:
    db = Path("/Users/me/.plangate/plangate.db")
    profile = seatbelt_profile(Authority(planning=False, protected_files=(db,)), WS)
    assert _balanced(profile)
    assert f'(allow file-write* (subpath "{WS}"))' in profile
    assert "(allow network-outbound)" not in profile
    (git,) = _regexes(profile)
    for protected in (".git", ".git/config", ".git/hooks/pre-commit", "vendor/lib/.git/config"):
        assert git.search(f"{WS}/{protected}"), protected
    for free in (".github/workflows/ci.yml", "src/git.py", "a.gitignore"):
        assert not git.search(f"{WS}/{free}"), free
    assert f'(subpath "{WS}/.plangate")' in profile
    # Denials come last: in SBPL the last matching rule decides.
    assert profile.index("(deny file-write*") > profile.index("(allow file-write*")
    hidden = profile.splitlines()[-1]
    assert hidden.startswith("(deny file-read* file-write*")
    for path in (db, f"{db}-wal", f"{db}-shm"):
        assert f'"{path}"' in hidden


def test_a_scope_writes_only_what_it_names() -> None:
    scope = Scope(write=("NOTES.md", "src/payments/**", "docs/*.md"), network=True)
    profile = seatbelt_profile(Authority(planning=False, scope=scope), WS, network=True)
    assert _balanced(profile)
    assert f'(subpath "{WS}")' not in profile.split("(deny")[0]
    assert f'(subpath "{WS}/NOTES.md")' in profile
    assert f'(subpath "{WS}/src/payments")' in profile
    docs = _regexes(profile)[0]
    assert docs.search(f"{WS}/docs/a.md") and not docs.search(f"{WS}/docs/sub/a.md")
    assert not docs.search(f"{WS}/docs/a.mdx")
    assert "(allow network-outbound)" in profile
    nothing = seatbelt_profile(Authority(planning=False, scope=Scope(commands=("pytest",))), WS)
    assert f'(subpath "{WS}")' not in nothing.split("(deny")[0]


def test_paths_are_quoted() -> None:
    odd = Path('/Users/me/a "quoted" \\ folder')
    profile = seatbelt_profile(Authority(planning=False), odd)
    assert _balanced(profile)
    assert '(subpath "/Users/me/a \\"quoted\\" \\\\ folder"))' in profile
