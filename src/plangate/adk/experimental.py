"""The experimental ADK features plangate uses on purpose, whose warnings it silences.

ADK warns once per process for each experimental feature a program touches. Users of
``plangate`` cannot act on these, so the CLI (and pytest, via ``pyproject.toml``) ignore
exactly these by name; every other warning -- an ADK deprecation included -- shows.
"""

from __future__ import annotations

import re
import warnings

__all__ = ["EXPERIMENTAL_ADK_FEATURES", "quiet_experimental_adk_warnings"]

EXPERIMENTAL_ADK_FEATURES: tuple[str, ...] = ("ResumabilityConfig",)
"""Keep in step with ``[tool.pytest.ini_options] filterwarnings`` (a test checks)."""


def experimental_warning_pattern(feature: str) -> str:
    """The start of ADK's warning for ``feature`` (``[EXPERIMENTAL] <name>: ...``)."""
    return rf"\[EXPERIMENTAL\] {re.escape(feature)}"


def quiet_experimental_adk_warnings() -> None:
    for feature in EXPERIMENTAL_ADK_FEATURES:
        warnings.filterwarnings(
            "ignore", message=experimental_warning_pattern(feature) + ":", category=UserWarning
        )
