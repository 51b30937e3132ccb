"""No run is left ``running`` once the run holding its thread is over.

A run superseded by a new message while it waited on a request, or one a database error
ended before it wrote its outcome, keeps its document ``running``; the end of the next
run on the thread (the release of its lease) closes it as ``interrupted`` with a journal
entry, in the same transaction as the release. A run that still waits for a human reply
is left as it is. Real SQLite and PostgreSQL, the real Runner's store.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents import LlmAgent
from sqlalchemy import insert

from plangate.adk import PlanOptions, setup_plan
from plangate.adk.database import prepare_database
from plangate.adk.runner import build_runner
from plangate.adk.thread_runs import ThreadRuns
from plangate.models.scripted import ScriptedLlm
from plangate.store.protocol_state import RUN_KIND
from plangate.store.schema import documents
from plangate.store.store import Store

RUN_KEY = "app/user/s1/agent#old-run"


async def _seed(url: str, *, pending: bool) -> None:
    await prepare_database(url)
    store = await Store.open(url)
    record: dict[str, Any] = {"pending": [{"call_id": "c1"}] if pending else []}
    try:
        async with store.engine.begin() as conn:
            await conn.execute(
                insert(documents).values(
                    kind="plan_state",
                    key="app/user/s1/agent",
                    version=1,
                    data={"record": record},
                    updated_at=0.0,
                )
            )
            await conn.execute(
                insert(documents).values(
                    kind=RUN_KIND,
                    key=RUN_KEY,
                    version=1,
                    data={
                        "run_id": "old-run",
                        "scope_key": "app/user/s1/agent",
                        "session_key": "app/user/s1",
                        "status": "running",
                    },
                    updated_at=0.0,
                )
            )
    finally:
        await store.close()


async def _after(threads: ThreadRuns) -> tuple[str, list[str]]:
    store = (await threads.leases()).store
    run = await store.get(RUN_KIND, RUN_KEY)
    assert run is not None
    return run.data["status"], [entry.event.kind for entry in await store.journal()]


async def test_the_end_of_a_run_closes_a_run_left_running_on_its_thread(
    database_url: str,
) -> None:
    await _seed(database_url, pending=False)
    agent = setup_plan(LlmAgent(name="agent", model=ScriptedLlm()), PlanOptions())
    threads = ThreadRuns(build_runner(agent, database_url=database_url, app_name="app"), "user")
    try:
        async with threads.hold("s1", "new-run"):
            assert (await _after(threads))[0] == "running"  # not while a run holds it
        status, kinds = await _after(threads)
        assert status == "interrupted"
        assert kinds == ["protocol.run.interrupted"]
        assert await threads.running_elsewhere("s1") is False  # and the lease is released
        async with threads.hold("s1", "third-run"):
            pass
        assert (await _after(threads))[1] == ["protocol.run.interrupted"]  # once
    finally:
        threads.close()


async def test_a_run_waiting_for_a_reply_stays_open_after_another_run(
    database_url: str,
) -> None:
    await _seed(database_url, pending=True)
    agent = setup_plan(LlmAgent(name="agent", model=ScriptedLlm()), PlanOptions())
    threads = ThreadRuns(build_runner(agent, database_url=database_url, app_name="app"), "user")
    try:
        async with threads.hold("s1", "new-run"):
            pass
        assert await _after(threads) == ("running", [])
        assert await threads.running_elsewhere("s1") is False
    finally:
        threads.close()
