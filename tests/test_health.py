"""``/health`` answers within a bound and tells the truth about the database.

PostgreSQL is frozen for real: the server reaches it through a TCP relay that stops
passing bytes (what a paused VM, a stalled network or ``SIGSTOP`` on the database look
like from the client), without stopping the PostgreSQL other tests share.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import pytest

from plangate.adk.database import database_health, prepare_database
from plangate.adk.runner import build_runner
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.demo import DemoModel
from plangate.web.health import HealthProbe
from plangate.web.server import create_app
from test_database_failures import postgres_server
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"


class Relay:
    """A TCP relay to ``host:port`` that can stop passing bytes (and start again)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    await self.flowing.wait()
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        self.flowing.set()
        if self.server is not None:
            self.server.close()


async def _timed_get(http: httpx.AsyncClient, path: str) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = await http.get(path)
    return time.perf_counter() - started, response


async def test_health_answers_within_a_bound_while_postgres_is_frozen(tmp_path: Path) -> None:
    from sqlalchemy.engine import make_url

    server = make_url(postgres_server())
    relay = Relay(server.host or "127.0.0.1", server.port or 5432)
    port = await relay.start()
    url = server.set(port=port).render_as_string(hide_password=False)
    await prepare_database(url)
    runner = build_runner(
        build_coding_agent(copy_sample_workspace(tmp_path / "ws"), DemoModel()), database_url=url
    )
    app = create_app(runner=runner, require_token=False, token=None)
    # The server's own probe, with a check timeout short enough for a test.
    app.state.web.health = HealthProbe(lambda: database_health(runner), check_timeout=1.5)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            events = sse_events(
                (
                    await http.post(
                        "/api/agent", json=run_input("t1", messages=[user_message("hi")])
                    )
                ).text
            )
            assert events[-1]["type"] == "RUN_FINISHED"
            ok = await http.get("/health")
            assert ok.status_code == 200 and ok.json() == {"ok": True, "database": "ok"}

            relay.flowing.clear()  # PostgreSQL stops answering
            answers = []
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                answers.append(await _timed_get(http, "/health"))
                await asyncio.sleep(0.05)
            # Every probe answered within the bound (loose for a loaded machine: a hang
            # would take the whole freeze).
            assert max(took for took, _ in answers) < 0.5, [took for took, _ in answers]
            states = [response.json()["database"] for _, response in answers]
            # First slow (the last check answered), then unreachable once a check timed out.
            assert states[0] == "degraded" and answers[0][1].status_code == 200
            assert states[-1] == "unreachable" and answers[-1][1].status_code == 503
            assert answers[-1][1].json()["code"] == "DATABASE_UNREACHABLE"
            assert "did not answer within 1.5 s" in answers[-1][1].json()["error"]

            relay.flowing.set()  # it comes back
            deadline = time.monotonic() + 10.0
            while (await http.get("/health")).status_code != 200:
                assert time.monotonic() < deadline, "health never recovered"
                await asyncio.sleep(0.1)
            assert (await http.get("/health")).json() == {"ok": True, "database": "ok"}
    finally:
        await relay.close()


async def test_concurrent_probes_share_one_database_check(tmp_path: Path) -> None:
    checks = 0

    async def check() -> None:
        nonlocal checks
        checks += 1
        await asyncio.sleep(0.05)

    probe = HealthProbe(check)
    answers = await asyncio.gather(*(probe.read() for _ in range(50)))
    assert {a.database for a in answers} == {"ok"}
    assert checks == 1


@pytest.mark.parametrize("free_needed", [1, 10**18])
async def test_a_full_disk_under_sqlite_is_reported(tmp_path: Path, free_needed: int) -> None:
    url = f"sqlite:///{tmp_path / 'db' / 'plangate.db'}"
    await prepare_database(url)
    runner = build_runner(
        build_coding_agent(copy_sample_workspace(tmp_path / "ws"), DemoModel()), database_url=url
    )
    app = create_app(runner=runner, require_token=False, token=None)
    web = app.state.web
    assert web.health._sqlite_file == tmp_path / "db" / "plangate.db"
    # The disk is "full" when it has less free space than the probe needs.
    web.health = HealthProbe(
        lambda: database_health(runner),
        sqlite_file=web.health._sqlite_file,
        min_free_bytes=free_needed,
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        response = await http.get("/health")
    if free_needed == 1:
        assert response.status_code == 200
        return
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "degraded" and body["code"] == "DATABASE_DISK_FULL"
    assert "runs cannot be saved" in body["error"]
