"""Real ``plangate serve`` processes: several on one PostgreSQL database, and one whose
client goes away mid-run.

Real processes, real HTTP on 127.0.0.1, the demo model (and a scripted model whose run
waits in a ``sleep`` so it can be caught mid-run). Request loops are bounded in count
and time; nothing leaves the loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from plangate.agent.workspace import copy_sample_workspace
from web_support import LiveReader, run_input, sse_events, user_message

LEASE_SECONDS = 10
URL_LINE = re.compile(r"plangate web UI: (http://127\.0\.0\.1:\d+)/")


class Serve:
    """One ``plangate serve`` process on a free loopback port, in a folder of its own."""

    def __init__(self, cwd: Path, database_url: str, *extra: str) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PLANGATE_RUN_LEASE_SECONDS": str(LEASE_SECONDS)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plangate.cli.main",
                "serve",
                "--port",
                "0",
                "--database-url",
                database_url,
                *extra,
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=(cwd / "stderr.txt").open("w"),
            text=True,
        )
        self.cwd = cwd
        self.url = ""

    def wait_ready(self, timeout: float = 180) -> Serve:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                self.process.wait(10)
                raise AssertionError(f"serve exited {self.process.returncode}: {self.log()}")
            found = URL_LINE.search(line)
            if found:
                self.url = found.group(1)
                # Keep reading stdout so the process never blocks on a full pipe.
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                return self
        raise AssertionError("serve did not print its URL in time")

    def post(self, thread: str, text: str, timeout: float = 120) -> httpx.Response:
        return httpx.post(
            f"{self.url}/api/agent",
            json=run_input(thread, messages=[user_message(text)]),
            timeout=timeout,
        )

    def log(self) -> str:
        return (self.cwd / "stderr.txt").read_text()

    def thread_exists(self, thread: str) -> bool:
        return httpx.get(f"{self.url}/api/threads/{thread}", timeout=30).status_code == 200

    def thread(self, thread: str) -> dict:
        response = httpx.get(f"{self.url}/api/threads/{thread}", timeout=30)
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def stop_all(servers: list[Serve]) -> None:
    """Stop them together: each waits for its own runs and streams to end."""
    with ThreadPoolExecutor(len(servers)) as pool:
        list(pool.map(Serve.stop, servers))


def start_all(servers: list[Serve]) -> list[Serve]:
    with ThreadPoolExecutor(len(servers)) as pool:
        return list(pool.map(lambda s: s.wait_ready(), servers))


def test_fix_12_5_servers_started_together_on_a_fresh_database_all_answer(
    tmp_path: Path, fresh_postgres: str
) -> None:
    """Eight at once (four are started together by the fifty-thread test below)."""
    count = 8
    servers = [Serve(tmp_path / f"s{i}", fresh_postgres) for i in range(count)]
    try:
        start_all(servers)
        with ThreadPoolExecutor(count) as pool:
            responses = list(
                pool.map(lambda pair: pair[1].post(f"first-{pair[0]}", "hello"), enumerate(servers))
            )
        for response in responses:
            assert response.status_code == 200, response.text
            assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED", (
                response.text,
                [server.log() for server in servers],
            )
    finally:
        stop_all(servers)


def _in_bash(server: Serve, thread: str) -> bool:
    if not server.thread_exists(thread):
        return False
    view = server.thread(thread)
    calls = [
        call["function"]["name"]
        for message in view["messages"]
        for call in message.get("toolCalls") or []
    ]
    return view["running"] and "Bash" in calls


def _journal_kinds(server: Serve, thread: str) -> list[str]:
    response = httpx.get(f"{server.url}/api/threads/{thread}/journal", timeout=30)
    assert response.status_code == 200, response.text
    return [entry["kind"] for entry in response.json()["journal"]]


def _fifo_workspace(root: Path) -> tuple[Path, Path, str]:
    """The sample workspace with ``inventory/stock.py`` made a FIFO: the demo's planning
    run reads it with ``grep``, which then waits -- a run caught mid-run for as long as
    the test needs, with no timing involved."""
    workspace = copy_sample_workspace(root)
    target = workspace / "inventory" / "stock.py"
    original = target.read_text()
    target.unlink()
    os.mkfifo(target)
    return workspace, target, original


def _release_fifo(target: Path, original: str) -> None:
    """Let a reader waiting on the FIFO go (end of file) and put the file back."""
    with contextlib.suppress(OSError):  # ENXIO: no reader is waiting
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
    spare = target.with_name("stock.py.new")
    spare.write_text(original)
    os.replace(spare, target)


def _runs_by_thread(reader: LiveReader) -> dict[str, list[list[dict]]]:
    """A server's live stream split into runs per thread; asserts that no thread's runs
    overlap there (one run per thread across every server)."""
    runs: dict[str, list[list[dict]]] = {}
    open_runs: dict[str, list[dict]] = {}
    for item in reader.events:
        thread, event = item["threadId"], item["event"]
        if event["type"] == "RUN_STARTED":
            assert thread not in open_runs, f"two runs at once on {thread}"
            open_runs[thread] = []
        if thread not in open_runs:
            continue  # a change note between runs
        open_runs[thread].append(event)
        if event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
            runs.setdefault(thread, []).append(open_runs.pop(thread))
    return runs


THREADS = 50


def test_fix_12_4_fifty_threads_on_four_servers_one_run_each_live_everywhere_and_a_kill(
    tmp_path: Path, fresh_postgres: str
) -> None:
    """The issue's CI test: 4 `plangate serve` on one PostgreSQL database and the demo
    model; 50 threads driven across them, each with two runs sent at once to two servers
    (one may be refused with 409 while the other runs). Every accepted run's events are
    seen, in order and whole, on every server's live stream; no thread ever has two runs
    at once; every thread's journal is exactly what its accepted runs write. Then a
    server is killed (-9) mid-run: its run is marked interrupted within the lease time
    and the thread goes on on another server."""
    workspace, fifo, original = _fifo_workspace(tmp_path / "workspace")
    servers = [
        Serve(tmp_path / f"s{i}", fresh_postgres, "--workspace", str(workspace)) for i in range(4)
    ]
    readers: list[LiveReader] = []
    try:
        start_all(servers)
        readers = [LiveReader(f"{server.url}/api/live") for server in servers]
        assert all(reader.ready.wait(60) for reader in readers)

        # What a thread's journal holds after 1 and 2 runs, driven one by one.
        reference: dict[int, list[str]] = {}
        for count in (1, 2):
            response = servers[count % 4].post("reference", "hello")
            assert response.status_code == 200, response.text
            reference[count] = _journal_kinds(servers[0], "reference")
        assert len(reference[2]) > len(reference[1]) > 0

        def drive(i: int) -> tuple[str, list[httpx.Response]]:
            thread = f"t{i:02d}"
            pair = [servers[i % 4], servers[(i + 1) % 4]]
            with ThreadPoolExecutor(2) as both:
                return thread, list(both.map(lambda server: server.post(thread, "hello"), pair))

        with ThreadPoolExecutor(8) as pool:
            driven = dict(pool.map(drive, range(THREADS)))
        accepted: dict[str, list[list[dict]]] = {}
        for thread, responses in driven.items():
            for response in responses:
                if response.status_code == 409:
                    assert response.json()["code"] == "RUN_IN_PROGRESS"
                    continue
                assert response.status_code == 200, response.text
                events = sse_events(response.text)
                assert events[-1]["type"] == "RUN_FINISHED", events
                accepted.setdefault(thread, []).append(events)
        assert set(accepted) == set(driven)  # every thread ran at least once
        runs_driven = sum(len(runs) for runs in accepted.values()) + 2  # and the reference

        # Every server saw every run, event for event, and never two at once on a thread.
        for reader in readers:
            reader.wait_for(
                lambda events: (
                    sum(e["event"]["type"] == "RUN_FINISHED" for e in events) >= runs_driven
                ),
                timeout=120,
            )
            seen = _runs_by_thread(reader)
            for thread, runs in accepted.items():
                assert sorted(seen[thread], key=json.dumps) == sorted(runs, key=json.dumps)

        # No journal row lost (nor one too many): each thread holds what its runs write.
        for thread, runs in accepted.items():
            kinds = _journal_kinds(servers[hash(thread) % 4], thread)
            assert kinds == reference[len(runs)], (thread, len(runs), kinds)

        # A run in progress on one server holds its thread on every server, and its live
        # events reach the others as it goes.
        victim, others = servers[0], servers[1:]
        selection = httpx.get(f"{victim.url}/api/info", timeout=30).json()["stateKeys"]
        body = run_input("k1", messages=[user_message("look at the stock code")])
        body["state"] = {selection["selection"]: "plan"}

        def run_on_victim() -> None:
            with contextlib.suppress(httpx.HTTPError):  # cut off by the kill below
                httpx.post(f"{victim.url}/api/agent", json=body, timeout=180)

        background = threading.Thread(target=run_on_victim, daemon=True)
        background.start()
        deadline = time.monotonic() + 90
        while not _in_bash(others[0], "k1"):  # mid-run: grep waits on the FIFO
            assert time.monotonic() < deadline, "the run never reached its grep"
            time.sleep(0.2)
        for server in others:
            refused = server.post("k1", "me too")
            assert refused.status_code == 409, refused.text
            assert refused.json()["code"] == "RUN_IN_PROGRESS"
        for reader in readers[1:]:
            reader.wait_for(
                lambda events: any(
                    e["threadId"] == "k1" and e["event"].get("toolCallName") == "Bash"
                    for e in events
                )
            )

        # The server running it dies: once its lease expires a sweep marks the run
        # interrupted (no request needed), and the thread goes on on another server.
        victim.process.kill()
        victim.process.wait(10)
        killed_at = time.monotonic()
        _release_fifo(fifo, original)
        while "protocol.run.interrupted" not in _journal_kinds(others[1], "k1"):
            # The lease time, then a sweep (every half lease) on one of three servers.
            assert time.monotonic() - killed_at < 3 * LEASE_SECONDS, "never interrupted"
            time.sleep(0.5)
        response = others[0].post("k1", "go on")
        assert response.status_code == 200, response.text
        assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED", response.text
        kinds = _journal_kinds(others[2], "k1")
        assert kinds.count("protocol.run.interrupted") == 1, (
            kinds,
            [server.log()[-2000:] for server in others],
        )
        assert not others[2].thread("k1")["running"]
    finally:
        for reader in readers:
            reader.stop()
        stop_all(servers)


def test_a_run_goes_on_to_its_end_when_its_client_goes_away(tmp_path: Path) -> None:
    """A run belongs to its thread, not to the connection streaming it: a client that
    closes the stream mid-run (a reload, a dropped network) leaves the run to finish, and
    the thread free for the next one, with nothing logged as an error."""
    workspace, fifo, original = _fifo_workspace(tmp_path / "workspace")
    database = f"sqlite:///{tmp_path / 'db' / 'plangate.db'}"
    server = Serve(tmp_path / "s", database, "--workspace", str(workspace))
    try:
        server.wait_ready()
        selection = httpx.get(f"{server.url}/api/info", timeout=30).json()["stateKeys"]
        body = run_input("gone", messages=[user_message("look at the stock code")])
        body["state"] = {selection["selection"]: "plan"}
        with httpx.stream("POST", f"{server.url}/api/agent", json=body, timeout=60) as response:
            assert response.status_code == 200
            deadline = time.monotonic() + 90
            while not _in_bash(server, "gone"):  # mid-run: grep waits on the FIFO
                assert time.monotonic() < deadline, "the run never reached its grep"
                time.sleep(0.2)
        # The stream is closed: the run goes on.
        _release_fifo(fifo, original)
        deadline = time.monotonic() + 90
        while server.thread("gone")["running"]:
            assert time.monotonic() < deadline, "the run never ended"
            time.sleep(0.2)
        kinds = _journal_kinds(server, "gone")
        assert "protocol.run.started" in kinds and "protocol.run.interrupted" not in kinds
        messages = server.thread("gone")["messages"]
        assert messages[-1]["role"] == "assistant", messages[-1]
        again = server.post("gone", "go on")
        assert again.status_code == 200, again.text
        assert sse_events(again.text)[-1]["type"] == "RUN_FINISHED", again.text
        assert "Traceback" not in server.log(), server.log()
    finally:
        _release_fifo(fifo, original)
        server.stop()
