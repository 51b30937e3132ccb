"""Choosing the sandbox a test runs under: bubblewrap, Landlock, or the parser alone.

The containment tests run every case under each sandbox (``PLANGATE_SANDBOX`` forces
one), so both keep the same promises; a case one of them cannot meet by design says so
with a strict ``xfail`` (:func:`cannot_hold`), never by being left out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import require_service

CHOICE = {"sandbox": "bubblewrap", "bubblewrap": "bubblewrap", "landlock": "landlock"}
"""Fixture parameter -> PLANGATE_SANDBOX value (``sandbox`` is bubblewrap, as before)."""


def use_sandbox(mode: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Force ``mode`` (a sandbox, or ``parser-only``) for one test; under CI a sandbox
    that does not work here fails the test instead of skipping it."""
    from plangate.sandbox import sandbox_status

    monkeypatch.setenv("PLANGATE_SANDBOX", CHOICE.get(mode, "off"))
    sandbox_status.cache_clear()
    status = sandbox_status()
    if mode != "parser-only" and not status.available:
        require_service(f"{CHOICE[mode]}: {status.detail}")
    yield mode
    sandbox_status.cache_clear()


def cannot_hold(request: pytest.FixtureRequest, mode: str, backend: str, reason: str) -> None:
    """Mark this test a strict expected failure when it runs under ``backend``: a
    promise that sandbox cannot keep by design (``reason`` says why)."""
    if mode == backend:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
