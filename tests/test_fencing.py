"""A server frozen mid-run past its lease writes nothing to the thread when it wakes.

Real ``plangate serve`` processes on one database (SQLite file or PostgreSQL), the demo
model, and a run caught mid-run by a FIFO its ``grep`` reads. The server running it is
stopped with SIGSTOP (what a VM freeze or a long pause does), its lease lapses, the other
server sweeps the run and runs on the thread; then the frozen one gets SIGCONT. Every
write it would make is fenced by its lost lease: the database is byte for byte what it
was before it woke, its own client is told ``RUN_LEASE_LOST``, and its log says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import test_multi_server
from test_multi_server import Serve, _fifo_workspace, _in_bash, _journal_kinds, _release_fifo
from web_support import run_input, sse_events, user_message

LEASE_SECONDS = 3  # short, so the test is quick; the keeper renews every second


def _snapshot(database_url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every journal row (seq, scope, kind) and every document's version, as stored."""
    journal = "SELECT seq, scope, kind FROM plangate_journal ORDER BY seq"
    documents = "SELECT kind, key, version FROM plangate_documents ORDER BY kind, key"
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        try:
            return conn.execute(journal).fetchall(), conn.execute(documents).fetchall()
        finally:
            conn.close()

    async def read() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        import asyncpg

        conn = await asyncpg.connect(database_url)
        try:
            rows = [tuple(r) for r in await conn.fetch(journal)]
            return rows, [tuple(r) for r in await conn.fetch(documents)]
        finally:
            await conn.close()

    return asyncio.run(read())


def _wait(condition: Any, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_server_frozen_past_its_lease_writes_nothing_once_another_took_the_thread(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(test_multi_server, "LEASE_SECONDS", LEASE_SECONDS)
    workspace, fifo, original = _fifo_workspace(tmp_path / "workspace")
    frozen = Serve(tmp_path / "frozen", database_url, "--workspace", str(workspace))
    other = Serve(tmp_path / "other", database_url, "--workspace", str(workspace))
    stopped = False
    try:
        frozen.wait_ready()
        other.wait_ready()
        selection = httpx.get(f"{frozen.url}/api/info", timeout=30).json()["stateKeys"]
        body = run_input("f1", messages=[user_message("look at the stock code")])
        body["state"] = {selection["selection"]: "plan"}
        answer: list[httpx.Response] = []

        def run_on_frozen() -> None:
            with contextlib.suppress(httpx.HTTPError):
                answer.append(httpx.post(f"{frozen.url}/api/agent", json=body, timeout=300))

        background = threading.Thread(target=run_on_frozen, daemon=True)
        background.start()
        _wait(lambda: _in_bash(other, "f1"), "the run never reached its grep")

        os.kill(frozen.process.pid, signal.SIGSTOP)
        stopped = True
        # Past its lease the other server's sweep ends the frozen server's run ...
        _wait(
            lambda: "protocol.run.interrupted" in _journal_kinds(other, "f1"),
            "the frozen server's run was never interrupted",
        )
        # ... and the thread goes on there, to a question the user is asked.
        taken = other.post("f1", "look at the stock code again")
        assert taken.status_code == 200, taken.text
        assert sse_events(taken.text)[-1]["type"] == "RUN_FINISHED", taken.text
        before = _snapshot(database_url)
        pending = other.thread("f1").get("interrupts")

        # The frozen server wakes; its grep ends and its run would go on.
        _release_fifo(fifo, original)
        os.kill(frozen.process.pid, signal.SIGCONT)
        stopped = False
        background.join(120)
        assert answer, "the frozen server's run never ended"
        _wait(
            lambda: "another server took the thread over" in frozen.log(),
            f"the frozen server never said it stopped: {frozen.log()[-3000:]}",
        )
        # Not a row, not a document version more: no second question, no second run.
        assert _snapshot(database_url) == before
        events = sse_events(answer[0].text)
        assert events[-1]["type"] == "RUN_ERROR", events[-1]
        assert events[-1]["code"] == "RUN_LEASE_LOST", events[-1]
        assert other.thread("f1").get("interrupts") == pending
        assert not other.thread("f1")["running"]
        kinds = _journal_kinds(other, "f1")
        assert kinds.count("protocol.run.interrupted") == 1, kinds
        again = other.post("f1", "hello")
        assert again.status_code == 200, again.text
        assert sse_events(again.text)[-1]["type"] == "RUN_FINISHED", again.text
    finally:
        if stopped:
            os.kill(frozen.process.pid, signal.SIGCONT)
        _release_fifo(fifo, original)
        frozen.stop()
        other.stop()
