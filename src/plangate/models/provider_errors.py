"""What a failed call to a model provider means, by HTTP status, never by message text.

Every provider SDK carries the status differently: google-genai's ``APIError.code``,
LiteLLM / OpenAI / Anthropic errors' ``status_code``. A failure that never reached the
provider (refused connection, reset, timeout) carries none and counts as unavailable.
"""

from __future__ import annotations

from dataclasses import dataclass

from plangate.errors import ErrorCode

__all__ = ["ProviderFailure", "classify_failure"]

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
"""Timeouts, rate limits and server errors: worth the same request again later."""


@dataclass(frozen=True)
class ProviderFailure:
    code: ErrorCode
    """One of the ``MODEL_*`` codes."""
    status: int | None
    retryable: bool

    def message(self, provider: str, attempts: int, detail: str) -> str:
        status = f"HTTP {self.status}" if self.status is not None else "no response"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if self.code is ErrorCode.MODEL_AUTH_FAILED:
            return f"{provider} refused the credentials ({status}); check the API key setting"
        if self.code is ErrorCode.MODEL_RATE_LIMITED:
            return f"{provider} is rate limiting requests ({status}){tries}; try again later"
        if self.code is ErrorCode.MODEL_UNAVAILABLE:
            return f"{provider} is unavailable ({status}){tries}; try again later"
        return f"{provider} rejected the request ({status}): {detail[:300]}"


def _status(exc: BaseException) -> int | None:
    from google.genai.errors import APIError

    if isinstance(exc, APIError):
        return exc.code
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _unreached(exc: BaseException) -> bool:
    """The request never got an HTTP answer (connection refused, reset, timed out)."""
    import httpx

    if isinstance(exc, httpx.TransportError | OSError | TimeoutError):
        return True
    try:
        from litellm.exceptions import APIConnectionError, Timeout
    except ImportError:
        return False
    return isinstance(exc, APIConnectionError | Timeout)


def classify_failure(exc: BaseException) -> ProviderFailure | None:
    """The failure a provider call raised, or None for an exception that is not one
    (a programming error must surface as itself)."""
    if _unreached(exc):
        return ProviderFailure(ErrorCode.MODEL_UNAVAILABLE, _status(exc), True)
    status = _status(exc)
    if status is None:
        return None
    if status in (401, 403):
        return ProviderFailure(ErrorCode.MODEL_AUTH_FAILED, status, False)
    if status == 429:
        return ProviderFailure(ErrorCode.MODEL_RATE_LIMITED, status, True)
    if status in RETRYABLE_STATUSES or status >= 500:
        return ProviderFailure(ErrorCode.MODEL_UNAVAILABLE, status, True)
    return ProviderFailure(ErrorCode.MODEL_REQUEST_REJECTED, status, False)
