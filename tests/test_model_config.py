"""Choosing a model by one setting; a bad setting is a clear error."""

from __future__ import annotations

import importlib.util

import pytest

from plangate.models.config import describe_model, resolve_model
from plangate.models.demo import DemoModel


def test_demo_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANGATE_MODEL", raising=False)
    model = resolve_model(None)
    assert isinstance(model, DemoModel)
    assert describe_model(model) == "offline demo (scripted, not an LLM)"


def test_gemini_names_go_to_adk(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_model("gemini-2.5-flash") == "gemini-2.5-flash"
    assert resolve_model("gemini:gemini-2.5-pro") == "gemini-2.5-pro"
    monkeypatch.setenv("PLANGATE_MODEL", "gemini-2.5-flash")
    assert resolve_model(None) == "gemini-2.5-flash"


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
