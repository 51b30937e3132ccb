"""A thread's live events: followed from the same server (SQLite) and relayed between
processes on one PostgreSQL database by LISTEN/NOTIFY (the many-server case is in
``test_multi_server.py``)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import POSTGRES_ENV, require_service
from plangate.adk.database import prepare_database
from plangate.adk.thread_events import GAP, ThreadEvents, change_note
from plangate.store.live_notify import MAX_PART_BYTES, split_event
from web_support import (
    ARTIFACTS,
    LiveReader,
    demo_app,
    headless_chromium,
    run_input,
    running_server,
    sse_events,
    user_message,
)


def test_an_event_is_cut_into_notify_sized_parts_never_inside_a_character() -> None:
    body = json.dumps({"delta": "é€😀" * 4000 + "x"}, ensure_ascii=False)
    parts = split_event(body)
    assert len(parts) > 1
    assert all(len(part.encode()) <= MAX_PART_BYTES for part in parts)
    assert "".join(parts) == body
    assert split_event("") == [""]


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
            deleted = httpx.delete(f"{server.url}/api/threads/t-live", timeout=30)
            assert deleted.status_code == 200, deleted.text
            seen = follower.wait_for(lambda events: len(events) > len(sent) + 1)
            assert seen[-1]["value"] == {"threadId": "t-live", "what": "deleted"}
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


@pytest.mark.browser
def test_a_page_on_one_server_shows_a_run_on_another_live(
    tmp_path: Path, fresh_postgres: str
) -> None:
    """Two servers on one PostgreSQL database; the page is open on B while the thread's
    run goes to A. The page shows the run as it goes (its live events, relayed by
    NOTIFY) and the reply when it ends, without a reload or a poll."""
    asyncio.run(prepare_database(fresh_postgres))  # as `plangate serve` does at start
    app_a, _ = demo_app(tmp_path / "a", database_url=fresh_postgres)
    app_b, _ = demo_app(tmp_path / "b", database_url=fresh_postgres)
    with (
        running_server(app_a) as a,
        running_server(app_b) as b,
        headless_chromium() as browser,
    ):
        context = browser.new_context(bypass_csp=True)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{b.url}/#thread=t-cross")
            page.wait_for_function("() => window.__events.some(e => e.type === 'LIVE_READY')")
            response = httpx.post(
                f"{a.url}/api/agent",
                json=run_input("t-cross", messages=[user_message("hello there")]),
                timeout=120,
            )
            assert response.status_code == 200
            sent = sse_events(response.text)
            assert sent[-1]["type"] == "RUN_FINISHED"
            page.wait_for_function(
                "() => window.__events.some(e => e.type === 'LIVE_RUN_FINISHED')"
            )
            page.locator(".msg.user", has_text="hello there").wait_for()
            live_types = page.evaluate(
                "() => window.__events.filter(e => e.type.startsWith('LIVE_RUN_'))"
                ".map(e => [e.type, e.runId])"
            )
            run_id = sent[0]["runId"]
            assert live_types == [["LIVE_RUN_STARTED", run_id], ["LIVE_RUN_FINISHED", run_id]]
            replies = [e["delta"] for e in sent if e["type"] == "TEXT_MESSAGE_CONTENT"]
            assert replies, sent
            page.locator(".msg.assistant").last.wait_for()
            assert replies[0].strip()[:20] in page.locator("#messages").inner_text()
            page.screenshot(path=str(ARTIFACTS / "live-from-another-server.png"))
            assert errors == []
        finally:
            context.close()
