"""Real provider models that retry rate limits and server errors with bounded backoff and
end a failed call as an error response with a code, not a traceback.

They subclass ADK's own ``Gemini`` and ``LiteLlm`` (``litellm_model``) (never wrap them): ADK decides how to
replay call ids by the model's type, so the type must stay what ADK knows. Provider SDK
retries are turned off so one policy applies to every provider.

A call that fails yields one ``LlmResponse`` with ``error_code`` / ``error_message`` and
no content: ADK ends the run on it, nothing enters the conversation, and no tool runs --
so a failed call changes no plan state.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Callable
from typing import Any

from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from plangate.models.provider_errors import classify_failure

__all__ = ["RetryPolicy", "RetryingGemini", "call_with_retries"]

log = logging.getLogger("plangate.models")

RETRIES_ENV = "PLANGATE_MODEL_RETRIES"
RETRY_DELAY_ENV = "PLANGATE_MODEL_RETRY_DELAY"


class RetryPolicy(BaseModel):
    """``attempts`` calls at most; waits ``initial_delay * multiplier**n`` between them,
    never more than ``max_delay`` seconds."""

    model_config = ConfigDict(frozen=True)

    attempts: int = Field(default=4, ge=1, le=10)
    initial_delay: float = Field(default=1.0, ge=0, le=60)
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=20.0, ge=0)

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """``PLANGATE_MODEL_RETRIES`` (attempts) and ``PLANGATE_MODEL_RETRY_DELAY`` (first
        wait, seconds); a bad value is a clear ValueError naming the variable."""
        values: dict[str, Any] = {}
        for env, field, kind in (
            (RETRIES_ENV, "attempts", int),
            (RETRY_DELAY_ENV, "initial_delay", float),
        ):
            raw = os.environ.get(env, "").strip()
            if not raw:
                continue
            try:
                values[field] = kind(raw)
            except ValueError:
                raise ValueError(f"{env}={raw!r} is not a number") from None
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"{RETRIES_ENV}/{RETRY_DELAY_ENV}: {exc}") from None

    def delay(self, retry: int) -> float:
        return min(self.max_delay, self.initial_delay * self.multiplier**retry)


async def call_with_retries(
    call: Callable[[], AsyncGenerator[LlmResponse, None]], policy: RetryPolicy, provider: str
) -> AsyncGenerator[LlmResponse, None]:
    """Play ``call``'s responses; retry it while it fails retryably before yielding any.

    Once a response has been yielded (a stream is under way) a failure is not retried:
    the caller has already seen part of an answer.
    """
    for attempt in range(1, policy.attempts + 1):
        yielded = False
        try:
            async for response in call():
                yielded = True
                yield response
            return
        except Exception as exc:
            failure = classify_failure(exc)
            if failure is None:
                raise
            if failure.retryable and not yielded and attempt < policy.attempts:
                wait = policy.delay(attempt - 1)
                log.warning(
                    "%s: %s (HTTP %s), retry %d of %d in %.2fs",
                    provider,
                    failure.code,
                    failure.status,
                    attempt,
                    policy.attempts - 1,
                    wait,
                )
                await asyncio.sleep(wait)
                continue
            message = failure.message(provider, attempt, str(exc))
            log.warning("%s: %s: %s", provider, failure.code, message)
            yield LlmResponse(error_code=failure.code.value, error_message=message)
            return


class RetryingGemini(Gemini):
    """ADK's Gemini model under plangate's retry policy."""

    _policy: RetryPolicy = PrivateAttr(default_factory=RetryPolicy.from_env)

    def with_policy(self, policy: RetryPolicy) -> RetryingGemini:
        self._policy = policy
        return self

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parent = super().generate_content_async
        async for response in call_with_retries(
            lambda: parent(llm_request, stream), self._policy, "Gemini"
        ):
            yield response
