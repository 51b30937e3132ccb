"""A thread's live events: followed from the same server (SQLite) and relayed between
processes on one PostgreSQL database by LISTEN/NOTIFY (the many-server case is in
``test_multi_server.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import POSTGRES_ENV, require_service
from plangate.adk.thread_events import GAP, READY, ThreadEvents, change_note
from plangate.store.live_notify import MAX_PART_BYTES, split_event
from web_support import demo_app, run_input, running_server, sse_events, user_message


def test_an_event_is_cut_into_notify_sized_parts_never_inside_a_character() -> None:
    body = json.dumps({"delta": "é€😀" * 4000 + "x"}, ensure_ascii=False)
    parts = split_event(body)
    assert len(parts) > 1
    assert all(len(part.encode()) <= MAX_PART_BYTES for part in parts)
    assert "".join(parts) == body
    assert split_event("") == [""]


class LiveReader:
    """An SSE subscription read on a thread of its own, until ``stop``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.changed = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(5, read=None))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            with self._client.stream("GET", self.url) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    inner = event.get("event", event)
                    if inner.get("name") == READY:
                        self.ready.set()
                        continue
                    with self.changed:
                        self.events.append(event)
                        self.changed.notify_all()
        except httpx.HTTPError:
            pass  # closed by ``stop``

    def wait_for(self, predicate: Any, timeout: float = 60) -> list[dict[str, Any]]:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.events), timeout), self.events
            return list(self.events)

    def stop(self) -> None:
        self._client.close()
        self._thread.join(10)


def _terminal(events: list[dict[str, Any]]) -> bool:
    return any(e.get("type") in ("RUN_FINISHED", "RUN_ERROR") for e in events)


def test_a_second_page_follows_a_run_live_on_one_server(tmp_path: Path) -> None:
    app, _ = demo_app(tmp_path)
    with running_server(app) as server:
        follower = LiveReader(f"{server.url}/api/threads/t-live/live")
        other = LiveReader(f"{server.url}/api/threads/t-other/live")
        try:
            assert follower.ready.wait(30)
            assert other.ready.wait(30)
            response = httpx.post(
                f"{server.url}/api/agent",
                json=run_input("t-live", messages=[user_message("hello")]),
                timeout=120,
            )
            assert response.status_code == 200
            sent = sse_events(response.text)
            seen = follower.wait_for(_terminal)
            # The follower saw the very events of the run, in order.
            assert seen == sent
            mode = httpx.post(
                f"{server.url}/api/threads/t-live/mode",
                json={"mode": "plan"},
                timeout=30,
            )
            assert mode.status_code == 200, mode.text
            seen = follower.wait_for(lambda events: len(events) > len(sent))
            assert seen[-1]["name"] == "plangate.thread.changed"
            assert seen[-1]["value"] == {"threadId": "t-live", "what": "mode:plan"}
            assert other.events == []  # a thread's stream carries that thread only
        finally:
            follower.stop()
            other.stop()


def test_a_live_stream_refuses_a_bad_thread_id(tmp_path: Path) -> None:
    app, _ = demo_app(tmp_path)
    with running_server(app) as server:
        response = httpx.get(f"{server.url}/api/threads/..%2Fx/live", timeout=30)
        assert response.status_code in (404, 422)
        response = httpx.get(f"{server.url}/api/threads/-bad/live", timeout=30)
        assert response.status_code == 422
        assert response.json()["code"] == "BAD_INPUT"


@pytest.fixture
def postgres_url() -> str:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        require_service(f"PostgreSQL: set {POSTGRES_ENV}")
    assert server is not None
    return server


async def test_events_cross_processes_by_notify_in_order_large_ones_whole(
    postgres_url: str,
) -> None:
    """Two hubs with their own connections, as two servers have: what one publishes the
    other's subscribers get, in order, a 60 kB event in one piece; the publisher's own
    subscribers get each event once."""
    a, b = ThreadEvents("a"), ThreadEvents("b")
    await a.start(postgres_url)
    await b.start(postgres_url)
    try:
        await asyncio.wait_for(asyncio.gather(a.ready(), b.ready()), 30)
        on_b = b.subscribe("app/user/t1")
        everything_on_b = b.subscribe(None)
        on_a = a.subscribe("app/user/t1")
        big = json.dumps({"type": "STATE_SNAPSHOT", "snapshot": {"x": "ü" * 30000}})
        sent = [json.dumps({"type": "TEXT_MESSAGE_CONTENT", "delta": str(i)}) for i in range(300)]
        sent.insert(150, big)
        for event in sent:
            a.publish("app/user/t1", event)
        a.publish("app/user/t2", change_note("t2", "mode:plan"))
        got = [await asyncio.wait_for(on_b.next(30), 30) for _ in sent]
        assert got == [("app/user/t1", event) for event in sent]
        everything = [
            await asyncio.wait_for(everything_on_b.next(30), 30) for _ in range(len(sent) + 1)
        ]
        assert [key for key, _ in everything][-1] == "app/user/t2"
        assert [await on_a.next(5) for _ in sent] == got
        with pytest.raises(TimeoutError):
            await on_a.next(0.5)  # not twice: its own events do not come back from NOTIFY
    finally:
        await a.close()
        await b.close()


async def test_a_subscriber_too_far_behind_is_told_to_reload() -> None:
    hub = ThreadEvents("solo")
    slow = hub.subscribe("k")
    for i in range(6000):
        hub.publish("k", json.dumps({"i": i}))
    events = []
    while (item := await slow.next(1)) is not None:
        events.append(json.loads(item[1]))
    assert events[-1]["name"] == GAP
    assert len(events) == 1  # what it held is dropped: the page reloads instead
