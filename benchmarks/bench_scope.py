"""What the approved plan's scope costs per call, measured in one run as ratios.

    python benchmarks/bench_scope.py [--n 2000]

For a ``Write`` the scope covers (auto permission, nothing to ask), the capability check
(resolve the path, compare it with the scope) beside the pure gate decision for the
same call; and the same for a ``Bash`` line of three commands (split, then prefixes).
Files of 4 KB and 200 KB show that it does not read the file (the diff is read only
for a call that waits for the human). Best of 5 rounds.
The machine is shared and noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plangate.adk.capability import _wants  # pyright: ignore[reportPrivateUsage]
from plangate.agent.workspace import Workspace, workspace_tools
from plangate.plan import GatePolicy, ToolCall, decide
from plangate.plan import transitions as t
from plangate.plan.scope import Scope
from plangate.policy.effects import Effect


def _best(fn: Callable[[], Any], n: int, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - start) / n)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    folder = Path(tempfile.mkdtemp())
    (folder / "src").mkdir()
    tools = {tool.name: tool for tool in workspace_tools(Workspace(folder))}
    write, bash = tools["Write"], tools["Bash"]
    scope = Scope(write=("src/**",), commands=("python -m pytest", "ruff check", "ruff format"))
    entered = t.force_enter(None, objective="x", now=0.0)
    assert entered is not None
    record = t.update_content(entered.record, content="1. a", now=0.0).record
    policy = GatePolicy()
    gate = _best(
        lambda: decide(ToolCall("Write", {"path": "src/a.py"}, Effect.WRITE), record, policy), n
    )
    print(f"pure gate decision                {gate * 1e6:8.1f} µs")
    for size in (4_000, 200_000):
        (folder / "src" / "a.py").write_text("x = 1\n" * (size // 6))
        args = {"path": "src/a.py", "content": "y = 2\n" * (size // 6)}

        def check_write(args: dict[str, str] = args) -> None:
            found = _wants(write, args)
            assert found is not None and scope.missing(found[0]).is_empty()

        cost = _best(check_write, max(50, n // 10))
        print(
            f"scope check, in-scope Write {size // 1000:>3} KB {cost * 1e6:8.1f} µs "
            f"(ratio {cost / gate:.1f} to the gate decision)"
        )
    command = {"command": "ruff format src && ruff check src && python -m pytest -q"}

    def check_bash() -> None:
        found = _wants(bash, command)
        assert found is not None and scope.missing(found[0]).is_empty()

    cost = _best(check_bash, max(50, n // 10))
    print(
        f"scope check, in-scope Bash (3 commands) {cost * 1e6:8.1f} µs "
        f"(ratio {cost / gate:.1f} to the gate decision)"
    )


if __name__ == "__main__":
    main()
