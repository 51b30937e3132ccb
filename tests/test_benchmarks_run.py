"""Every benchmark still runs: each script, with the smallest sizes it takes, exits 0 and
prints its figures. (What they measure is read by people, from one run on a quiet
machine; here only that they work -- a benchmark broken by a refactor measures nothing.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import POSTGRES_ENV, require_service

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"

CASES = {
    "bench_plan.py": ["--turns", "2", "--long", "15"],
    "bench_store.py": ["--commits", "16"],
    "bench_protocol.py": ["--calls", "200", "--commits", "20"],
    "bench_scope.py": ["--n", "20"],
    "bench_thread.py": ["--turns", "3"],
    "bench_telemetry.py": ["--calls", "50"],
    "bench_sandbox.py": ["--calls", "2"],
    "bench_event_loop.py": ["--seconds", "1"],
    "bench_served.py": ["--runs", "2", "--rounds", "1", "--shapes", "tool"],
    "bench_load.py": [
        *("--seconds", "0.5", "--rates", "4", "--clients", "2", "--open", "4", "--spread", "1")
    ],
    "bench_scale.py": ["--servers", "1", "--seconds", "1", "--clients", "2"],
    # This tree against itself: the two servers, the rounds and the verdict.
    "bench_ab.py": [str(BENCHMARKS.parent / "src"), "--rounds", "2", "--runs", "2"],
}
NEEDS_POSTGRES = {"bench_scale.py"}


def test_every_benchmark_has_a_case() -> None:
    assert {path.name for path in BENCHMARKS.glob("bench_*.py")} == set(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_the_benchmark_runs(script: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if script in NEEDS_POSTGRES and not env.get(POSTGRES_ENV):
        require_service(f"PostgreSQL: set {POSTGRES_ENV}")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *CASES[script]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip(), done.stderr[-2000:]
