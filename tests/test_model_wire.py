"""Every real model path on the wire: plangate's real client path (LiteLLM for OpenAI and
Anthropic, google-genai for Gemini) against stand-ins of each provider's HTTP API on
127.0.0.1 (``provider_standins``), driving the reference coding agent through the real
Runner: explore -> plan -> pause -> approve -> implement, with parallel tool calls, call
ids round-tripping, gate refusals as tool results, and provider errors. No key, no
network: any connection off the loopback fails the test."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents.run_config import RunConfig, StreamingMode

from conftest import require_service
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.config import resolve_model
from plangate.plan import PlanStatus
from provider_standins import API_KEY, Fail, Reply, StandIn, serve


@pytest.fixture(autouse=True)
def _models_extra() -> None:
    # The dev extra installs LiteLLM; under CI a missing one fails instead of skipping.
    if importlib.util.find_spec("litellm") is None:
        require_service("the models extra (litellm) is not installed")


FIX = {
    "path": "inventory/stock.py",
    "old_string": "        if quantity > on_hand + 1:\n",
    "new_string": "        if quantity > on_hand:\n",
}
PLAN = "# Fix the guard\n\n## Steps\n1. Change `quantity > on_hand + 1` to `quantity > on_hand`\n"

PROVIDERS = {
    "openai": "openai:gpt-4o-mini",
    "openai-stream": "openai:gpt-4o-mini",
    "anthropic": "anthropic:claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}


@pytest.fixture
def outside_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Refuse (and record) every connection that is not to the loopback."""
    attempts: list[Any] = []
    original = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1",
            "::1",
        ):
            attempts.append(address)
            raise ConnectionRefusedError(f"test guard: no network ({address})")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield attempts


@pytest.fixture(params=list(PROVIDERS))
def provider(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, outside_connections: list
) -> Iterator[tuple[str, StandIn]]:
    with serve(StandIn()) as stand_in:
        base = stand_in.base_url
        for name, value in {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": f"{base}/v1",
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": base,
            "GOOGLE_API_KEY": API_KEY,
            "GOOGLE_GEMINI_BASE_URL": base,
            "PLANGATE_MODEL_RETRIES": "3",
            "PLANGATE_MODEL_RETRY_DELAY": "0.01",
        }.items():
            monkeypatch.setenv(name, value)
        for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_API_KEY", "ANTHROPIC_API_BASE"):
            monkeypatch.delenv(name, raising=False)
        yield request.param, stand_in
    assert outside_connections == [], "a model call reached beyond 127.0.0.1"


async def open_session(spec: str, tmp_path: Path) -> tuple[PlanSession, Path]:
    workspace = copy_sample_workspace(tmp_path / "ws")
    agent = build_coding_agent(workspace, resolve_model(spec))
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'plangate.db'}")
    return await PlanSession.open(runner), workspace


async def turn(session: PlanSession, message: Any, kind: str) -> list[Any]:
    config = RunConfig(streaming_mode=StreamingMode.SSE) if kind.endswith("stream") else None
    return [event async for event in session.run(message, run_config=config)]


def final_text(events: list[Any]) -> str:
    texts = [
        part.text
        for event in events
        if not event.partial
        for part in (event.content.parts if event.content else []) or []
        if part.text
    ]
    return texts[-1] if texts else ""


def tool_results(kind: str, body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(call id, result text) of every tool result in a request, in the provider's format."""
    if kind.startswith("openai"):
        return [
            (m.get("tool_call_id"), m["content"]) for m in body["messages"] if m["role"] == "tool"
        ]
    if kind == "anthropic":
        return [
            (block["tool_use_id"], _text(block["content"]))
            for m in body["messages"]
            if isinstance(m["content"], list)
            for block in m["content"]
            if block["type"] == "tool_result"
        ]
    return [
        (part["functionResponse"].get("id"), json.dumps(part["functionResponse"]))
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


def _text(content: Any) -> str:
    """Anthropic tool_result content: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def as_dict(result: str) -> dict[str, Any]:
    value = json.loads(result)
    return value.get("response", value) if "name" in value else value


def results_of(kind: str, stand_in: StandIn, request_index: int, step_index: int) -> list[str]:
    """The results a request carried for the calls the stand-in issued in one step."""
    results = tool_results(kind, stand_in.requests[request_index].body)
    if kind == "gemini":  # no ids on the wire: ADK's own ids are stripped (the contract)
        results = results[-stand_in.call_counts[step_index] :]
        assert all(call_id is None for call_id, _ in results)
        return [text for _, text in results]
    ids = stand_in.issued_ids[step_index]
    by_id = {call_id: text for call_id, text in results}
    assert set(ids) <= set(by_id), f"ids {ids} did not round-trip: {list(by_id)}"
    return [by_id[i] for i in ids]


async def test_explore_plan_pause_approve_implement(
    provider: tuple[str, StandIn], tmp_path: Path
) -> None:
    kind, stand_in = provider
    stand_in.script(
        Reply("I will plan first.", [("enter_plan_mode", {"objective": "Fix the failing test"})]),
        # Parallel calls in one response.
        Reply(calls=[("Glob", {"pattern": "**/*.py"}), ("Read", {"path": "inventory/stock.py"})]),
        Reply(calls=[("Edit", FIX)]),
        # Write and submit in one response: they take effect in the order written.
        Reply(
            calls=[
                ("update_plan_content", {"content": PLAN, "mode": "replace"}),
                ("exit_plan_mode", {"summary": "Fix the off-by-one guard"}),
            ]
        ),
        Reply(calls=[("Edit", FIX)]),
        Reply("Done: the guard is fixed."),
    )
    session, workspace = await open_session(PROVIDERS[kind], tmp_path)

    await turn(session, "Fix the failing test", kind)
    [enter] = await session.pending()
    assert enter.kind == "enter"
    await turn(session, PlanSession.confirm_enter(enter, True), kind)
    [approval] = await session.pending()
    assert approval.kind == "exit"
    record = await session.record()
    assert record is not None and record.content == PLAN
    assert "if quantity > on_hand + 1:" in (workspace / "inventory/stock.py").read_text()

    events = await turn(session, PlanSession.approve(approval), kind)
    assert final_text(events) == "Done: the guard is fixed."
    assert "if quantity > on_hand:\n" in (workspace / "inventory/stock.py").read_text()
    assert (await session.record()).status is PlanStatus.APPROVED

    assert len(stand_in.requests) == 6
    glob, read = results_of(kind, stand_in, 2, 1)
    assert "stock.py" in glob and "on_hand" in read
    [refused] = results_of(kind, stand_in, 3, 2)
    assert "PLAN_MODE_GATE" in refused
    written, approved = results_of(kind, stand_in, 4, 3)
    assert "error" not in as_dict(written)
    assert as_dict(approved)["status"] == "approved"
    [edited] = results_of(kind, stand_in, 5, 4)
    assert "PLAN_MODE_GATE" not in edited and "error" not in as_dict(edited)
    if kind == "openai-stream":
        assert all(body.get("stream") for body in stand_in.bodies())


async def test_rate_limits_and_server_errors_are_retried(
    provider: tuple[str, StandIn], tmp_path: Path
) -> None:
    kind, stand_in = provider
    stand_in.script(Fail(429), Fail(503), Reply("Hello after retries."))
    session, _ = await open_session(PROVIDERS[kind], tmp_path)
    events = await turn(session, "hello", kind)
    assert final_text(events) == "Hello after retries."
    assert len(stand_in.requests) == 3
    assert not any(event.error_code for event in events)


async def test_a_bad_key_is_a_clear_coded_error_and_not_retried(
    provider: tuple[str, StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, stand_in = provider
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(name, "wrong-key")
    session, _ = await open_session(PROVIDERS[kind], tmp_path)
    events = await turn(session, "hello", kind)
    [failed] = [event for event in events if event.error_code]
    assert failed.error_code == "MODEL_AUTH_FAILED"
    assert "refused the credentials (HTTP 401)" in failed.error_message
    assert "Traceback" not in failed.error_message
    assert len(stand_in.requests) == 1


async def test_a_failed_call_changes_no_plan_state(
    provider: tuple[str, StandIn], tmp_path: Path
) -> None:
    kind, stand_in = provider
    stand_in.script(
        Reply(calls=[("enter_plan_mode", {"objective": "Fix the failing test"})]),
        Reply(calls=[("Glob", {"pattern": "**/*.py"})]),
        Reply("Explored; a plan comes next."),
        Fail(500),
        Fail(502),
        Fail(503),
    )
    session, _ = await open_session(PROVIDERS[kind], tmp_path)
    await turn(session, "Fix the failing test", kind)
    [enter] = await session.pending()
    await turn(session, PlanSession.confirm_enter(enter, True), kind)
    before = await session.record()
    journal = await session.journal()
    assert before is not None and before.is_gate_active()

    events = await turn(session, "write the plan now", kind)
    [failed] = [event for event in events if event.error_code]
    assert failed.error_code == "MODEL_UNAVAILABLE"
    assert "after 3 attempts" in failed.error_message
    assert len(stand_in.requests) == 6
    assert await session.record() == before
    assert await session.journal() == journal
    assert await session.pending() == []


def test_a_start_makes_no_outbound_connection(tmp_path: Path) -> None:
    """In a fresh interpreter, with every non-loopback connection refused: resolving an
    OpenAI-compatible model and building the agent loads LiteLLM's bundled cost map."""
    script = """
import socket, sys
tried = []
original = socket.socket.connect
def guarded(self, address):
    tried.append(address)
    raise ConnectionRefusedError("no network")
socket.socket.connect = guarded
socket.create_connection = lambda *a, **k: guarded(None, a[0])
from plangate.models.config import resolve_model
from plangate.agent.coding_agent import build_coding_agent
model = resolve_model("openai:gpt-4o-mini")
build_coding_agent(sys.argv[1], model)
import litellm
from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info
info = get_model_cost_map_source_info()
assert info["source"] == "local", info
assert "gpt-4o-mini" in litellm.model_cost
assert tried == [], tried
print("ok")
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"
