"""OpenTelemetry spans and events of a real demo run (the reference agent, the offline demo
model and the data catalog through the real Runner), read back from the SDK's in-memory
exporter; and ``plangate chat`` exporting over OTLP/HTTP to a stand-in collector."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from google.adk.agents import LlmAgent
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harness import Harness, make_agent, run_agreeing
from plangate.adk import PlanOptions, telemetry
from plangate.adk.protocols import ProtocolOptions, get_protocol_state, setup_protocols
from plangate.adk.runner import build_runner
from plangate.adk.runtime import STATE_KIND
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.data_agent import build_data_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.data import DataCatalog, DataTools, data_adk_tools
from plangate.journal.events import JournalEvent
from plangate.models.demo import DemoModel
from plangate.models.scripted import ScriptedLlm, call, text
from protocol_support import ScriptedClassifier

# -- the in-memory exporter ------------------------------------------------------------------


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """The SDK's in-memory exporter on the global provider, as a host would install it.

    The global provider can be set once per process, so a provider already set (by another
    test module) gets the exporter added instead; it stops keeping spans after this module.
    """
    memory = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    parent = span.parent
    return next((s for s in spans if parent and s.context.span_id == parent.span_id), None)


def events(spans: Sequence[ReadableSpan], prefix: str) -> list[dict[str, Any]]:
    """Every span event whose name starts with ``prefix``, in the order they were made."""
    found = []
    for span in spans:
        for event in span.events:
            if event.name.startswith(prefix):
                found.append({"event": event.name, **dict(event.attributes or {})})
    return found


# -- a real demo run -------------------------------------------------------------------------


async def demo_run(tmp_path: Path, url: str) -> PlanSession:
    """The terminal demo's walk-through: the agent asks to enter Plan Mode, explores, is
    refused an edit, asks a question, submits the plan; the user confirms, answers and
    approves; the agent implements. The data catalog puts protocol routing in the run."""
    agent = build_coding_agent(
        copy_sample_workspace(tmp_path / "ws"),
        DemoModel(),
        data=DataCatalog(cache_dir=tmp_path / "data"),
    )
    session = await PlanSession.open(build_runner(agent, database_url=url))
    await run_agreeing(session, "Fix the failing test")
    return session


async def test_a_demo_run_reports_gate_decisions_transitions_requests_and_routing(
    spans: InMemorySpanExporter, tmp_path: Path, database_url: str
) -> None:
    session = await demo_run(tmp_path, database_url)
    finished = spans.get_finished_spans()

    # The refused edit: a deny with the gate's code, inside ADK's own tool span.
    denied = next(
        s for s in named(finished, telemetry.GATE_SPAN) if s.attributes["plangate.tool"] == "Edit"
    )
    assert denied.attributes["plangate.gate.verdict"] == "deny"
    assert denied.attributes["plangate.gate.code"] == "PLAN_MODE_GATE"
    assert denied.attributes["plangate.gate.reason"] == "it has side effects"
    assert denied.attributes["plangate.plan.status"] == "exploring"
    assert denied.attributes["plangate.sandbox.profile"] == "planning"
    assert denied.attributes["plangate.tool.ran"] is False
    assert [e.name for e in denied.events] == ["plangate.gate.denied"]
    tool_span = parent_of(denied, finished)
    assert tool_span is not None and tool_span.name == "execute_tool Edit"

    # Allowed calls say so too: a proven read-only command while planning, and the edit
    # that runs once the plan is approved.
    allowed = [s for s in named(finished, telemetry.GATE_SPAN) if s.attributes["plangate.tool.ran"]]
    assert {
        (s.attributes["plangate.tool"], s.attributes["plangate.plan.status"]) for s in allowed
    } >= {("Bash", "exploring"), ("Edit", "approved")}
    assert all(s.attributes["plangate.gate.verdict"] == "allow" for s in allowed)

    # The plan's transitions, in the order they were committed, with revision and hash.
    moves = events(finished, "plangate.plan.transition")
    assert [(m.get("plangate.from_state"), m["plangate.to_state"]) for m in moves] == [
        (None, "pending_enter"),
        ("pending_enter", "exploring"),
        ("exploring", "drafting"),
        ("drafting", "pending_approval"),
        ("pending_approval", "approved"),
    ]
    approved = moves[-1]
    assert approved["plangate.actor"] == "user" and approved["plangate.revision"] == 1
    record = await session.record()
    assert record is not None and approved["plangate.sha256"] == record.sha256

    # Each human request opened and answered, by kind.
    requests = [
        (e["event"].rsplit(".", 1)[1], e["plangate.request.kind"])
        for e in events(finished, "plangate.human_request.")
    ]
    assert requests == [
        ("opened", "enter"),
        ("answered", "enter"),
        ("opened", "question"),
        ("answered", "question"),
        ("opened", "approval"),
        ("answered", "approval"),
    ]

    # One event per plan fact the journal committed, in the journal's order; what the
    # model wrote into tool arguments stays in the journal.
    journal = [entry.event.kind for entry in await session.journal()]
    plan_facts = [kind for kind in journal if kind.startswith("plan.")]
    told = events(finished, "plangate.plan.")
    assert [e["plangate.journal.kind"] for e in told] == plan_facts
    gate_fact = next(e for e in told if e["plangate.journal.kind"] == "plan.gate.denied")
    assert gate_fact["plangate.detail.tool"] == "Edit"
    assert not any(key.startswith("plangate.detail.args") for key in gate_fact)

    # The route the run started with, under ADK's agent span, bound to the stored intent.
    (route,) = named(finished, telemetry.ROUTE_SPAN)
    assert route.attributes["plangate.protocol"] == "general-task@1"
    assert route.attributes["plangate.protocol.id"] == "general-task"
    assert route.attributes["plangate.route.reason_codes"] == ("GENERAL_TASK_DEFAULT",)
    assert route.attributes["plangate.intent.change"] == "initial"
    protocol = get_protocol_state(await session.session())
    assert protocol is not None
    assert route.attributes["plangate.intent.revision"] == protocol["intent"]["revision_id"]
    assert [e.name for e in route.events] == ["plangate.protocol.routed"]
    agent_span = parent_of(route, finished)
    assert agent_span is not None and agent_span.name.startswith("invoke_agent")


# -- the pure parts --------------------------------------------------------------------------


def fact(kind: str, from_state: str | None = None, to_state: str | None = None) -> JournalEvent:
    return JournalEvent(kind=kind, from_state=from_state, to_state=to_state, at=0.0)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (fact("plan.transition", "drafting", "pending_approval"), ("opened", "approval")),
        (fact("plan.transition", "pending_approval", "drafting"), ("answered", "approval")),
        (fact("plan.transition", "pending_approval", "cancelled"), ("answered", "approval")),
        (fact("plan.transition", None, "pending_enter"), ("opened", "enter")),
        (fact("plan.question", "exploring", "exploring"), ("opened", "question")),
        (fact("plan.answered", "exploring", "exploring"), ("answered", "question")),
        (fact("plan.amendment.requested"), ("opened", "amendment")),
        (fact("plan.edit"), ("answered", "edit")),
        (fact("plan.tool.requested"), ("opened", "tool")),
        (fact("plan.transition", "exploring", "drafting"), None),
        (fact("plan.revised", "drafting", "drafting"), None),
        (fact("plan.reply.ignored"), None),
        (fact("plan.gate.denied", "exploring"), None),
    ],
)
def test_which_facts_open_or_answer_a_human_request(
    event: JournalEvent, expected: tuple[str, str] | None
) -> None:
    assert telemetry.human_request(event) == expected


def test_event_attributes_keep_scalars_and_leave_out_what_was_written() -> None:
    event = JournalEvent(
        kind="plan.gate.denied",
        at=1.0,
        revision=2,
        detail={
            "tool": "Write",
            "args": {"content": "secret"},
            "diff": "--- a\n+++ b",
            "wants": ["src/a.py", "src/b.py"],
            "nested": {"x": 1},
            "reason": "x" * 5000,
        },
    )
    attributes = telemetry.event_attributes(event)
    assert attributes["plangate.detail.tool"] == "Write"
    assert attributes["plangate.detail.wants"] == ("src/a.py", "src/b.py")
    assert attributes["plangate.revision"] == 2
    assert len(str(attributes["plangate.detail.reason"])) == 1000
    assert not {"plangate.detail.args", "plangate.detail.diff", "plangate.detail.nested"} & set(
        attributes
    )


# -- configuration from the environment ------------------------------------------------------


def test_nothing_is_configured_without_an_endpoint() -> None:
    assert telemetry.configure_from_env({}) is None
    assert telemetry.configure_from_env({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "x"}) is None
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}
    assert telemetry.configure_from_env(disabled) is None


def test_a_missing_exporter_package_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """The exporter import fails as it does when the package is not installed."""
    script = (
        "import sys\n"
        "sys.modules['opentelemetry.exporter.otlp.proto.http.trace_exporter'] = None\n"
        "from plangate.cli.main import main\n"
        "sys.exit(main(['chat']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        input=b"/quit\n",
        capture_output=True,
        timeout=300,
        env=dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"),
    )
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    lines = [line for line in stderr.splitlines() if "OTEL" in line or "Traceback" in line]
    assert lines == [
        "plangate: OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed; "
        "telemetry is off (pip install 'plangate[otel]')"
    ]


# -- plangate chat exporting to a stand-in collector -----------------------------------------


class Collector:
    """A stand-in OTLP/HTTP collector: records the trace exports POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.exports: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.url = ""

    def app(self) -> Starlette:
        async def receive(request: Request) -> Response:
            self.paths.append(request.url.path)
            if request.url.path == "/v1/traces":
                export = ExportTraceServiceRequest()
                export.ParseFromString(await request.body())
                self.exports.append(export)
            return Response(b"", media_type="application/x-protobuf")

        paths = ["/v1/traces", "/v1/metrics", "/v1/logs"]
        return Starlette(routes=[Route(p, receive, methods=["POST"]) for p in paths])

    def spans(self) -> list[tuple[str, dict[str, Any], str]]:
        """``(span name, attributes, service name)`` of every span received."""
        found = []
        for export in self.exports:
            for resource_spans in export.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            (span.name, _attributes(span.attributes), resource["service.name"])
                        )
        return found


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


@contextmanager
def collector() -> Iterator[Collector]:
    stand_in = Collector()
    config = uvicorn.Config(
        stand_in.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the stand-in collector did not start")
        time.sleep(0.01)
    stand_in.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    try:
        yield stand_in
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_plangate_chat_exports_spans_where_the_otlp_endpoint_points(tmp_path: Path) -> None:
    with collector() as otlp:
        result = subprocess.run(
            [sys.executable, "-m", "plangate.cli.main", "chat"],
            cwd=tmp_path,
            input=b"Fix the failing test\ny\n1\n",
            capture_output=True,
            timeout=300,
            env=dict(os.environ, COLUMNS="120", OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url),
        )
        stderr = result.stderr.decode()
        # Piped input cannot approve the plan, so chat ends with 1 at the approval.
        assert result.returncode == 1, result.stdout.decode() + stderr
        assert "Traceback" not in stderr
        received = otlp.spans()
    names = {name for name, _, _ in received}
    assert {telemetry.GATE_SPAN, telemetry.JOURNAL_SPAN} <= names, names
    assert any(name.startswith("invoke_agent") for name in names), names
    assert {service for _, _, service in received} == {"plangate"}
    denied = [
        attributes
        for name, attributes, _ in received
        if name == telemetry.GATE_SPAN and attributes.get("plangate.gate.verdict") == "deny"
    ]
    assert denied and denied[0]["plangate.gate.code"] == "PLAN_MODE_GATE"
    assert "/v1/traces" in otlp.paths


async def test_the_data_demo_reports_each_route_the_refusal_and_the_handoff(
    spans: InMemorySpanExporter, tmp_path: Path, database_url: str
) -> None:
    """An unsure classifier routes to general-task and its data call is refused; "try
    again" inherits the task, hands off to data-analysis and moves the session's intent."""
    agent = build_data_agent(DemoModel(), DataCatalog(cache_dir=tmp_path / "data"))
    h = Harness(agent, database_url)
    await h.start()
    await h.send("revenue by region last quarter")
    first = get_protocol_state(await h.session(), agent.name)
    await h.send("try again")
    second = get_protocol_state(await h.session(), agent.name)
    assert first is not None and second is not None
    finished = spans.get_finished_spans()

    routes = [s.attributes for s in named(finished, telemetry.ROUTE_SPAN)]
    assert [
        (r["plangate.protocol"], r["plangate.route.reason_codes"], r["plangate.intent.change"])
        for r in routes
    ] == [
        ("general-task@1", ("GENERAL_TASK_DEFAULT",), "initial"),
        ("general-task@1", ("SESSION_INTENT_INHERITED",), "none"),
    ]
    assert routes[0]["plangate.intent.revision"] == first["intent"]["revision_id"]
    # The second run starts on the same revision; its handoff then moves the intent.
    assert routes[1]["plangate.intent.revision"] == first["intent"]["revision_id"]
    assert second["intent"]["revision_id"] != first["intent"]["revision_id"]

    refused = events(finished, "plangate.protocol.action.rejected")
    assert refused and refused[0]["plangate.detail.reasonCode"].startswith("ACTION_NOT_ALLOWED")
    (accepted,) = events(finished, "plangate.protocol.handoff.accepted")
    assert accepted["plangate.actor"] == agent.name
    started = events(finished, "plangate.protocol.segment.started")
    assert [e["plangate.detail.protocol"] for e in started] == [
        "general-task@1",
        "general-task@1",
        "data-analysis@1",
    ]


def deploy(target: str) -> dict[str, Any]:
    """Deploy the service."""
    return {"deployed": target}


def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"value": key}


DENY_DEPLOY = """
version = 1

[[tool]]
name = "lookup"
effect = "read"
planning = "allow"
acting = "allow"

[[tool]]
name = "deploy"
effect = "network"
planning = "deny"
acting = "deny"
justification = "it reaches production"
"""


async def test_a_policy_deny_in_a_batched_step_is_its_own_gate_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(DENY_DEPLOY)
    model = ScriptedLlm()
    agent = make_agent(model, PlanOptions(policy_file=policy), tools=[deploy, lookup])
    h = Harness(agent, f"sqlite:///{tmp_path / 'p.db'}")
    await h.start({"agent_mode": "plan"})
    model.add([call("deploy", target="prod"), call("lookup", key="a")], [text("done")])
    await h.send("look")
    finished = spans.get_finished_spans()

    gates = {s.attributes["plangate.tool"]: s for s in named(finished, telemetry.GATE_SPAN)}
    denied = gates["deploy"].attributes
    assert denied["plangate.gate.verdict"] == "deny"
    assert denied["plangate.gate.code"] == "POLICY_DENIED"
    assert denied["plangate.gate.reason"] == (
        "policy rule 'deploy' says deny while planning (it reaches production)"
    )
    assert denied["plangate.sandbox.profile"] == "planning"
    assert denied["plangate.tool.ran"] is False
    allowed = gates["lookup"].attributes
    assert allowed["plangate.gate.verdict"] == "allow" and allowed["plangate.tool.ran"] is True
    told = [e["plangate.journal.kind"] for e in events(finished, "plangate.policy.")]
    assert told == ["policy.deny", "policy.allow"]


async def test_a_malformed_protocol_selection_is_a_failed_route_span_with_its_code(
    spans: InMemorySpanExporter, tmp_path: Path, database_url: str
) -> None:
    agent = build_data_agent(DemoModel(), DataCatalog(cache_dir=tmp_path / "data"))
    h = Harness(agent, database_url)
    await h.start({"protocol_selection": "data-analysis@x"})
    await h.send("sales by region")
    (route,) = named(spans.get_finished_spans(), telemetry.ROUTE_SPAN)
    assert route.status.status_code is StatusCode.ERROR
    assert route.attributes["plangate.error.code"] == "PROTOCOL_SELECTION_INVALID"
    assert "plangate.protocol" not in route.attributes


async def test_a_rejected_handoff_is_reported_like_an_accepted_one(
    spans: InMemorySpanExporter, tmp_path: Path, database_url: str
) -> None:
    model = ScriptedLlm().add(
        [call("protocol_handoff", target_protocol="data-analysis@1", reason="again")],
        [text("staying")],
    )
    agent = LlmAgent(
        name="analyst",
        model=model,
        instruction="You analyse data.",
        tools=data_adk_tools(DataTools(DataCatalog(cache_dir=tmp_path / "data"))),
    )
    setup_protocols(agent, ProtocolOptions(classifier=ScriptedClassifier()))
    h = Harness(agent, database_url)
    await h.start()
    await h.send("analyze revenue by region")
    finished = spans.get_finished_spans()
    (proposed,) = events(finished, "plangate.protocol.handoff.proposed")
    (rejected,) = events(finished, "plangate.protocol.handoff.rejected")
    assert proposed["plangate.detail.reason"] == "again"
    assert rejected["plangate.detail.reasonCode"] == "PROTOCOL_HANDOFF_SAME_PROTOCOL"
    assert rejected["plangate.actor"] == "analyst"
    assert events(finished, "plangate.protocol.handoff.accepted") == []


async def test_resetting_a_corrupt_plan_state_is_reported(
    spans: InMemorySpanExporter, database_url: str
) -> None:
    runner = build_runner(make_agent(ScriptedLlm()), database_url=database_url, app_name="reset")
    session = await PlanSession.open(runner)
    store = await session.runtime.store()
    async with store.transaction() as tx:
        await tx.put(STATE_KIND, session.scope.key, {"record": "not a plan"}, expected_version=0)
    assert (await session.leave_plan()).startswith("The corrupt plan state was reset")
    (reset,) = events(spans.get_finished_spans(), "plangate.plan.state.reset")
    assert reset["plangate.actor"] == "user"
    assert reset["plangate.journal.kind"] == "plan.state.reset"
    assert reset["plangate.detail.archive_kind"] == "plan_state_corrupt"
    assert str(reset["plangate.detail.found_version"]) == "1"
