"""Choosing a model by one setting; a bad setting is a clear error."""

from __future__ import annotations

import importlib.util

import pytest
from google.adk.models.google_llm import Gemini

from plangate.models.config import describe_model, resolve_model
from plangate.models.demo import DemoModel
from plangate.models.retrying import RetryPolicy


def test_demo_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANGATE_MODEL", raising=False)
    model = resolve_model(None)
    assert isinstance(model, DemoModel)
    assert describe_model(model) == "offline demo (scripted, not an LLM)"


def test_gemini_names_go_to_adks_gemini_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for spec, name in [
        ("gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini:gemini-2.5-pro", "gemini-2.5-pro"),
    ]:
        model = resolve_model(spec)
        # ADK's own type: ADK decides how to replay call ids by the model's type.
        assert isinstance(model, Gemini) and model.model == name
        assert describe_model(model) == name
    monkeypatch.setenv("PLANGATE_MODEL", "gemini-2.5-flash")
    assert resolve_model(None).model == "gemini-2.5-flash"


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("PLANGATE_MODEL_RETRIES", "many", "PLANGATE_MODEL_RETRIES='many' is not a number"),
        ("PLANGATE_MODEL_RETRIES", "0", "PLANGATE_MODEL_RETRIES"),
        ("PLANGATE_MODEL_RETRY_DELAY", "-1", "PLANGATE_MODEL_RETRY_DELAY"),
    ],
)
def test_a_bad_retry_setting_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=message):
        resolve_model("gemini-2.5-flash")


def test_retry_waits_grow_and_are_bounded() -> None:
    policy = RetryPolicy(attempts=6, initial_delay=1, multiplier=2, max_delay=5)
    assert [policy.delay(n) for n in range(5)] == [1, 2, 4, 5, 5]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "unknown model 'gpt-4o'"),
        ("openai:", "needs a name"),
        ("mistral:large", "unknown model provider 'mistral'"),
    ],
)
def test_bad_settings_are_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_model(spec)


@pytest.mark.skipif(
    importlib.util.find_spec("litellm") is not None, reason="the models extra is installed"
)
@pytest.mark.parametrize("spec", ["openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5"])
def test_other_providers_name_the_extra_they_need(spec: str) -> None:
    with pytest.raises(ValueError, match=r"pip install 'plangate\[models\]'"):
        resolve_model(spec)
