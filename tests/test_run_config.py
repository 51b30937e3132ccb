"""The run config plangate's sessions run turns with: ADK's cheap telemetry path only when
nothing observes it, and whatever the host chose left alone."""

from __future__ import annotations

import pytest
from google.adk.agents.run_config import RunConfig
from google.adk.telemetry.context import TelemetryConfig
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from plangate.adk.contract import StreamingMode
from plangate.adk.run_config import run_config


@pytest.fixture(autouse=True)
def no_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another test module may have installed the process-wide provider already.
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)


def test_unobserved_runs_take_the_stable_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    default = run_config(None)
    assert default is not None and default.telemetry is not None
    assert not default.telemetry.should_use_experimental_genai_semconv
    streaming = run_config(RunConfig(streaming_mode=StreamingMode.SSE))
    assert streaming is not None and streaming.streaming_mode == StreamingMode.SSE
    assert streaming.telemetry is not None
    assert not streaming.telemetry.should_use_experimental_genai_semconv


def test_a_host_choice_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = RunConfig(telemetry=TelemetryConfig(genai_semconv_stability_opt_in="experimental"))
    assert run_config(chosen) is chosen
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    assert run_config(None) is None
    given = RunConfig(streaming_mode=StreamingMode.SSE)
    assert run_config(given) is given


def test_an_installed_tracer_gets_adk_s_own_conventions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    monkeypatch.setattr(trace, "get_tracer_provider", TracerProvider)
    assert run_config(None) is None
