"""OpenTelemetry spans and events for governance: gate decisions, journaled facts (plan
transitions, human requests opened and answered) and protocol routing.

They go through the OpenTelemetry API that ADK itself uses, so they nest under ADK's own
invocation and tool spans and reach whatever exporter the host configured. With no
provider configured the API answers with its no-op tracer: every hook checks
``is_recording()`` before it builds a single attribute, and none of them reads the store.
``configure_from_env`` is what the ``plangate`` commands call at start.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.util.types import AttributeValue

from plangate.journal.events import JournalEvent
from plangate.plan.gate import GateDecision
from plangate.plan.record import PlanRecord, PlanStatus
from plangate.policy.policy_file import Decision, PolicyVerdict
from plangate.protocol.intent import IntentTransition
from plangate.protocol.router import RouteDecision
from plangate.sandbox import Profile
from plangate.store.intents import RunBinding

__all__ = [
    "GATE_SPAN",
    "JOURNAL_SPAN",
    "ROUTE_SPAN",
    "configure_from_env",
    "event_attributes",
    "gate_decided",
    "human_request",
    "journaled",
    "routed",
    "traced",
    "traced_gate",
]

GATE_SPAN = "plangate.gate"
JOURNAL_SPAN = "plangate.journal"
ROUTE_SPAN = "plangate.route"

GATE_CODE = "PLAN_MODE_GATE"
"""The code of every plan-gate refusal."""
POLICY_DENIED_CODE = "POLICY_DENIED"
"""The code of a call the policy file denies."""

_tracer = trace.get_tracer("plangate")

_T = TypeVar("_T")
_P = ParamSpec("_P")
Gate = Callable[[Any, dict[str, Any], Any], Awaitable[dict[str, Any] | None]]

# Journal details that carry what the user or the model wrote (tool arguments, diffs) stay
# in plangate's own journal: telemetry leaves the machine.
_PRIVATE_DETAILS = frozenset({"args", "diff", "content"})
_MAX_TEXT = 1000
_REQUEST_KINDS = ("amendment", "edit", "tool")


# -- the gate ------------------------------------------------------------------------------


def traced_gate(gate: Gate) -> Gate:
    """Run ``gate`` in a ``plangate.gate`` span that says whether the call then ran (the
    gate answered nothing) or was answered by the gate (a refusal or a pause)."""

    @functools.wraps(gate)
    async def gate_in_span(
        tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        if not _tracer_is_live():
            return await gate(tool, args, tool_context)
        with _tracer.start_as_current_span(GATE_SPAN) as span:
            result = await gate(tool, args, tool_context)
            if span.is_recording():
                span.set_attribute("plangate.tool", str(getattr(tool, "name", tool)))
                span.set_attribute("plangate.tool.ran", result is None)
            return result

    return gate_in_span


def gate_decided(
    tool: str, decision: GateDecision | PolicyVerdict, record: PlanRecord | None, planning: bool
) -> None:
    """A verdict of the gate (the plan gate's, or a policy-file deny) on the current span
    and as an event, ``plangate.gate.allowed`` or ``plangate.gate.denied``: the code, the
    reason, the plan status it was made on and the sandbox profile the call's processes
    get."""
    if not _tracer_is_live():
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if isinstance(decision, GateDecision):
        allowed, code = decision.allowed, None if decision.allowed else GATE_CODE
    elif decision.decision is Decision.DENY:
        allowed, code = False, POLICY_DENIED_CODE
    else:
        return  # a policy allow or ask: the plan gate decides next, and that is told
    attributes: dict[str, AttributeValue] = {
        "plangate.tool": tool,
        "plangate.gate.verdict": "allow" if allowed else "deny",
        "plangate.gate.reason": _text(decision.reason),
        "plangate.plan.status": record.status.value if record is not None else "none",
        "plangate.sandbox.profile": (Profile.PLANNING if planning else Profile.ACTING).value,
    }
    if code:
        attributes["plangate.gate.code"] = code
    if record is not None:
        attributes["plangate.plan.id"] = record.id
    span.set_attributes(attributes)
    span.add_event("plangate.gate.allowed" if allowed else "plangate.gate.denied", attributes)


# -- the journal ---------------------------------------------------------------------------


def journaled(
    scope_key: str, transitions: Iterable[Any] = (), events: Iterable[JournalEvent] = ()
) -> None:
    """One ``plangate.journal`` span per commit, with one event per journaled fact (named
    ``plangate.<kind>``, e.g. ``plangate.plan.transition``) and, for a fact that opens or
    answers a human request, a ``plangate.human_request.opened``/``answered`` event.
    ``transitions`` are the committed ``Transition`` objects (their events are journaled
    first, as the store writes them)."""
    if not _tracer_is_live():
        return
    facts = [e for t in transitions for e in t.events]
    facts.extend(events)
    if not facts:  # a commit of state alone (a mirrored selection) tells nothing new
        return
    with _tracer.start_as_current_span(JOURNAL_SPAN) as span:
        if not span.is_recording():
            return
        span.set_attribute("plangate.scope", scope_key)
        for event in facts:
            attributes = event_attributes(event)
            span.add_event(f"plangate.{event.kind}", attributes, _nanos(event.at))
            request = human_request(event)
            if request is not None:
                phase, kind = request
                span.add_event(
                    f"plangate.human_request.{phase}",
                    {**attributes, "plangate.request.kind": kind},
                    _nanos(event.at),
                )
        span.set_attribute("plangate.journal.count", len(facts))


def told_when_committed(commit: Callable[_P, Awaitable[_T]]) -> Callable[_P, Awaitable[_T]]:
    """Tell the facts of a plan commit (``PlanRuntime.commit``: its ``scope``,
    ``transitions`` and ``events``) once it has committed; a compare-and-set that lost
    tells nothing."""
    signature = inspect.signature(commit)

    @functools.wraps(commit)
    async def committed(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        result = await commit(*args, **kwargs)
        if _tracer_is_live():
            given = signature.bind(*args, **kwargs).arguments
            journaled(given["scope"].key, given.get("transitions", ()), given.get("events", ()))
        return result

    return committed


def event_attributes(event: JournalEvent) -> dict[str, AttributeValue]:
    """A journal event as span-event attributes: its fields, and its scalar details (text
    capped; tool arguments and diffs left out)."""
    attributes: dict[str, AttributeValue] = {
        "plangate.journal.kind": event.kind,
        "plangate.actor": event.actor,
    }
    if event.subject:
        attributes["plangate.subject"] = event.subject
    if event.from_state is not None:
        attributes["plangate.from_state"] = event.from_state
    if event.to_state is not None:
        attributes["plangate.to_state"] = event.to_state
    if event.revision is not None:
        attributes["plangate.revision"] = event.revision
    if event.sha256 is not None:
        attributes["plangate.sha256"] = event.sha256
    for key, value in event.detail.items():
        if key in _PRIVATE_DETAILS:
            continue
        converted = _attribute(value)
        if converted is not None:
            attributes[f"plangate.detail.{key}"] = converted
    return attributes


def human_request(event: JournalEvent) -> tuple[str, str] | None:
    """``(phase, kind)`` when ``event`` opens or answers a human request: phase ``opened``
    or ``answered``; kind ``enter``, ``approval``, ``question``, ``amendment``, ``edit``
    or ``tool``."""
    kind = event.kind
    if kind == "plan.question":
        return "opened", "question"
    if kind == "plan.answered":
        return "answered", "question"
    for request in _REQUEST_KINDS:
        if kind == f"plan.{request}.requested":
            return "opened", request
        if kind == f"plan.{request}":
            return "answered", request
    if kind != "plan.transition" or event.from_state == event.to_state:
        return None
    for status, request in (
        (PlanStatus.PENDING_APPROVAL, "approval"),
        (PlanStatus.PENDING_ENTER, "enter"),
    ):
        if event.to_state == status.value:
            return "opened", request
        if event.from_state == status.value:
            return "answered", request
    return None


# -- protocol routing ----------------------------------------------------------------------


def traced(name: str) -> Callable[[Callable[..., Awaitable[_T]]], Callable[..., Awaitable[_T]]]:
    """Run an async function in a span called ``name``; an error it raises is recorded on
    the span with its code (``plangate.error.code``) when it carries one."""

    def decorate(function: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
        @functools.wraps(function)
        async def in_span(*args: Any, **kwargs: Any) -> _T:
            if not _tracer_is_live():
                return await function(*args, **kwargs)
            with _tracer.start_as_current_span(name) as span:
                try:
                    return await function(*args, **kwargs)
                except Exception as exc:
                    code = getattr(exc, "code", None)
                    if isinstance(code, str) and span.is_recording():
                        span.set_attribute("plangate.error.code", str(code))
                    raise

        return in_span

    return decorate


def routed(
    decision: RouteDecision, binding: RunBinding | None, change: IntentTransition | None
) -> None:
    """The routing decision a run starts with, on the current span and as a
    ``plangate.protocol.routed`` event: the protocol ``id@version``, why it was chosen,
    and the session-intent revision the run is bound to (and how the route changed it)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, AttributeValue] = {
        "plangate.protocol": str(decision.protocol),
        "plangate.protocol.id": decision.protocol.id,
        "plangate.protocol.version": decision.protocol.version,
        "plangate.route.source": decision.source,
        "plangate.route.reason_codes": tuple(decision.reason_codes),
        "plangate.route.task_relation": decision.task_relation,
        "plangate.intent.change": change.kind if change is not None else "none",
    }
    if binding is not None and binding.active_revision_id is not None:
        attributes["plangate.intent.revision"] = binding.active_revision_id
    span.set_attributes(attributes)
    span.add_event("plangate.protocol.routed", attributes)


# -- configuration ---------------------------------------------------------------------------

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_EXPORTER_MODULE = "opentelemetry.exporter.otlp.proto.http.trace_exporter"


def configure_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """Export over OTLP/HTTP where the standard ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables
    point (through ADK's own setup, so ADK's spans and plangate's go to the same place).

    Does nothing when no endpoint is set or ``OTEL_SDK_DISABLED`` is true. Returns a
    one-line problem to show the user (the exporter package is missing), else None.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(env.get(name, "").strip() for name in _ENDPOINT_VARIABLES):
        return None
    try:
        importlib.import_module(_EXPORTER_MODULE)
    except ImportError:
        return (
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed; "
            "telemetry is off (pip install 'plangate[otel]')"
        )
    from google.adk.telemetry.setup import maybe_set_otel_providers
    from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource

    detected = OTELResourceDetector().detect()
    if SERVICE_NAME not in detected.attributes:
        detected = detected.merge(Resource({SERVICE_NAME: "plangate"}))
    maybe_set_otel_providers(otel_resource=Resource.create(dict(detected.attributes)))
    return None


# -- helpers -------------------------------------------------------------------------------


_live: list[bool] = [False]


def _tracer_is_live() -> bool:
    """Whether a real tracer provider is installed (the API's default proxy is not one).

    Cheaper than opening a no-op span: the gate and the journal hook ask on every call.
    The API lets a provider be set only once, so a yes is kept. A no asks again, but
    ``get_tracer_provider`` looks the environment up each time (1 us, half a gate check),
    so while the API's global is still unset and no provider is named in the
    environment the answer is no without asking."""
    if _live[0]:
        return True
    if getattr(trace, "_TRACER_PROVIDER", True) is None and not _PROVIDER_IN_ENVIRONMENT:
        return False
    _live[0] = not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return _live[0]


_PROVIDER_IN_ENVIRONMENT = OTEL_PYTHON_TRACER_PROVIDER in os.environ
"""Whether the environment names a provider the API would load (checked at import)."""


def _nanos(at: float) -> int:
    return int(at * 1_000_000_000)


def _text(value: str) -> str:
    return value if len(value) <= _MAX_TEXT else value[: _MAX_TEXT - 1] + "…"


def _attribute(value: Any) -> AttributeValue | None:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return tuple(_text(v) for v in value)  # type: ignore[arg-type]
    return None
