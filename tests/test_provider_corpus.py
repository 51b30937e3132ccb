"""The shipped agent (coding tools, Plan Mode, data tools, protocol routing) on every
provider wire plangate speaks, through the real Runner: the whole demo (plan -> question
-> approve -> implement -> tests pass) and the batched steps a real model sends -- a read
beside a question, the plan written and submitted together, two questions at once --
with each provider's stream shapes: OpenAI chat completions (arguments in fragments,
interleaved between calls by index, reasoning_content), OpenAI Responses (through
LiteLLM's bridge), Anthropic Messages (signed thinking blocks, ``input_json_delta``
fragments), Gemini (thought parts, a signed call, empty text parts), and a gateway that
gives every call of a step the same id. One stand-in server for the module."""

from __future__ import annotations

import importlib.util
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents.run_config import RunConfig

from conftest import require_service
from harness import agreeing_reply, tool_results
from plangate.adk.contract import StreamingMode
from plangate.adk.protocols import get_protocol_state
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.data import DataCatalog
from plangate.models.config import resolve_model
from plangate.models.demo import FIX, OPTIONS, QUESTION, SCOPE, TEST_COMMAND
from plangate.plan import PlanRecord, PlanStatus
from protocol_support import classification
from provider_standins import API_KEY, GEMINI_SIGNATURE, SIGNATURE, Reply, StandIn, Wire, serve


@dataclass(frozen=True)
class Provider:
    model: str
    stream: bool
    wire: Wire = field(default_factory=Wire)
    thinking: bool = True

    @property
    def kind(self) -> str:
        """Which wire format the requests use."""
        if self.model.startswith("anthropic:"):
            return "anthropic"
        if self.model.startswith("gemini"):
            return "gemini"
        return "responses" if self.model in RESPONSES_MODELS else "openai"


RESPONSES_MODELS = ("openai:responses/gpt-4o-mini", "openai:gpt-5-codex")
"""LiteLLM sends these to ``/v1/responses``: an explicit ``responses/`` name, or a model
its cost map lists as Responses-only."""

PROVIDERS = {
    "openai-json": Provider("openai:gpt-4o-mini", stream=False),
    "openai-sse": Provider(
        "openai:gpt-4o-mini", stream=True, wire=Wire(fragment=7, interleave=True, empty_text=True)
    ),
    "openai-gateway-repeated-id": Provider(
        "openai:gpt-4o-mini", stream=True, wire=Wire(fragment=11, repeated_id=True)
    ),
    "responses-json": Provider("openai:responses/gpt-4o-mini", stream=False),
    "responses-sse": Provider("openai:gpt-5-codex", stream=True, wire=Wire(fragment=9)),
    "anthropic-json": Provider("anthropic:claude-sonnet-4-5", stream=False),
    "anthropic-sse": Provider(
        "anthropic:claude-sonnet-4-5", stream=True, wire=Wire(fragment=5, empty_text=True)
    ),
    "gemini-json": Provider("gemini-2.5-flash", stream=False, wire=Wire(empty_text=True)),
    "gemini-sse": Provider("gemini-2.5-flash", stream=True, wire=Wire(empty_text=True)),
}

PLAN = f"""# Fix over-reservation in `Stock.reserve`

## Steps
1. Change the guard in `inventory/stock.py` to `quantity > on_hand`
2. Run the test suite with `{TEST_COMMAND}`
"""
THINKING = "The guard looks off by one; check before changing it."


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    if importlib.util.find_spec("litellm") is None:
        require_service("the models extra (litellm) is not installed")
    with serve(StandIn()) as server, pytest.MonkeyPatch.context() as patch:
        base = server.base_url
        for name, value in {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": f"{base}/v1",
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": base,
            "GOOGLE_API_KEY": API_KEY,
            "GOOGLE_GEMINI_BASE_URL": base,
            "PLANGATE_MODEL_RETRIES": "1",
        }.items():
            patch.setenv(name, value)
        for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_API_KEY", "ANTHROPIC_API_BASE"):
            patch.delenv(name, raising=False)
        yield server


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


@pytest.fixture(params=list(PROVIDERS))
def provider(
    request: pytest.FixtureRequest, stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Provider]:
    """A provider's wire on the module's stand-in; no connection leaves the loopback."""
    chosen = PROVIDERS[request.param]
    stand_in.reset()
    stand_in.wire = chosen.wire
    stand_in.side_answer = classification("general-task", "replace")
    outside: list[Any] = []
    original = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else str(address)
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1"):
            outside.append(address)
            raise ConnectionRefusedError(f"test guard: no network ({address})")
        return original(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield chosen
    assert outside == [], "a model call reached beyond 127.0.0.1"


class Drive:
    """The shipped agent on one provider, driven through PlanSession as a user who says
    yes to every request."""

    def __init__(self, provider: Provider, session: PlanSession, workspace: Path) -> None:
        self.provider = provider
        self.session = session
        self.workspace = workspace
        self.events: list[Any] = []

    @classmethod
    async def open(
        cls, provider: Provider, tmp_path: Path, catalog: DataCatalog, **state: Any
    ) -> Drive:
        workspace = copy_sample_workspace(tmp_path / "ws")
        agent = build_coding_agent(workspace, resolve_model(provider.model), data=catalog)
        runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'plangate.db'}")
        return cls(provider, await PlanSession.open(runner, state=state or None), workspace)

    async def run(self, message: Any) -> list[Any]:
        config = RunConfig(streaming_mode=StreamingMode.SSE) if self.provider.stream else None
        events = [event async for event in self.session.run(message, run_config=config)]
        failed = [event.error_message for event in events if event.error_code]
        assert failed == [], failed
        self.events += events
        return events

    async def answer_all(self) -> list[str]:
        """Answer every open request (each once); resume once all are answered. Returns
        the kinds answered, in order."""
        pending = await self.session.pending()
        waiting = None
        for request in pending:
            waiting = await self.session.submit(agreeing_reply(request))
        assert waiting is not None and waiting.ready, waiting
        await self.run(waiting.message)
        return [request.kind for request in pending]

    def results(self, name: str | None) -> list[dict[str, Any]]:
        return [
            r for event in self.events if not event.partial for r in tool_results([event], name)
        ]

    async def record(self) -> PlanRecord:
        record = await self.session.record()
        assert record is not None
        return record

    async def protocol_status(self) -> str:
        state = get_protocol_state(await self.session.session())
        assert state is not None
        return state["run_status"]


def think(provider: Provider) -> str:
    return THINKING if provider.thinking else ""


# -- what reached the provider ------------------------------------------------------------


def sent_results(kind: str, body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(call id, result text) of every tool result a request carried, in its wire format."""
    if kind == "openai":
        return [
            (m.get("tool_call_id"), m["content"]) for m in body["messages"] if m["role"] == "tool"
        ]
    if kind == "responses":
        return [
            (item.get("call_id"), _text(item["output"]))
            for item in body["input"]
            if item.get("type") == "function_call_output"
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
        (part["functionResponse"].get("id"), json.dumps(part["functionResponse"]["response"]))
        for content in body["contents"]
        for part in content["parts"]
        if "functionResponse" in part
    ]


def sent_calls(kind: str, body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(call id, name) of every tool call the request replays from the model's turns."""
    if kind == "openai":
        return [
            (c["id"], c["function"]["name"])
            for m in body["messages"]
            if m["role"] == "assistant"
            for c in m.get("tool_calls") or []
        ]
    if kind == "responses":
        return [
            (item["call_id"], item["name"])
            for item in body["input"]
            if item.get("type") == "function_call"
        ]
    if kind == "anthropic":
        return [
            (block["id"], block["name"])
            for m in body["messages"]
            if m["role"] == "assistant" and isinstance(m["content"], list)
            for block in m["content"]
            if block["type"] == "tool_use"
        ]
    return [
        (part["functionCall"].get("id"), part["functionCall"]["name"])
        for content in body["contents"]
        for part in content["parts"]
        if "functionCall" in part
    ]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)


def assert_history_is_well_formed(kind: str, stand_in: StandIn) -> None:
    """Every request a provider would accept as to call ids: each replayed call has
    exactly one result with its id, and no result answers a call it was not sent."""
    if kind == "gemini":
        return  # no ids on this wire
    for received in stand_in.step_requests():
        calls = [call_id for call_id, _ in sent_calls(kind, received.body)]
        results = [call_id for call_id, _ in sent_results(kind, received.body)]
        assert len(calls) == len(set(calls)), f"a call id is replayed twice: {calls}"
        assert sorted(map(str, results)) == sorted(map(str, calls)), (calls, results)


# -- the demo, with its batched steps -----------------------------------------------------


def demo_steps(thinking: str = "") -> list[Reply]:
    """The demo as a model on the wire plays it, with its two batched steps: a read
    beside the question, and the plan written and submitted together."""
    todos = [
        {"content": "Fix the guard", "status": "in_progress"},
        {"content": "Run the tests", "status": "pending"},
    ]
    return [
        Reply(
            "This touches code and tests, so I will plan first.",
            [("enter_plan_mode", {"objective": "Fix the failing test"})],
        ),
        Reply(calls=[("Glob", {"pattern": "**/*.py"})], thinking=thinking),
        # A read beside a question: the read runs, the question pauses.
        Reply(
            calls=[
                ("Read", {"path": "inventory/stock.py"}),
                ("ask_user_question", {"question": QUESTION, "options": OPTIONS}),
            ],
            thinking=thinking,
        ),
        Reply("Trying the fix right away to show the gate:", [("Edit", FIX)]),
        # The plan written and submitted in one step.
        Reply(
            calls=[
                ("update_plan_content", {"content": PLAN, "mode": "replace", "scope": SCOPE}),
                ("exit_plan_mode", {"summary": "Fix the off-by-one guard"}),
            ],
            thinking=thinking,
        ),
        Reply("Approved. Implementing.", [("todo_write", {"todos": todos})]),
        Reply(calls=[("Edit", FIX)]),
        Reply(calls=[("Bash", {"command": TEST_COMMAND})]),
        Reply("Done. Plan implemented; the tests pass."),
    ]


async def test_the_demo_with_batched_steps_on_every_provider_wire(
    provider: Provider, stand_in: StandIn, tmp_path: Path, catalog: DataCatalog
) -> None:
    stand_in.script(*demo_steps(think(provider)))
    drive = await Drive.open(provider, tmp_path, catalog)

    await drive.run("Fix the failing test")
    assert await drive.answer_all() == ["enter"]
    [question] = await drive.session.pending()
    assert question.kind == "question"
    assert await drive.protocol_status() == "running"
    assert await drive.answer_all() == ["question"]
    assert (await drive.record()).status is PlanStatus.PENDING_APPROVAL
    assert "if quantity > on_hand + 1:" in (drive.workspace / FIX["path"]).read_text()
    assert await drive.answer_all() == ["exit"]

    assert await drive.session.pending() == []
    assert (await drive.record()).status is PlanStatus.APPROVED
    assert "if quantity > on_hand:\n" in (drive.workspace / FIX["path"]).read_text()
    [ran] = drive.results("Bash")
    assert ran["exit_code"] == 0 and "5 passed" in ran["stdout"], ran
    [read] = drive.results("Read")
    assert "on_hand" in read["content"]
    refused, edited = drive.results("Edit")
    assert refused["code"] == "PLAN_MODE_GATE" and "error" not in edited
    assert [r for r in drive.results(None) if "PROTOCOL" in str(r.get("code"))] == []
    record = await drive.record()
    assert [(q.question, q.answer) for q in record.asked_questions] == [(QUESTION, OPTIONS[0])]
    assert await drive.protocol_status() == "completed"

    kind = provider.kind
    requests = stand_in.step_requests()
    assert len(requests) == 9 and stand_in.steps == []
    assert all(r.provider == kind for r in requests)
    assert_history_is_well_formed(kind, stand_in)
    # The answer and the read both reached the model, in the request after the batch.
    after_question = dict(sent_results(kind, requests[3].body)[-2:])
    assert len(after_question) == 2 or kind == "gemini"
    texts = [text for _, text in sent_results(kind, requests[3].body)]
    assert any(OPTIONS[0] in text for text in texts), texts
    assert any("on_hand" in text for text in texts), texts
    assert_reasoning_replayed(provider, requests[3].body)
    final = [e for e in drive.events if e.content and not e.partial and e.is_final_response()]
    assert final and "the tests pass" in "".join(
        p.text or "" for p in final[-1].content.parts or [] if not p.thought
    )


def assert_reasoning_replayed(provider: Provider, body: dict[str, Any]) -> None:
    """What the provider needs back from a thinking step: Anthropic its signed thinking
    block before the tool use, Gemini the signature on the call it signed."""
    if not provider.thinking:
        return
    wire = json.dumps(body)
    if provider.kind == "anthropic":
        assert SIGNATURE in wire, "the signed thinking block was not sent back"
    if provider.kind == "gemini":
        assert GEMINI_SIGNATURE in wire, "the signed call was not sent back with its signature"


# -- two questions in one step -------------------------------------------------------------


async def test_two_questions_in_one_step_are_each_answered_once_on_every_provider_wire(
    provider: Provider, stand_in: StandIn, tmp_path: Path, catalog: DataCatalog
) -> None:
    stand_in.script(
        Reply(
            "Two things first.",
            [
                ("ask_user_question", {"question": "Which file?", "options": ["stock", "cart"]}),
                ("ask_user_question", {"question": "Which test?", "options": ["all", "one"]}),
            ],
            thinking=think(provider),
        ),
        Reply(calls=[("Glob", {"pattern": "**/*.py"}), ("Read", {"path": "inventory/stock.py"})]),
        Reply(
            calls=[
                ("update_plan_content", {"content": PLAN, "mode": "replace"}),
                ("exit_plan_mode", {}),
            ]
        ),
        Reply(calls=[("Write", {"path": "NOTES.md", "content": "rounded\n"})]),
        Reply("Done."),
    )
    drive = await Drive.open(provider, tmp_path, catalog, agent_mode="plan")
    await drive.run("round the stock")
    pending = await drive.session.pending()
    assert [p.payload["message"] for p in pending] == ["Which file?", "Which test?"]
    assert len({p.call_id for p in pending}) == 2, "each question is its own request"
    assert await drive.answer_all() == ["question", "question"]
    assert await drive.answer_all() == ["exit"]

    assert await drive.session.pending() == []
    assert (drive.workspace / "NOTES.md").read_text() == "rounded\n"
    record = await drive.record()
    assert [(q.question, q.answer) for q in record.asked_questions] == [
        ("Which file?", "stock"),
        ("Which test?", "all"),
    ]
    assert [r for r in drive.results(None) if "error" in r] == []
    assert await drive.protocol_status() == "completed"

    kind = provider.kind
    requests = stand_in.step_requests()
    assert len(requests) == 5 and stand_in.steps == []
    assert_history_is_well_formed(kind, stand_in)
    answers = [text for _, text in sent_results(kind, requests[1].body)]
    assert len(answers) == 2, "both answers go back in one request, once each"
    assert any('"stock"' in a for a in answers) and any('"all"' in a for a in answers)
    glob, read = sent_results(kind, requests[2].body)[-2:]
    assert "stock.py" in glob[1] and "on_hand" in read[1]
