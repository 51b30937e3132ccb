"""Several ``plangate serve`` processes on one PostgreSQL database.

Real processes, real HTTP on 127.0.0.1, the demo model (and a scripted model whose run
waits in a ``sleep`` so it can be caught mid-run). Request loops are bounded in count
and time; nothing leaves the loopback.
"""

from __future__ import annotations

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
import pytest

from web_support import run_input, sse_events, user_message

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


def start_all(servers: list[Serve]) -> list[Serve]:
    with ThreadPoolExecutor(len(servers)) as pool:
        return list(pool.map(lambda s: s.wait_ready(), servers))


@pytest.mark.parametrize("count", [4, 8])
def test_fix_12_5_servers_started_together_on_a_fresh_database_all_answer(
    tmp_path: Path, fresh_postgres: str, count: int
) -> None:
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
        for server in servers:
            server.stop()


def _sleeping_script(path: Path) -> Path:
    path.write_text(
        json.dumps([[{"call": "Bash", "args": {"command": "sleep 60"}}], [{"text": "slept"}]])
    )
    return path


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


def _journal_kinds(data: dict) -> list[str]:
    return [entry["kind"] for entry in data["journal"]]


def test_fix_12_4_one_run_per_thread_across_servers_and_a_killed_server(
    tmp_path: Path, fresh_postgres: str
) -> None:
    script = _sleeping_script(tmp_path / "sleep.json")
    sleeper = Serve(tmp_path / "a", fresh_postgres, "--model", f"script:{script}")
    others = [Serve(tmp_path / f"s{i}", fresh_postgres) for i in range(3)]
    servers = [sleeper, *others]
    try:
        start_all(servers)

        # Threads driven across the servers: each thread's runs land on different ones,
        # and every server reads back the same thread.
        threads = [f"t{i}" for i in range(12)]

        def drive(i: int) -> list[int]:
            first = others[i % 3].post(threads[i], "hello")
            second = others[(i + 1) % 3].post(threads[i], "hello again")
            return [first.status_code, second.status_code]

        with ThreadPoolExecutor(6) as pool:
            codes = list(pool.map(drive, range(len(threads))))
        assert all(code == 200 for pair in codes for code in pair), codes
        for thread in threads:
            views = [server.thread(thread) for server in others]
            assert len({json.dumps(v["messages"], sort_keys=True) for v in views}) == 1
            assert len(views[0]["messages"]) >= 4
            assert not any(v["running"] for v in views)

        # A run in progress on one server holds its thread on every server.
        caught: dict[str, httpx.Response] = {}
        background = threading.Thread(
            target=lambda: caught.setdefault("run", sleeper.post("k1", "sleep", timeout=180)),
            daemon=True,
        )
        background.start()
        deadline = time.monotonic() + 90
        while not _in_bash(others[0], "k1"):  # mid-run: the command is sleeping
            assert time.monotonic() < deadline, "the sleeping run never started"
            time.sleep(0.2)
        for server in others:
            refused = server.post("k1", "me too")
            assert refused.status_code == 409, refused.text
            assert refused.json()["code"] == "RUN_IN_PROGRESS"

        # The server running it dies: its run becomes interrupted once the lease expires,
        # and the thread continues on another server.
        sleeper.process.kill()
        sleeper.process.wait(10)
        deadline = time.monotonic() + 20 * LEASE_SECONDS
        while True:
            response = others[1].post("k1", "hello")
            if response.status_code == 200:
                break
            assert response.status_code == 409, response.text
            assert time.monotonic() < deadline, "the dead server's lease never expired"
            time.sleep(0.5)
        assert sse_events(response.text)[-1]["type"] == "RUN_FINISHED", response.text
        view = others[2].thread("k1")
        kinds = _journal_kinds(view)
        assert kinds.count("protocol.run.interrupted") == 1, (
            " ".join(kinds),
            [server.log()[-2000:] for server in others],
        )
        assert not view["running"]
    finally:
        for server in servers:
            server.stop()
