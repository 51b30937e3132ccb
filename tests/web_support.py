"""Helpers for the web tests: SSE parsing, AG-UI inputs, and a real uvicorn server."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import uvicorn

from plangate.adk import PlanOptions
from plangate.adk.runner import build_runner
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.data import DataCatalog
from plangate.models.demo import DemoModel
from plangate.models.scripted import ScriptedLlm
from plangate.web.server import bind, create_app

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "web"
"""Browser-test screenshots (git-ignored)."""


def sse_events(text: str) -> list[dict[str, Any]]:
    """The AG-UI events of an SSE body (``data: <json>`` frames)."""
    events = []
    for frame in text.split("\n\n"):
        data = "\n".join(
            line[len("data:") :].lstrip(" ")
            for line in frame.splitlines()
            if line.startswith("data:")
        )
        if data:
            events.append(json.loads(data))
    return events


def run_input(thread_id: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": uuid.uuid4().hex,
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    body.update(fields)
    return body


def user_message(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "user", "content": text}


def demo_app(
    tmp_path: Path,
    *,
    data: DataCatalog | None = None,
    plan_options: PlanOptions | None = None,
    database_url: str | None = None,
    **options: Any,
):
    """The app over the coding agent, the demo model and a fresh sample workspace; given a
    data catalog, the reference agent of ``plangate serve`` (data tools under protocol
    governance)."""
    workspace = copy_sample_workspace(tmp_path / "workspace")
    runner = build_runner(
        build_coding_agent(workspace, DemoModel(), data=data, options=plan_options),
        database_url=database_url or f"sqlite:///{tmp_path / 'web.db'}",
    )
    options.setdefault("require_token", False)
    options.setdefault("token", None)
    options.setdefault("about", {"workspace": str(workspace)})  # as `plangate serve` does
    return create_app(runner=runner, **options), workspace


class ServerThread:
    """A real uvicorn server on a free loopback port, in a background thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.sock = bind("127.0.0.1", port)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def start(self) -> ServerThread:
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return self
            self.thread.join(0.05)
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class RestartableSite:
    """A real server over a scripted model and a database file that outlives restarts:
    subclasses say which agent it serves (``agent``); ``stop`` then ``start`` is a
    server restart on the same data."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.model = ScriptedLlm()
        self.server: ServerThread | None = None

    def agent(self) -> Any:
        raise NotImplementedError

    def start(self, model: ScriptedLlm | None = None) -> Self:
        if model is not None:
            self.model = model
        runner = build_runner(
            self.agent(), database_url=f"sqlite:///{self.database}", app_name="web"
        )
        app = create_app(runner=runner, require_token=False, token=None)
        self.server = ServerThread(app).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url


@contextmanager
def running_server(app: Any) -> Iterator[ServerThread]:
    server = ServerThread(app).start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """The system Chromium, headless, through Playwright; a missing browser or package is a
    missing service (a failure under CI=true)."""
    from conftest import require_service

    if not CHROMIUM.exists():
        require_service(f"headless Chromium is not installed at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_service("the playwright package is not installed")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def demo_server(web_dir: Path, data_dir: Path) -> Iterator[ServerThread]:
    """``plangate serve``'s agent (demo model, sample workspace and data) on a real server;
    ``.workspace`` is the folder its threads work on."""
    app, workspace = demo_app(web_dir, data=DataCatalog(cache_dir=data_dir))
    with running_server(app) as server:
        server.workspace = workspace
        yield server


class LiveReader:
    """An SSE subscription read on a thread of its own, until ``stop`` (which shuts the
    socket, so the server sees the client go at once)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.ended = threading.Event()
        self.changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            self.connection.request("GET", self.path, headers={"Accept": "text/event-stream"})
            response = self.connection.getresponse()
            if self.connection.sock is not None:
                self.connection.sock.settimeout(None)  # events may be minutes apart
            if response.status != 200:
                return
            for raw in response:
                line = raw.decode().rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                inner = event.get("event", event)
                if inner.get("name") == "plangate.live.ready":
                    self.ready.set()
                    continue
                with self.changed:
                    self.events.append(event)
                    self.changed.notify_all()
        except (OSError, http.client.HTTPException):
            pass  # closed by ``stop``, or the server went away
        finally:
            self.ended.set()

    def wait_for(self, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.events), timeout), self.events
            return list(self.events)

    def stop(self) -> None:
        sock = self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        self.connection.close()
