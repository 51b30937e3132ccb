"""One ``plangate serve`` process under load, on 127.0.0.1: latency and errors at fixed
arrival rates, saturation throughput, and many open runs on a model that waits.

    python benchmarks/bench_load.py [--seconds 5] [--rates 10 25 50 100] [--open 200]

The server is the agent ``plangate serve`` builds (see ``served_support``), in a child
process, on plangate's session service (``plangate serve``'s default on a new database),
or ``--sessions sqlite`` (ADK's DatabaseSessionService) or ``memory``. Every
run is a new thread saying "hello" (one model step, plus the protocol classifier's).

1. Fixed arrival rates (open loop): a run starts every 1/rate s for ``--seconds``,
   whether or not earlier ones finished; p50/p99 latency, errors, completed runs/s.
2. Saturation: ``--clients`` closed-loop clients back to back for ``--seconds``; runs/s.
3. Open runs: a model that sleeps 1 s per call (like a real one). One run alone, then
   ``--open`` runs started at once, and started evenly over ``--spread`` seconds; the
   added latency is each run's latency minus the single run's. The same at once with the
   instant model (#11's 200 concurrent threads). Beside each "at once" figure, its floor:
   bare ADK (a ``Runner`` over an ``LlmAgent`` with the same model and tools, on the same
   kind of sessions; no plangate, no HTTP) running as many at once in this process.

Everything is bounded: a run that takes longer than ``--timeout`` s counts as an error.
The client shares the machine's cores with the server: on a 2-core box it takes part of
the CPU the server would otherwise have, so the throughput figures are a floor.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from served_support import (
    LOOPS,
    SESSIONS,
    bare_run,
    bare_runner,
    percentile,
    quiet_adk_logs,
    run_on,
    served_run,
    start_server,
)

LIMITS = httpx.Limits(max_connections=2000, max_keepalive_connections=2000)


async def _timed(client: httpx.AsyncClient, url: str, timeout: float) -> tuple[float, str | None]:
    start = time.perf_counter()
    try:
        failure = await asyncio.wait_for(served_run(client, url), timeout)
    except TimeoutError:
        failure = f"no end within {timeout} s"
    return time.perf_counter() - start, failure


def _summary(results: list[tuple[float, str | None]], elapsed: float) -> str:
    latencies = [latency for latency, failure in results if failure is None]
    errors = [failure for _, failure in results if failure is not None]
    if not latencies:
        return f"no run finished; {len(errors)} errors (first: {errors[:1]})"
    text = (
        f"p50 {statistics.median(latencies) * 1e3:7.1f} ms  p99 "
        f"{percentile(latencies, 0.99) * 1e3:7.1f} ms  errors {len(errors)}/{len(results)}  "
        f"completed {len(latencies) / elapsed:6.1f} runs/s"
    )
    return text + (f"  (first error: {errors[0]})" if errors else "")


async def fixed_rate(url: str, rate: float, seconds: float, timeout: float) -> str:
    count = max(1, int(rate * seconds))
    async with httpx.AsyncClient(timeout=timeout, limits=LIMITS) as client:
        start = time.perf_counter()
        tasks = []
        for i in range(count):
            # Open loop: start on schedule whatever the earlier runs are doing.
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(_timed(client, url, timeout)))
        results = await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
    return _summary(results, elapsed)


async def saturation(url: str, clients: int, seconds: float, timeout: float) -> str:
    results: list[tuple[float, str | None]] = []
    async with httpx.AsyncClient(timeout=timeout, limits=LIMITS) as client:
        start = time.perf_counter()
        deadline = start + seconds

        async def loop() -> None:
            while time.perf_counter() < deadline:
                results.append(await _timed(client, url, timeout))

        async def probe() -> None:
            # A load balancer's /health beside the load, every 50 ms.
            while time.perf_counter() < deadline:
                asked = time.perf_counter()
                await client.get(f"{url}/health")
                health.append(time.perf_counter() - asked)
                await asyncio.sleep(0.05)

        health: list[float] = []
        await asyncio.gather(probe(), *(loop() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    return (
        f"{_summary(results, elapsed)}\n    /health meanwhile: p50 "
        f"{statistics.median(health) * 1e3:.1f} ms  p99 {percentile(health, 0.99) * 1e3:.1f} ms"
        f"  ({len(health)} probes)"
    )


async def open_runs(url: str, count: int, timeout: float, spread: float = 0.0) -> str:
    """``count`` runs started at once (``spread`` 0) or evenly over ``spread`` seconds;
    the added latency is each one's latency minus a single run's, measured alone."""
    async with httpx.AsyncClient(timeout=timeout, limits=LIMITS) as client:
        singles = [await _timed(client, url, timeout) for _ in range(3)]
        assert all(failure is None for _, failure in singles), singles
        single = statistics.median(latency for latency, _ in singles)
        start = time.perf_counter()

        async def one(i: int) -> tuple[float, str | None]:
            await asyncio.sleep(i * spread / count)
            return await _timed(client, url, timeout)

        results = await asyncio.gather(*(one(i) for i in range(count)))
        elapsed = time.perf_counter() - start
    added = [latency - single for latency, failure in results if failure is None]
    errors = [failure for _, failure in results if failure is not None]
    how = "at once" if not spread else f"over {spread:.0f} s"
    if not added:
        return f"single run {single * 1e3:.1f} ms; no run of {count} finished ({errors[:1]})"
    return (
        f"single run {single * 1e3:7.1f} ms; {count} {how}: added p50 "
        f"{statistics.median(added) * 1e3:7.1f} ms  p99 {percentile(added, 0.99) * 1e3:7.1f} ms"
        f"  errors {len(errors)}/{count}  (all done in {elapsed:.2f} s)"
        + (f"  (first error: {errors[0]})" if errors else "")
    )


async def bare_open_runs(folder: Path, sessions: str, count: int, delay: float) -> str:
    """The floor of ``open_runs`` at once: bare ADK, in this process, ``count`` runs
    started together, each on a new session, beside one run alone."""
    import gc

    quiet_adk_logs()
    runner = bare_runner("trivial", folder, sessions, delay=delay)

    async def timed() -> float:
        start = time.perf_counter()
        await bare_run(runner)
        return time.perf_counter() - start

    for _ in range(3):
        await timed()  # warm-up: imports, the first statements
    gc.freeze()  # as ``plangate serve`` freezes its startup heap
    single = statistics.median([await timed() for _ in range(3)])
    added = [latency - single for latency in await asyncio.gather(*(timed() for _ in range(count)))]
    return (
        f"added p50 {statistics.median(added) * 1e3:7.1f} ms  "
        f"p99 {percentile(added, 0.99) * 1e3:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[10, 25, 50, 100])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--open", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--spread", type=float, nargs="*", default=[10.0], help="also start --open runs over S s"
    )
    parser.add_argument("--sessions", choices=SESSIONS, default="plangate")
    parser.add_argument("--skip", nargs="*", default=[], choices=("rates", "saturation", "open"))
    parser.add_argument(
        "--loop", choices=LOOPS, default="auto", help="the server's event loop (auto: as serve)"
    )
    args = parser.parse_args()
    run_on(args.loop, measure(args))


async def measure(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"one server process, ADK sessions: {args.sessions}, new thread per run")
        if "rates" not in args.skip or "saturation" not in args.skip:
            server = start_server("trivial", Path(tmp) / "instant", args.sessions, loop=args.loop)
            try:
                await fixed_rate(server.url, 5, 1, args.timeout)  # warm-up
                if "rates" not in args.skip:
                    for rate in args.rates:
                        result = await fixed_rate(server.url, rate, args.seconds, args.timeout)
                        print(f"  {rate:5.0f} runs/s offered for {args.seconds:.0f} s: {result}")
                if "saturation" not in args.skip:
                    result = await saturation(server.url, args.clients, args.seconds, args.timeout)
                    print(f"  saturation, {args.clients} clients back to back: {result}")
                if "open" not in args.skip:
                    result = await open_runs(server.url, args.open, args.timeout)
                    print(f"  instant model: {result}")
                    floor = await bare_open_runs(
                        Path(tmp) / "bare-instant", args.sessions, args.open, 0.0
                    )
                    print(f"    floor, bare ADK in this process, {args.open} at once: {floor}")
            finally:
                server.stop()
        if "open" not in args.skip:
            server = start_server(
                "trivial", Path(tmp) / "waiting", args.sessions, delay=1.0, loop=args.loop
            )
            try:
                await fixed_rate(server.url, 5, 1, args.timeout)  # warm-up
                result = await open_runs(server.url, args.open, args.timeout)
                print(f"  model waiting 1 s per call: {result}")
                floor = await bare_open_runs(
                    Path(tmp) / "bare-waiting", args.sessions, args.open, 1.0
                )
                print(f"    floor, bare ADK in this process, {args.open} at once: {floor}")
                for spread in args.spread:
                    result = await open_runs(server.url, args.open, args.timeout, spread)
                    print(f"  model waiting 1 s per call: {result}")
            finally:
                server.stop()


if __name__ == "__main__":
    main()
