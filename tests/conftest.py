from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import WRITES


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'plangate.db'}"


@pytest.fixture(autouse=True)
def _clean_writes() -> None:
    WRITES.clear()


def require_service(reason: str) -> None:
    """Skip a test whose service is missing -- but fail under CI, where it must exist."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)
