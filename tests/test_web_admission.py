"""Bounded admission and a paged thread list, through the real app and Runner.

Past ``max_runs`` runs in progress a new run is refused with 503, ``SERVER_BUSY`` and
``Retry-After`` before anything is read or written; the thread list pages by ``limit``
and an opaque ``cursor``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from harness import make_agent
from plangate.adk.runner import build_runner
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.effects import Effect, declare_effect
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"


def _app(database_url: str, model: ScriptedLlm, tools: list[Any], **options: Any):
    runner = build_runner(make_agent(model, tools=tools), database_url=database_url, app_name="web")
    app = create_app(runner=runner, require_token=False, token=None, **options)
    return runner, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


async def test_past_max_runs_a_new_run_gets_503_with_retry_after(database_url: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def Inspect(path: str) -> dict[str, Any]:
        """Inspect a path slowly."""
        started.set()
        await release.wait()
        return {"inspected": path}

    model = ScriptedLlm().add([call("Inspect", path="src")], [text("done")], [text("second")])
    _, http = _app(database_url, model, [declare_effect(Inspect, Effect.READ)], max_runs=1)
    async with http:
        first = asyncio.create_task(
            http.post("/api/agent", json=run_input("t-1", messages=[user_message("look")]))
        )
        await asyncio.wait_for(started.wait(), 30)
        refused = await http.post(
            "/api/agent", json=run_input("t-2", messages=[user_message("hello")])
        )
        assert refused.status_code == 503, refused.text
        assert refused.json()["code"] == "SERVER_BUSY"
        assert refused.headers["Retry-After"] == "2"
        # Nothing of the refused run was kept: its thread does not exist.
        assert (await http.get("/api/threads/t-2")).status_code == 404
        release.set()
        assert sse_events((await first).text)[-1]["type"] == "RUN_FINISHED"
        # Once the first run is over, the retry is admitted.
        again = await http.post(
            "/api/agent", json=run_input("t-2", messages=[user_message("hello")])
        )
        assert again.status_code == 200
        assert sse_events(again.text)[-1]["type"] == "RUN_FINISHED"


def test_max_runs_below_one_is_refused() -> None:
    runner = build_runner(make_agent(ScriptedLlm()), database_url="sqlite:///:memory:")
    with pytest.raises(ValueError, match="at least 1"):
        create_app(runner=runner, require_token=False, token=None, max_runs=0)


async def test_the_thread_list_pages_by_limit_and_cursor(database_url: str) -> None:
    runner, http = _app(database_url, ScriptedLlm(), [])
    ids = [f"t-{n}" for n in range(7)]
    for thread_id in ids:
        await runner.session_service.create_session(
            app_name=runner.app_name, user_id="user", session_id=thread_id
        )
    async with http:
        everything = (await http.get("/api/threads")).json()
        assert everything["nextCursor"] is None
        newest_first = [t["threadId"] for t in everything["threads"]]
        assert sorted(newest_first) == sorted(ids)

        seen: list[str] = []
        pages = 0
        cursor = None
        while True:
            query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
            page = (await http.get("/api/threads", params=query)).json()
            pages += 1
            seen += [t["threadId"] for t in page["threads"]]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        assert pages == 3 and seen == newest_first  # every thread once, in order

        for query, words in (
            ({"limit": "0"}, "'limit'"),
            ({"limit": "201"}, "'limit'"),
            ({"limit": "many"}, "'limit'"),
            ({"cursor": "not-a-cursor"}, "'cursor'"),
            ({"cursor": "WzEsMiwzXQ"}, "'cursor'"),  # valid base64 of [1,2,3]
        ):
            response = await http.get("/api/threads", params=query)
            assert response.status_code == 422, (query, response.text)
            assert response.json()["code"] == "BAD_INPUT"
            assert words in response.json()["error"]
