"""The cost of the sandbox, measured in one run and reported as ratios.

    python benchmarks/bench_sandbox.py [--calls 40]

One ``Bash`` tool call (the real tool, output capture included) with the bubblewrap
sandbox and with the Landlock sandbox against the same call with the sandbox off
(``PLANGATE_SANDBOX=off``: the environment allowlist, limits and private temp folder
still apply), for the planning and the acting profile, and a bare ``bash -c`` started by
asyncio for reference. A sandbox that does not work here is left out.
The machine is shared and noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from plangate.agent.bash_tool import bash_tool
from plangate.agent.workspace import Workspace
from plangate.policy.authority import Authority, set_authority
from plangate.sandbox import Profile, sandbox_status


async def _median_ms(run: Callable[[], Awaitable[object]], calls: int) -> float:
    await run()  # warm up
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def _bare(workspace: Path, command: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        command,
        cwd=workspace,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await proc.communicate()


async def main(calls: int) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="plangate-bench-"))
    (workspace / "README.md").write_text("hello\n" * 100)
    tool = bash_tool(Workspace(workspace), timeout_s=30, max_chars=20_000)
    command = "ls -la && wc -l README.md"
    bare = await _median_ms(lambda: _bare(workspace, command), calls)
    rows: list[tuple[str, float]] = [("bare bash -c (asyncio)", bare)]
    for mode in ("off", "bubblewrap", "landlock"):
        os.environ["PLANGATE_SANDBOX"] = mode
        sandbox_status.cache_clear()
        status = sandbox_status()
        if mode != "off" and not status.available:
            print(f"({mode}: {status.detail})")
            continue
        label = status.backend if status.available else "no sandbox"
        for profile in (Profile.PLANNING, Profile.ACTING):
            set_authority(Authority(planning=profile is Profile.PLANNING))
            median = await _median_ms(lambda: tool(command=command), calls)
            rows.append((f"Bash tool, {label}, {profile.value}", median))
    unsandboxed = rows[1][1]
    print(f"one Bash call ({calls} calls each, median):")
    for label, median in rows:
        print(
            f"  {label:<36} {median:8.2f} ms   {median / unsandboxed:5.2f}x unsandboxed"
            f"   {median / bare:5.2f}x bare bash"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=40)
    asyncio.run(main(parser.parse_args().calls))
