"""Durability and concurrency across processes: a restart continues a pending approval,
and two processes racing on one plan lose no update."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from plangate.adk.options import PlanOptions
from plangate.adk.runtime import PlanRuntime
from plangate.adk.scope import PlanScope
from plangate.plan.transitions import force_enter, update_content
from plangate.store import Conflict
from plangate.store.shared import shared_store

HERE = Path(__file__).parent


def run(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(HERE / "plan_process.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_continues_a_pending_approval(tmp_path: Path, database_url: str) -> None:
    started = run("start", database_url, str(tmp_path))
    assert not (tmp_path / "out.txt").exists()
    finished = run(
        "approve", database_url, str(tmp_path), started["session_id"], started["call_id"]
    )
    assert finished == {"status": "approved", "save": [{"saved": True}]}
    assert (tmp_path / "out.txt").read_text() == "approved work"


async def _seed_plan(database_url: str, scope: PlanScope) -> PlanRuntime:
    runtime = PlanRuntime(PlanOptions(database_url=database_url), scope.branch)
    loaded = await runtime.load(scope)
    transition = force_enter(None, objective="race", now=time.time())
    await runtime.commit(
        scope, loaded, loaded.state.model_copy(update={"record": transition.record}), [transition]
    )
    return runtime


async def test_compare_and_set_loser_gets_a_conflict_and_nothing_half_applied(
    database_url: str,
) -> None:
    scope = PlanScope("app", "u", "s", "b")
    runtime = await _seed_plan(database_url, scope)
    first, second = await runtime.load(scope), await runtime.load(scope)
    a = update_content(first.state.record, content="A", now=1.0)
    b = update_content(second.state.record, content="B", now=1.0)
    await runtime.commit(scope, first, first.state.model_copy(update={"record": a.record}), [a])
    store = await shared_store(database_url)
    journal_before = len(await store.journal(scope.key))
    try:
        await runtime.commit(
            scope, second, second.state.model_copy(update={"record": b.record}), [b]
        )
    except Conflict as exc:
        assert "changed concurrently" in str(exc)
    else:
        raise AssertionError("the second writer should have lost")
    assert (await runtime.load(scope)).state.record.content == "A"
    assert len(await store.journal(scope.key)) == journal_before


async def test_two_processes_racing_lose_no_update(database_url: str) -> None:
    scope = PlanScope("app", "u", "s", "b")
    runtime = await _seed_plan(database_url, scope)
    start_at = f"{time.time() + 2.0}"
    count = 25
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "plan_process.py"),
                "race",
                database_url,
                scope.key,
                name,
                str(count),
                start_at,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("p1", "p2")
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    record = (await runtime.load(scope)).state.record
    lines = record.content.splitlines()
    assert sorted(lines) == sorted(f"- {p}-{i}" for p in ("p1", "p2") for i in range(count))
    assert record.content_revisions == 2 * count
    assert all(r["applied"] == count for r in results)
    store = await shared_store(database_url)
    assert (
        len([e for e in await store.journal(scope.key) if e.event.kind.startswith("plan.")])
        == 1 + 2 * count
    )
