"""What the telemetry hooks cost a gate decision, measured in one run as ratios.

    python benchmarks/bench_telemetry.py [--calls 20000]

A gate that decides a call and journals a deny, bare and with the hooks the real gate
carries (the gate span, the verdict, the journal event): first with no tracer provider
(the API's no-op: what a run without ``OTEL_*`` variables pays), then with the SDK and an
in-memory exporter (what a configured run pays before any export I/O).
The machine is shared and noisy: compare the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.adk import telemetry
from plangate.journal.events import JournalEvent
from plangate.plan import GatePolicy, ToolCall, decide
from plangate.plan import transitions as t
from plangate.policy.effects import Effect

RECORD = t.update_content(
    t.force_enter(None, objective="x", now=0.0).record, content="1. a", now=0.0
).record
POLICY = GatePolicy()
CALLS = [
    ToolCall("Write", {"path": "a"}, Effect.WRITE),
    ToolCall("Read", {"path": "a"}, Effect.READ),
]


class Tool:
    def __init__(self, name: str) -> None:
        self.name = name


async def bare_gate(tool: Any, args: dict[str, Any], context: Any) -> dict[str, Any] | None:
    decision = decide(CALLS[context], RECORD, POLICY)
    if decision.allowed:
        return None
    JournalEvent(kind="plan.gate.denied", at=0.0, detail={"tool": tool.name})
    return decision.to_result()


@telemetry.traced_gate
async def hooked_gate(tool: Any, args: dict[str, Any], context: Any) -> dict[str, Any] | None:
    decision = decide(CALLS[context], RECORD, POLICY)
    telemetry.gate_decided(tool.name, decision, RECORD, True)
    if decision.allowed:
        return None
    event = JournalEvent(kind="plan.gate.denied", at=0.0, detail={"tool": tool.name})
    telemetry.journaled("bench", events=(event,))
    return decision.to_result()


async def per_call(gate: Any, calls: int) -> float:
    tools = [Tool("Write"), Tool("Read")]
    start = time.perf_counter()
    for i in range(calls):
        await gate(tools[i % 2], {}, i % 2)
    return (time.perf_counter() - start) / calls


async def measure(calls: int) -> tuple[float, float]:
    await per_call(hooked_gate, calls // 10)  # warm up
    return await per_call(bare_gate, calls), await per_call(hooked_gate, calls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    calls = parser.parse_args().calls
    bare, unconfigured = asyncio.run(measure(calls))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
    bare_again, configured = asyncio.run(measure(calls))
    print(f"bare gate:                     {bare * 1e6:8.2f} µs/call")
    print(
        f"with hooks, no provider:       {unconfigured * 1e6:8.2f} µs/call  ({unconfigured / bare:.2f}x)"
    )
    print(
        f"with hooks, SDK + in-memory:   {configured * 1e6:8.2f} µs/call  "
        f"({configured / bare_again:.2f}x)"
    )


if __name__ == "__main__":
    main()
