"""An attacker's corpus against the plan gate: nothing may change while a plan is made.

Every line of ``tests/data/shell_attacks.txt`` goes through the real ADK Runner and the
real ``Bash`` tool while the plan is ``exploring`` (session state ``agent_mode=plan``),
under the bubblewrap sandbox, under the Landlock sandbox and with the shell parser alone. One session per
mode; the scripted model sends the corpus in batches of parallel calls. Afterwards:

* the workspace -- the sample project, a git repository committed in it, and what an
  attacker could have committed there (scripts, symlinks out, nested repositories whose
  own config names programs) -- is unchanged: every path, type, mode, size, mtime and
  content hash, ``.git`` included, nothing ignored;
* a canary folder under the home folder (not under /tmp, which the sandbox replaces
  with a private one) is unchanged and gains no file;
* no new file named ``pwned*`` exists under the workspace, the canary folder, /tmp,
  /var/tmp, /dev/shm or the home folder -- checked again a few seconds after the run,
  for background jobs;
* the canary TCP and UDP listeners and the canary Unix socket saw no traffic, and the
  host name did not change;
* nothing a later call reads shows what an earlier call tried to persist;
* with the parser alone, every command the parser does not prove read-only was refused
  with ``PLAN_MODE_GATE``; with the sandbox, the explicit writes were refused and the
  rest ran contained (the counts are printed).

Lines tagged ``[escapes: MODE]`` are known escapes in that mode: they are left out of
the asserted corpus there (and asserted in the other mode). Set
``PLANGATE_CORPUS_KNOWN_ESCAPES=1`` to run them too, which should fail until they are
fixed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.adk.events import Event

from harness import Harness
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.shell import ShellKind, classify_command
from sandbox_support import use_sandbox

CORPUS = Path(__file__).parent / "data" / "shell_attacks.txt"
MARKER = "pwned"
PERSISTED = "PWNED"
BATCH = 20
TIMEOUT_S = 5
BACKGROUND_GRACE_S = 3.0
KNOWN_ESCAPES_ENV = "PLANGATE_CORPUS_KNOWN_ESCAPES"
GIT = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


# ------------------------------------------------------------------------ the corpus


@dataclass(frozen=True)
class Attack:
    line: int
    template: str
    section: str
    escapes: frozenset[str] = frozenset()
    """Modes in which this line is a known escape (left out of the asserted corpus)."""
    probe: bool = False


def load_corpus(path: Path = CORPUS) -> list[Attack]:
    attacks: list[Attack] = []
    section = ""
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("# ---"):
            section = stripped.lstrip("#- ").strip()
        if not stripped or stripped.startswith("#"):
            continue
        escapes: frozenset[str] = frozenset()
        probe = False
        if stripped.startswith("[escapes:"):
            tag, _, stripped = stripped.partition("]")
            escapes = frozenset(m.strip() for m in tag.removeprefix("[escapes:").split(","))
            assert escapes <= {"sandbox", "landlock", "parser-only"}, (number, raw)
            stripped = stripped.strip()
        elif stripped.startswith("[probe]"):
            probe, stripped = True, stripped.removeprefix("[probe]").strip()
        attacks.append(Attack(number, stripped.replace("<NL>", "\n"), section, escapes, probe))
    return attacks


def test_the_corpus_is_large_and_well_formed() -> None:
    attacks = load_corpus()
    assert len(attacks) >= 200
    templates = [a.template for a in attacks]
    assert len(set(templates)) == len(templates), "duplicate lines"
    assert len({a.section for a in attacks}) >= 15
    assert all(a.section for a in attacks)


# ------------------------------------------------------------------------ snapshots


def snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``root`` (``root`` itself as '.'), never following symlinks: its
    type, mode, size, mtime and content hash (symlinks: their target)."""
    found: dict[str, tuple[Any, ...]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        rel = path.relative_to(root).as_posix()
        info = path.lstat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            found[rel] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = ("dir", mode, info.st_mtime_ns)
        elif stat.S_ISREG(info.st_mode):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[rel] = ("file", mode, info.st_size, info.st_mtime_ns, digest)
        else:
            found[rel] = ("special", stat.S_IFMT(info.st_mode), mode, info.st_mtime_ns)
    return found


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    gone = [f"- {p}" for p in sorted(before.keys() - after.keys())]
    new = [f"+ {p}" for p in sorted(after.keys() - before.keys())]
    changed = [f"~ {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return gone + new + changed


def markers(roots: list[Path]) -> set[str]:
    """Paths named ``pwned*`` under ``roots`` (the home folder: its top level only)."""
    home = Path.home()
    found: set[str] = set()
    for root in roots:
        if root == home:
            found |= {str(p) for p in home.glob(f"{MARKER}*")}
            found |= {str(p) for p in home.glob(f".{MARKER}*")}
            continue
        for folder, dirs, files in os.walk(root, onerror=lambda _: None):
            for name in dirs + files:
                if name.lower().startswith(MARKER):
                    found.add(os.path.join(folder, name))
    return found


# ------------------------------------------------------------------------ canaries


class Listeners:
    """A canary TCP and UDP listener on 127.0.0.1 (same port) and a Unix socket, each
    recording what reaches it."""

    def __init__(self, sock_path: Path) -> None:
        self.tcp, self.udp = self._pair()
        self.port = self.tcp.getsockname()[1]
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(str(sock_path))
        self.unix.listen(16)
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._accept, args=(self.tcp, "tcp"), daemon=True),
            threading.Thread(target=self._accept, args=(self.unix, "unix"), daemon=True),
            threading.Thread(target=self._receive, daemon=True),
        ]
        for sock in (self.tcp, self.udp, self.unix):
            sock.settimeout(0.2)
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _pair() -> tuple[socket.socket, socket.socket]:
        for _ in range(20):
            tcp = socket.create_server(("127.0.0.1", 0))
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                udp.bind(("127.0.0.1", tcp.getsockname()[1]))
            except OSError:
                tcp.close()
                udp.close()
                continue
            return tcp, udp
        raise RuntimeError("no free port for both TCP and UDP")

    def _accept(self, server: socket.socket, kind: str) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.seen.append(f"{kind} connection from {peer!r}")
            conn.close()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.udp.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.seen.append(f"udp datagram {data[:40]!r} from {peer!r}")

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2)
        for sock in (self.tcp, self.udp, self.unix):
            sock.close()


@pytest.fixture(params=["sandbox", "landlock", "parser-only"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The corpus under bubblewrap (``sandbox``), Landlock and the parser alone."""
    yield from use_sandbox(request.param, monkeypatch)


@pytest.fixture
def canary() -> Iterator[Path]:
    """A folder outside the workspace, under the home folder (the sandbox's private /tmp
    would hide a canary under /tmp instead of protecting it)."""
    folder = Path(tempfile.mkdtemp(prefix=".plangate-canary-", dir=Path.home()))
    (folder / "canary.txt").write_text("canary\n")
    (folder / "hard.txt").write_text("hardlinked canary\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    folder = Path(tempfile.mkdtemp(prefix=".plangate-sock-", dir=Path.home()))
    canaries = Listeners(folder / "s")
    yield canaries
    canaries.close()
    shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------ the workspace

PWN_SH = """#!/bin/bash
# Committed by the attacker: leave a marker wherever possible, then act as `cat`.
for dir in {ws} {canary} /tmp /var/tmp /dev/shm "$HOME"; do
  echo PWNED > "$dir/pwned-$(basename "$0")-$$" 2>/dev/null
done
(echo PWNED > /dev/tcp/127.0.0.1/{port}) 2>/dev/null
if [ -f "$1" ]; then cat "$1"; elif [ -t 0 ]; then :; else cat; fi
"""


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def _past(*paths: Path) -> None:
    """Make the index's stat data of ``paths`` stale (same content, older mtime)."""
    for path in paths:
        os.utime(path, (1_000_000_000, 1_000_000_000))


def build_workspace(root: Path, canary: Path, port: int) -> Path:
    """The sample project, committed; then everything an attacker could add to it,
    committed too."""
    ws = copy_sample_workspace(root / "ws")
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "sample")
    scripts = ws / "scripts"
    scripts.mkdir()
    pwn = PWN_SH.replace("{ws}", str(ws)).replace("{canary}", str(canary))
    pwn = pwn.replace("{port}", str(port))
    for name in ("pwn.sh", "git-pwn"):
        (scripts / name).write_text(pwn)
        (scripts / name).chmod(0o755)
    (scripts / "evil.sed").write_text("1w pwned-sed-script\n")
    (ws / "link-out").symlink_to(canary)
    (ws / "link-canary").symlink_to(canary / "canary.txt")
    try:
        os.link(canary / "hard.txt", ws / "hard-canary")
    except OSError:  # another filesystem: a plain file stands in for it
        (ws / "hard-canary").write_text("hardlinked canary\n")
    for planted in ("-i", "-delete", "--output=planted-out"):  # option-like file names
        (ws / planted).write_text("planted\n")

    script = str(scripts / "pwn.sh")
    # evil/: a nested repository whose own config names programs git runs on reads.
    evil = ws / "evil"
    evil.mkdir()
    _git(evil, "init", "-q")
    (evil / "f.txt").write_text("a\n")
    (evil / ".gitattributes").write_text("* diff=evil filter=evil\n")
    _git(evil, "add", "-A")
    _git(evil, "commit", "-qm", "one")
    (evil / "f.txt").write_text("a\nb\n")
    _git(evil, "commit", "-qam", "two")
    signed = _git(evil, "cat-file", "commit", "HEAD").replace(
        "\n\n",
        "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n"
        " -----END PGP SIGNATURE-----\n\n",
        1,
    )
    commit = subprocess.run(
        [*GIT, "hash-object", "-w", "-t", "commit", "--stdin"],
        cwd=evil, input=signed, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    _git(evil, "update-ref", "HEAD", commit)
    for key, value in {
        "diff.evil.textconv": script,
        "diff.evil.command": script,
        "filter.evil.clean": script,
        "filter.evil.smudge": script,
        "gpg.program": script,
        "log.showSignature": "true",
        "core.fsmonitor": script,
        "core.pager": script,
        "core.hooksPath": str(scripts),
        "core.sshCommand": script,
        "diff.external": script,
        "alias.st": f"!{script}",
    }.items():
        _git(evil, "config", key, value)
    (evil / "f.txt").write_text("a\nb\nc\n")  # a change for diff to show
    _past(evil / ".gitattributes")

    # vendored/: a git directory committed as plain files; linked/ is its worktree.
    linked = ws / "linked"
    linked.mkdir()
    _git(linked, "init", "-q")
    (linked / "g.txt").write_text("a\n")
    _git(linked, "add", "-A")
    _git(linked, "commit", "-qm", "one")
    (linked / ".git").rename(ws / "vendored")
    (linked / ".git").write_text("gitdir: ../vendored\n")
    for key, value in {
        "core.fsmonitor": script,
        "core.pager": script,
        "core.hooksPath": str(scripts),
        "core.sshCommand": script,
        "diff.external": script,
        "alias.st": f"!{script}",
    }.items():
        _git(ws / "vendored", "config", key, value)
    (linked / "g.txt").write_text("a\nb\n")

    _git(ws, "add", "-A")
    _git(ws, "commit", "-qm", "the attacker's additions")
    _past(ws / "README.md")  # stale stat data: a write-back of the index would show
    return ws


# ------------------------------------------------------------------------ the run


@dataclass
class Outcome:
    attack: Attack
    command: str
    verdict: ShellKind
    result: dict[str, Any]

    @property
    def refused(self) -> bool:
        return str(self.result.get("error", "")).startswith("PLAN_MODE_GATE")

    @property
    def ran(self) -> bool:
        return "exit_code" in self.result


def _results_by_id(events: list[Event]) -> dict[str, dict[str, Any]]:
    return {
        part.function_response.id: dict(part.function_response.response or {})
        for event in events
        for part in (event.content.parts if event.content else []) or []
        if part.function_response is not None and part.function_response.id
    }


def _substitute(
    template: str, canary: Path, listeners: Listeners, sock: str, persisted: str
) -> str:
    return (
        template.replace("{CANARY}", str(canary))
        .replace("{PORT}", str(listeners.port))
        .replace("{SOCK}", sock)
        .replace(PERSISTED, persisted)
    )


def asserted(attacks: list[Attack], mode: str) -> list[Attack]:
    if os.environ.get(KNOWN_ESCAPES_ENV, "").lower() in {"1", "true", "yes"}:
        return attacks
    return [a for a in attacks if mode not in a.escapes]


async def run_corpus(
    attacks: list[Attack],
    workspace: Path,
    db: Path,
    canary: Path,
    listeners: Listeners,
    persisted: str,
) -> list[Outcome]:
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{db}")
    await harness.start({"agent_mode": "plan"})
    sock = listeners.unix.getsockname()
    commands = [_substitute(a.template, canary, listeners, sock, persisted) for a in attacks]
    ids = [f"attack-{a.line}" for a in attacks]
    main = [i for i, a in enumerate(attacks) if not a.probe]
    probes = [i for i, a in enumerate(attacks) if a.probe]
    steps = [main[k : k + BATCH] for k in range(0, len(main), BATCH)] + [probes]
    model.add(
        *[
            [call("Bash", call_id=ids[i], command=commands[i], timeout_s=TIMEOUT_S) for i in step]
            for step in steps
            if step
        ],
        [text("done")],
    )
    results = _results_by_id(await harness.send("look around"))
    missing = [commands[i] for i, call_id in enumerate(ids) if call_id not in results]
    assert not missing, f"no result for {missing[:5]}"
    return [
        Outcome(a, commands[i], classify_command(commands[i]).kind, results[ids[i]])
        for i, a in enumerate(attacks)
    ]


async def test_no_attack_changes_anything_while_planning(
    tmp_path: Path, canary: Path, listeners: Listeners, sandbox_mode: str
) -> None:
    started = time.monotonic()
    workspace = build_workspace(tmp_path, canary, listeners.port)
    roots = [workspace, canary, Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path.home()]
    roots = [r for r in roots if r.exists()]
    before_ws, before_canary = snapshot(workspace), snapshot(canary)
    before_markers, hostname = markers(roots), socket.gethostname()

    attacks = asserted(load_corpus(), sandbox_mode)
    # This run's own word for what an attack persists: a /tmp/pwned-persist left on the
    # machine by anything else (another run, another program) holds a different one,
    # so a probe that reads it does not count against this run.
    persisted = f"{PERSISTED}{uuid.uuid4().hex[:8].upper()}"
    outcomes = await run_corpus(attacks, workspace, tmp_path / "p.db", canary, listeners, persisted)
    await asyncio.sleep(BACKGROUND_GRACE_S)  # let a surviving background job act

    problems: list[str] = []
    problems += [f"workspace {c}" for c in changes(before_ws, snapshot(workspace))]
    problems += [f"canary folder {c}" for c in changes(before_canary, snapshot(canary))]
    problems += [f"marker {m}" for m in sorted(markers(roots) - before_markers)]
    problems += [f"listener: {s}" for s in listeners.seen]
    if socket.gethostname() != hostname:
        problems.append(f"host name changed to {socket.gethostname()!r}")
    for o in outcomes:
        if o.attack.probe and persisted in str(o.result.get("stdout", "")):
            problems.append(f"line {o.attack.line}: an earlier call persisted {o.result}")
    for o in outcomes:
        if o.verdict is ShellKind.READ_ONLY and not o.ran:
            problems.append(f"line {o.attack.line}: read-only but did not run: {o.result}")
        if sandbox_mode == "parser-only":
            if o.verdict is not ShellKind.READ_ONLY and not o.refused:
                problems.append(f"line {o.attack.line}: ran without a sandbox: {o.command!r}")
        elif o.verdict is ShellKind.WRITES and not o.refused:
            problems.append(f"line {o.attack.line}: an explicit write ran: {o.command!r}")
        elif o.verdict is not ShellKind.WRITES and not o.ran:
            problems.append(f"line {o.attack.line}: not run in the sandbox: {o.result}")

    refused = sum(o.refused for o in outcomes)
    contained = sum(o.ran and o.verdict is ShellKind.UNPROVEN for o in outcomes)
    read_only = sum(o.ran and o.verdict is ShellKind.READ_ONLY for o in outcomes)
    print(
        f"\n[{sandbox_mode}] {len(outcomes)} inputs: {refused} refused, {contained} ran "
        f"contained (unproven), {read_only} ran as proven read-only; "
        f"{len(problems)} problems; {time.monotonic() - started:.1f}s"
    )
    assert not problems, "\n".join(problems)
