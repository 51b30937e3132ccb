"""A database that cannot be used is reported loudly, in one line, with a code.

At start: ``plangate serve``, ``chat`` and ``acp`` exit 2 with one line on stderr and
nothing on stdout for an unreachable server, a wrong password, a missing database, an
unknown host, a schema newer than the code and a dropped table. While running: /health
answers 503 with the code, a run ends with RUN_ERROR carrying the code and no SQL, and
a deleted SQLite folder is an error, never a silently recreated database.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sqlalchemy import insert, text

from conftest import POSTGRES_ENV, require_service
from plangate.adk.database import prepare_database
from plangate.adk.runner import build_runner
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.cli.main import main
from plangate.errors import ErrorCode
from plangate.models.demo import DemoModel
from plangate.store.errors import DatabaseError
from plangate.store.schema import schema_migrations
from plangate.store.store import Store
from plangate.web.server import create_app
from web_support import run_input, sse_events, user_message

BASE = "http://127.0.0.1:8765"
SURFACES = ("serve", "chat", "acp")


def plangate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangate.cli.main", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *words: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


def postgres_server() -> str:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        require_service(f"PostgreSQL: set {POSTGRES_ENV}")
    assert server is not None
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def with_password(server: str, password: str) -> str:
    scheme, rest = server.split("://", 1)
    userinfo, hostpart = rest.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:{password}@{hostpart}"


@pytest.mark.parametrize("surface", SURFACES)
def test_fix_12_1_unreachable_server_exits_2_with_one_line(tmp_path: Path, surface: str) -> None:
    url = f"postgresql://plangate:plangate@127.0.0.1:{free_port()}/postgres"
    line = assert_one_line_exit_2(
        plangate(tmp_path, surface, "--database-url", url), f"plangate {surface}:", "unreachable"
    )
    assert "plangate:***@" in line  # the password is never shown


@pytest.mark.parametrize("surface", SURFACES)
def test_fix_12_1_unknown_host_exits_2_with_one_line(tmp_path: Path, surface: str) -> None:
    url = "postgresql://plangate:plangate@no-such-host.invalid:5432/postgres"
    assert_one_line_exit_2(plangate(tmp_path, surface, "--database-url", url), "host", "unknown")


@pytest.mark.parametrize("surface", SURFACES)
def test_fix_12_1_wrong_password_exits_2_with_one_line(tmp_path: Path, surface: str) -> None:
    url = with_password(postgres_server(), "not-the-password")
    line = assert_one_line_exit_2(
        plangate(tmp_path, surface, "--database-url", url), "refused the login"
    )
    assert "not-the-password" not in line


@pytest.mark.parametrize("surface", SURFACES)
def test_fix_12_1_missing_database_exits_2_with_one_line(tmp_path: Path, surface: str) -> None:
    url = postgres_server().rsplit("/", 1)[0] + "/plangate_no_such_database"
    assert_one_line_exit_2(plangate(tmp_path, surface, "--database-url", url), "does not exist")


async def _mark_schema(url: str, version: int) -> None:
    store = await Store.open(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(
                insert(schema_migrations).values(version=version, name="future", applied_at=0.0)
            )
    finally:
        await store.close()


@pytest.mark.parametrize("surface", SURFACES)
def test_fix_12_2_newer_schema_refuses_to_start(
    tmp_path: Path, surface: str, database_url: str
) -> None:
    asyncio.run(_mark_schema(database_url, 99))
    assert_one_line_exit_2(
        plangate(tmp_path, surface, "--database-url", database_url),
        "schema version 99",
        "upgrade plangate",
    )


async def _drop(url: str, table: str) -> None:
    store = await Store.open(url)
    try:
        async with store.engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE {table}"))
    finally:
        await store.close()


def test_fix_12_2_a_dropped_table_is_noticed_at_start(tmp_path: Path, database_url: str) -> None:
    asyncio.run(_drop(database_url, "plangate_journal"))
    with pytest.raises(DatabaseError) as caught:
        asyncio.run(Store.open(database_url))
    assert caught.value.code is ErrorCode.DATABASE_TABLE_MISSING
    assert_one_line_exit_2(
        plangate(tmp_path, "serve", "--database-url", database_url),
        "plangate_journal",
        "plangate db check --repair",
    )


async def _app(tmp_path: Path, url: str):
    await prepare_database(url)
    workspace = copy_sample_workspace(tmp_path / "workspace")
    runner = build_runner(build_coding_agent(workspace, DemoModel()), database_url=url)
    return create_app(runner=runner, require_token=False, token=None)


def _no_sql(body: str) -> None:
    for word in ("SELECT", "INSERT", "UPDATE ", "[SQL", "sqlalchemy", "asyncpg", "sqlite3"):
        assert word not in body, body


async def test_fix_12_1_a_deleted_sqlite_folder_is_an_error_not_a_new_database(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "db"
    url = f"sqlite:///{folder / 'plangate.db'}"
    app = await _app(tmp_path, url)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        first = sse_events(
            (
                await http.post("/api/agent", json=run_input("t1", messages=[user_message("hi")]))
            ).text
        )
        assert first[-1]["type"] == "RUN_FINISHED"
        assert (await http.get("/health")).json() == {"ok": True, "database": "ok"}

        shutil.rmtree(folder)

        health = await http.get("/health")
        assert health.status_code == 503
        assert health.json()["code"] == "DATABASE_GONE"
        response = await http.post(
            "/api/agent", json=run_input("t1", messages=[user_message("again")])
        )
        assert response.status_code in (200, 503)
        _no_sql(response.text)
        if response.status_code == 200:
            events = sse_events(response.text)
            assert events[-1]["type"] == "RUN_ERROR"
            assert events[-1]["code"] == "DATABASE_GONE"
        else:
            assert response.json()["code"] == "DATABASE_GONE"
        thread = await http.get("/api/threads/t1")
        assert thread.status_code == 503
        assert thread.json()["code"] == "DATABASE_GONE"
        _no_sql(thread.text)
    assert not folder.exists()  # nothing recreated it


async def test_fix_12_1_a_postgres_database_that_goes_away_is_reported(tmp_path: Path) -> None:
    server = postgres_server()
    import asyncpg

    name = f"plangate_gone_{os.getpid()}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        url = server.rsplit("/", 1)[0] + f"/{name}"
        app = await _app(tmp_path, url)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            ok = sse_events(
                (
                    await http.post(
                        "/api/agent", json=run_input("t1", messages=[user_message("hi")])
                    )
                ).text
            )
            assert ok[-1]["type"] == "RUN_FINISHED"
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

            health = await http.get("/health")
            assert health.status_code == 503
            assert health.json()["ok"] is False
            assert health.json()["code"] in ("DATABASE_MISSING", "DATABASE_UNREACHABLE")
            response = await http.post(
                "/api/agent", json=run_input("t2", messages=[user_message("again")])
            )
            _no_sql(response.text)
            assert response.status_code == 503
            assert response.json()["code"].startswith("DATABASE_")
            _no_sql((await http.get("/api/threads/t1")).text)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def _main_in_process(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> subprocess.CompletedProcess[str]:
    """``plangate ARGV`` in this process (a surface's subprocess start costs seconds):
    main() returns the exit code; an exception escaping it is the traceback a user sees."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(argv), code, out, err)


_CASE_NAMES = (
    "under a file",
    "in /proc",
    "not a database",
    "port not a number",
    "port out of range",
)


def _bad_database_urls(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (URL, a word the one line must hold)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a SQLite database " * 20)
    return {
        "under a file": (f"sqlite:///{a_file}/plangate.db", "is a file, not a folder"),
        "in /proc": ("sqlite:////proc/plangate-test.db", "no database can be kept"),
        "not a database": (f"sqlite:///{garbage}", "not a SQLite database"),
        "port not a number": ("postgresql://u:p@127.0.0.1:notaport/db", "is not a number"),
        "port out of range": ("postgresql://u:p@127.0.0.1:99999/db", "out of range"),
    }


# Every case through the two db commands; the surfaces share their start-up path
# (prepare_or_report), so two cases each show they print the same line.
_CASES = [
    *[(("db", "upgrade"), case) for case in _CASE_NAMES],
    *[(("db", "check"), case) for case in _CASE_NAMES],
    *[((surface,), case) for surface in SURFACES for case in ("under a file", "port not a number")],
]


@pytest.mark.parametrize(("command", "case"), _CASES)
def test_a_bad_database_path_or_url_is_one_line_and_exit_2(
    tmp_path: Path,
    command: tuple[str, ...],
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, word = _bad_database_urls(tmp_path)[case]
    if command == ("db", "check") and case in ("under a file", "in /proc"):
        word = "no database at"  # check only reads: a file that is not there is missing
    monkeypatch.chdir(tmp_path)
    result = _main_in_process(capsys, *command, "--database-url", url)
    line = assert_one_line_exit_2(result, f"plangate {' '.join(command)}:", word)
    assert "SELECT" not in line and "Error" not in line, line
    assert not (tmp_path / ".plangate").exists()  # nothing was created in the folder


def test_journal_export_where_no_database_exists_creates_none(tmp_path: Path) -> None:
    result = plangate(tmp_path, "journal", "export")
    assert_one_line_exit_2(result, "plangate journal export:", "no database at")
    assert not (tmp_path / ".plangate").exists()


def test_acp_on_dev_null_ends_at_once_without_a_traceback(tmp_path: Path) -> None:
    # stdin is /dev/null (see plangate()): input that ends at once, like an empty file.
    result = plangate(tmp_path, "acp", "--database-url", f"sqlite:///{tmp_path}/p.db")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


async def _tables(url: str, *create: str) -> set[str]:
    """Create ``create`` (statements) in the database at ``url``; return its tables."""
    from sqlalchemy import inspect
    from sqlalchemy.ext.asyncio import create_async_engine

    from plangate.store.urls import resolve_database_url

    engine = create_async_engine(resolve_database_url(url))
    try:
        async with engine.begin() as conn:
            for statement in create:
                await conn.execute(text(statement))
            return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


@pytest.mark.parametrize("command", [("db", "upgrade"), ("db", "check"), ("serve",)])
def test_another_applications_database_is_refused_before_anything_is_written(
    tmp_path: Path,
    command: tuple[str, ...],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    planted = asyncio.run(
        _tables(
            database_url,
            "CREATE TABLE invoices (id INTEGER PRIMARY KEY)",
            "CREATE TABLE customers (id INTEGER PRIMARY KEY)",
        )
    )
    assert planted == {"invoices", "customers"}
    monkeypatch.chdir(tmp_path)
    assert_one_line_exit_2(
        _main_in_process(capsys, *command, "--database-url", database_url),
        f"plangate {' '.join(command)}:",
        "another application's tables (customers, invoices)",
        "database of its own",
    )
    assert asyncio.run(_tables(database_url)) == planted  # nothing was written into it
