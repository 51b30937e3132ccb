from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import WRITES

POSTGRES_ENV = "PLANGATE_TEST_POSTGRES_URL"


def require_service(reason: str) -> None:
    """Skip a test whose service is missing -- but fail under CI, where it must exist."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store-backed test runs on the embedded SQLite file and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'plangate.db'}"
        return
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        require_service(f"PostgreSQL: set {POSTGRES_ENV}=postgresql://user:pw@host:port/db")
    name = f"plangate_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    base = server.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh copy of the sample project (with its one failing test)."""
    from plangate.agent.workspace import copy_sample_workspace

    return copy_sample_workspace(tmp_path / "ws")


async def _admin(server: str, statement: str) -> None:
    import asyncpg

    try:
        connection = await asyncpg.connect(server.replace("postgresql+asyncpg://", "postgresql://"))
    except (OSError, asyncpg.PostgresError) as exc:
        require_service(f"PostgreSQL at {server} is unreachable: {exc}")
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@pytest.fixture(autouse=True)
def _clean_writes() -> None:
    WRITES.clear()


@pytest.fixture(params=["sandbox", "parser-only"])
def sandbox_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with the bubblewrap sandbox and again with the parser alone
    (``PLANGATE_SANDBOX=off``), so both modes stay correct."""
    from plangate.sandbox import sandbox_status

    if request.param == "parser-only":
        monkeypatch.setenv("PLANGATE_SANDBOX", "off")
    else:
        monkeypatch.delenv("PLANGATE_SANDBOX", raising=False)
    sandbox_status.cache_clear()
    status = sandbox_status()
    if request.param == "sandbox" and not status.available:
        require_service(f"bubblewrap: {status.detail}")
    yield request.param
    sandbox_status.cache_clear()


@pytest.fixture
def sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For behaviour only the sandbox can give (confining an approved command): the
    bubblewrap sandbox must be there, and under CI it is."""
    from plangate.sandbox import sandbox_status

    monkeypatch.delenv("PLANGATE_SANDBOX", raising=False)
    sandbox_status.cache_clear()
    status = sandbox_status()
    if not status.available:
        require_service(f"bubblewrap: {status.detail}")
    yield
    sandbox_status.cache_clear()


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    """A new, empty PostgreSQL database (several servers or hubs share it)."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        require_service(f"PostgreSQL: set {POSTGRES_ENV}")
    assert server is not None
    name = f"plangate_multi_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    yield server.rsplit("/", 1)[0] + f"/{name}"
    asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
