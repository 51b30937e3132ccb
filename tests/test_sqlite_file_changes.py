"""A SQLite file that changes under a running server is an error at the next request.

Deleted, replaced, its header overwritten, its write-ahead log removed: each is found
before the next transaction or lock-free read and answered with a code
(``DATABASE_GONE`` / ``DATABASE_CORRUPT``), never served from what the connections
still hold and never silently recreated. The real web app (httpx ASGI transport), the
real Runner with the demo model, a real SQLite file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from plangate.adk.database import prepare_database
from plangate.adk.runner import build_runner
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.errors import ErrorCode
from plangate.models.demo import DemoModel
from plangate.store.errors import DatabaseError
from plangate.store.store import Store
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1"


def _delete(db: Path) -> None:
    db.unlink()


def _replace(db: Path) -> None:
    copy = db.with_name("copy.db")
    shutil.copyfile(db, copy)
    os.replace(copy, db)


def _overwrite_header(db: Path) -> None:
    with db.open("r+b") as f:
        f.write(b"not a database!!")


def _remove_wal(db: Path) -> None:
    wal = db.with_name(db.name + "-wal")
    assert wal.exists()
    wal.unlink()


CHANGES: dict[str, tuple[Callable[[Path], None], ErrorCode]] = {
    "deleted": (_delete, ErrorCode.DATABASE_GONE),
    "replaced": (_replace, ErrorCode.DATABASE_GONE),
    "header overwritten": (_overwrite_header, ErrorCode.DATABASE_CORRUPT),
    "WAL removed": (_remove_wal, ErrorCode.DATABASE_CORRUPT),
}


@pytest.mark.parametrize("change", list(CHANGES))
async def test_a_changed_file_is_an_error_at_the_next_request_not_stale_data(
    tmp_path: Path, change: str
) -> None:
    damage, code = CHANGES[change]
    db = tmp_path / "db" / "plangate.db"
    url = f"sqlite:///{db}"
    await prepare_database(url)
    workspace = copy_sample_workspace(tmp_path / "workspace")
    runner = build_runner(build_coding_agent(workspace, DemoModel()), database_url=url)
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        first = await http.post("/api/agent", json=run_input("t1", messages=[user_message("hi")]))
        assert sse_events(first.text)[-1]["type"] == "RUN_FINISHED"
        listed = await http.get("/api/threads")
        assert listed.status_code == 200 and listed.json()["threads"], listed.text

        damage(db)

        listed = await http.get("/api/threads")
        assert listed.status_code == 503, listed.text
        assert listed.json()["code"] == code.value
        thread = await http.get("/api/threads/t1")
        assert thread.status_code == 503, thread.text
        assert thread.json()["code"] == code.value
        again = await http.post(
            "/api/agent", json=run_input("t1", messages=[user_message("again")])
        )
        if again.status_code == 200:
            assert sse_events(again.text)[-1]["code"] == code.value, again.text
        else:
            assert again.json()["code"] == code.value, again.text
    if change == "deleted":
        assert not db.exists()  # nothing recreated it


async def test_a_removed_wal_refuses_the_stores_next_write_and_read(tmp_path: Path) -> None:
    """The store alone: a commit and a lock-free read after the log was removed."""
    db = tmp_path / "plangate.db"
    store = await Store.open(f"sqlite:///{db}")
    try:
        async with store.transaction() as tx:
            await tx.put("note", "k", {"n": 1}, expected_version=0)
        assert (await store.get("note", "k")) is not None
        _remove_wal(db)
        with pytest.raises(DatabaseError) as refused:
            async with store.transaction() as tx:
                await tx.put("note", "k", {"n": 2}, expected_version=1)
        assert refused.value.code is ErrorCode.DATABASE_CORRUPT
        with pytest.raises(DatabaseError) as refused:
            await store.get("note", "k")
        assert refused.value.code is ErrorCode.DATABASE_CORRUPT
    finally:
        await store.close()
