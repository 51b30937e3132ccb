"""OpenAI-compatible and Anthropic models through LiteLLM (the optional ``models`` extra).

Importing this module sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user set it)
before LiteLLM is imported: LiteLLM otherwise downloads its model-cost map on import,
which waits ~3 s and prints warnings offline. The bundled map is used instead, so a
start makes no outbound connection.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.lite_llm import LiteLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from pydantic import PrivateAttr

from plangate.models.retrying import RetryPolicy, call_with_retries

__all__ = ["RetryingLiteLlm"]


class RetryingLiteLlm(LiteLlm):
    """ADK's LiteLlm under plangate's retry policy."""

    _policy: RetryPolicy = PrivateAttr(default_factory=RetryPolicy.from_env)
    _provider: str = PrivateAttr(default="model provider")

    def __init__(self, model: str, *, provider: str, policy: RetryPolicy, **kwargs: Any) -> None:
        # max_retries=0: the OpenAI SDK under LiteLLM would otherwise retry on its own.
        super().__init__(model=model, max_retries=0, **kwargs)
        self._policy = policy
        self._provider = provider

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parent = super().generate_content_async
        async for response in call_with_retries(
            lambda: parent(llm_request, stream), self._policy, self._provider
        ):
            yield response
