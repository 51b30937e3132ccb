"""Choosing a model: the offline demo by default, real models by one setting.

    demo                      the offline demo model (default)
    gemini-2.5-flash          Gemini through ADK (GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL)
    openai:<model>            any OpenAI-compatible endpoint (OPENAI_API_KEY, OPENAI_BASE_URL):
                              OpenAI, DeepSeek, Ollama, vLLM
    anthropic:<model>         Anthropic (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)
    script:<path.json>        a scripted model playing a JSON script (terminal tests)

``PLANGATE_MODEL`` sets the default. Rate limits and server errors are retried with
backoff (``PLANGATE_MODEL_RETRIES`` attempts, first wait ``PLANGATE_MODEL_RETRY_DELAY``
seconds); a call that still fails ends the run with an error code (``provider_errors``). OpenAI-compatible and Anthropic models need the
``models`` extra (``pip install 'plangate[models]'``).
"""

from __future__ import annotations

import os

from google.adk.models.base_llm import BaseLlm

from plangate.models.retrying import RetryPolicy

__all__ = ["describe_model", "resolve_model"]


def resolve_model(spec: str | None = None, *, surface: str | None = None) -> BaseLlm:
    """The model ``spec`` names; ``surface`` (``terminal``, ``web``, ``editor``) tells the
    offline demo where it runs, so its hints fit what the user sees."""
    spec = (spec or os.environ.get("PLANGATE_MODEL") or "demo").strip()
    if spec == "demo":
        from plangate.models.demo import DemoModel

        return DemoModel.model_validate({"surface": surface})
    provider, sep, name = spec.partition(":")
    if not sep:
        if spec.startswith("gemini"):
            return _gemini(spec)
        raise ValueError(
            f"unknown model {spec!r}: use 'demo', a Gemini name, 'openai:<model>' or "
            "'anthropic:<model>'"
        )
    if not name:
        raise ValueError(f"model {spec!r} needs a name after '{provider}:'")
    if provider == "gemini":
        return _gemini(name)
    if provider == "script":
        from plangate.models.scripted import load_script

        return load_script(name)
    if provider not in ("openai", "anthropic"):
        raise ValueError(f"unknown model provider {provider!r}: use gemini, openai or anthropic")
    policy = RetryPolicy.from_env()
    try:
        from plangate.models.litellm_model import RetryingLiteLlm
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ValueError(
            f"{provider} models need the 'models' extra: pip install 'plangate[models]'"
        ) from exc
    if provider == "openai":
        kwargs = {}
        if base := os.environ.get("OPENAI_BASE_URL"):
            kwargs["api_base"] = base
        return RetryingLiteLlm(f"openai/{name}", provider="OpenAI", policy=policy, **kwargs)
    # ANTHROPIC_BASE_URL, when set, is read by LiteLLM itself.
    return RetryingLiteLlm(f"anthropic/{name}", provider="Anthropic", policy=policy)


def _gemini(name: str) -> BaseLlm:
    from plangate.models.retrying import RetryingGemini

    # GOOGLE_GEMINI_BASE_URL, when set, is read by google-genai itself.
    return RetryingGemini(model=name).with_policy(RetryPolicy.from_env())


def describe_model(model: BaseLlm | str) -> str:
    from plangate.models.demo import DemoModel

    if isinstance(model, DemoModel):
        return "offline demo (scripted, not an LLM)"
    return model if isinstance(model, str) else model.model
