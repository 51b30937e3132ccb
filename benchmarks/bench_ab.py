"""A served run's CPU on two plangate source trees, side by side, in one run.

    git worktree add /tmp/before main
    python benchmarks/bench_ab.py /tmp/before/src [--after src] [--shape trivial]
        [--sessions plangate] [--rounds 16] [--runs 20] [--loops auto auto]

Two bench servers (``served_support``), one per tree, take turns: a round of ``--runs``
runs on one, then on the other, the order swapped every round. Each round's figure is the
server process's CPU per run. On a shared machine a neighbour's burst moves a single
figure by ±30%, so the verdict is the median of the per-round ratios (after / before),
not a ratio of two totals: a change of a few percent shows only this way.

``--loops``: each server's event loop and HTTP parser (``served_support.LOOPS``), to
compare those on one tree (``asyncio auto``: h11 against httptools, when installed).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import httpx
from served_support import LOOPS, SESSIONS, SHAPES, Tally, served_round, served_run, start_server

WARMUP = 20


async def compare(args: argparse.Namespace) -> None:
    tallies = [Tally(f"before ({args.before})"), Tally(f"after ({args.after})")]
    with tempfile.TemporaryDirectory() as tmp:
        servers = [
            start_server(
                args.shape, Path(tmp) / name, args.sessions, loop=loop, source=source.resolve()
            )
            for name, source, loop in (
                ("before", args.before, args.loops[0]),
                ("after", args.after, args.loops[1]),
            )
        ]
        try:
            async with httpx.AsyncClient(timeout=120) as client:
                for server in servers:
                    for _ in range(WARMUP):
                        assert await served_run(client, server.url) is None
                for n in range(args.rounds):
                    for i in (0, 1) if n % 2 == 0 else (1, 0):
                        await served_round(tallies[i], args.runs, servers[i], client)
        finally:
            for server in servers:
                server.stop()
    before, after = tallies
    ratios = [a / b for a, b in zip(after.cpu, before.cpu, strict=True)]
    print(f"served {args.shape!r} runs on {args.sessions} sessions, server CPU per run:")
    print(before.line(None))
    print(after.line(None))
    print(
        f"  after / before, per round: median {after.over(before):.3f} "
        f"(from {min(ratios):.2f} to {max(ratios):.2f} over {args.rounds} rounds)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path, help="the src folder of the baseline tree")
    parser.add_argument("--after", type=Path, default=Path(__file__).parent.parent / "src")
    parser.add_argument("--shape", choices=SHAPES, default="trivial")
    parser.add_argument("--sessions", choices=SESSIONS, default="plangate")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--loops", nargs=2, choices=LOOPS, default=["auto", "auto"])
    asyncio.run(compare(parser.parse_args()))


if __name__ == "__main__":
    main()
