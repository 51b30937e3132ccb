"""The ``RunConfig`` plangate's surfaces run turns with.

ADK's GenAI telemetry (schema 2, its default) converts every model request, tool
declarations and all, into span attributes before it knows whether anything records
them: about 2.5 ms of CPU per run of the served agent, for nothing, when no OpenTelemetry
provider is installed. With none installed, plangate asks ADK for its stable semantic
conventions, which build no such attributes. An installed tracer or logger provider, or
an explicit ``OTEL_SEMCONV_STABILITY_OPT_IN``, or a telemetry config the caller chose,
leaves ADK's behaviour exactly as it is.
"""

from __future__ import annotations

import os

from google.adk.agents.run_config import RunConfig
from google.adk.telemetry.context import TelemetryConfig
from opentelemetry import trace
from opentelemetry._logs import get_logger_provider

# The API's placeholder until a logger provider is set; not re-exported by the package.
from opentelemetry._logs._internal import ProxyLoggerProvider

__all__ = ["run_config"]

_UNOBSERVED = TelemetryConfig(genai_semconv_stability_opt_in="stable")


def _observed() -> bool:
    return (
        not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        or not isinstance(get_logger_provider(), ProxyLoggerProvider)
        or bool(os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN"))
    )


def run_config(given: RunConfig | None = None) -> RunConfig | None:
    """``given`` (or ADK's default), with the cheap telemetry path when nothing observes it."""
    if _observed() or (given is not None and given.telemetry is not None):
        return given
    if given is None:
        return RunConfig(telemetry=_UNOBSERVED)
    return given.model_copy(update={"telemetry": _UNOBSERVED})
