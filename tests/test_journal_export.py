"""``plangate journal export`` on the journal of a real demo run (the reference agent and
the offline demo model through the real Runner), through the real CLI entry point."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from harness import run_agreeing
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.cli.main import main
from plangate.models.demo import DemoModel


async def demo_run(tmp_path: Path, url: str) -> str:
    agent = build_coding_agent(copy_sample_workspace(tmp_path / "ws"), DemoModel())
    session = await PlanSession.open(build_runner(agent, database_url=url))
    await run_agreeing(session, "Fix the failing test")
    return session.session_id


def export(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    assert main(["journal", "export", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_export_filters_a_real_demo_runs_journal(
    tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.time()
    # The CLI runs its own event loop, so the demo runs in loops of their own too.
    first = asyncio.run(demo_run(tmp_path / "a", database_url))
    second = asyncio.run(demo_run(tmp_path / "b", database_url))
    records = export(capsys, "--database-url", database_url)
    kinds = {r["kind"] for r in records}
    assert {"plan.transition", "plan.gate.denied"} <= kinds, kinds
    assert [r["seq"] for r in records] == sorted(r["seq"] for r in records)
    assert {r["session"] for r in records} == {first, second}
    approved = [
        r for r in records if r["kind"] == "plan.transition" and r["to_state"] == "approved"
    ]
    assert len(approved) == 2 and all(r["sha256"] for r in approved)

    only_first = export(capsys, "--database-url", database_url, "--session", first)
    assert only_first and {r["session"] for r in only_first} == {first}
    assert export(capsys, "--database-url", database_url, "--thread", "nobody") == []
    threads = export(capsys, "--database-url", database_url, "--thread", "orchestrator")
    assert len(threads) == len(records)
    assert export(capsys, "--database-url", database_url, "--until", str(started)) == []
    middle = records[len(records) // 2]["at"]
    later = export(capsys, "--database-url", database_url, "--since", str(middle))
    assert later and all(r["at"] >= middle for r in later) and len(later) < len(records)

    out = tmp_path / "audit.jsonl"
    assert main(["journal", "export", "--database-url", database_url, "-o", str(out)]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == records


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "not a time: 'yesterday'"),
        (["--until", "2026-13-01"], "not a time"),
        (["--since", "2026-07-02", "--until", "2026-07-01"], "--since must be earlier"),
        # {tmp}: this test's own folder, whose "missing" folder surely does not exist.
        (["--output", "{tmp}/missing/x.jsonl"], "cannot write {tmp}/missing/x.jsonl"),
    ],
)
def test_bad_filters_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    message = message.replace("{tmp}", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["journal", "export", "--database-url", url, *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
