"""Only the named experimental ADK warnings are silenced; everything else shows."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from plangate.adk.experimental import (
    EXPERIMENTAL_ADK_FEATURES,
    experimental_warning_pattern,
    quiet_experimental_adk_warnings,
)

ROOT = Path(__file__).resolve().parents[1]


def test_pytest_config_names_exactly_the_listed_features() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    filters = config["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert filters == [
        f"ignore:{experimental_warning_pattern(f)}:UserWarning" for f in EXPERIMENTAL_ADK_FEATURES
    ]


def test_the_cli_filter_hides_only_the_named_warnings() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet_experimental_adk_warnings()
        warnings.warn("[EXPERIMENTAL] ResumabilityConfig: experimental", UserWarning, stacklevel=1)
        warnings.warn("[EXPERIMENTAL] SomethingElse: experimental", UserWarning, stacklevel=1)
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
        warnings.warn("a user warning", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == [
        "[EXPERIMENTAL] SomethingElse: experimental",
        "old API",
        "a user warning",
    ]


@pytest.mark.parametrize("quiet", [True, False])
def test_the_filter_matches_adks_real_warning(quiet: bool) -> None:
    """With warnings as errors, building the resumable App fails without the filter and
    passes with it: the pattern matches what ADK really says."""
    script = (
        "from plangate.adk.experimental import quiet_experimental_adk_warnings\n"
        f"{'quiet_experimental_adk_warnings()' if quiet else ''}\n"
        "from google.adk.apps import ResumabilityConfig\n"
        "ResumabilityConfig(is_resumable=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if quiet:
        assert done.returncode == 0, done.stderr[-2000:]
    else:
        assert "[EXPERIMENTAL] ResumabilityConfig" in done.stderr
