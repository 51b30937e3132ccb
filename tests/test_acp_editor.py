"""``plangate acp`` as capable as the terminal and the web, driven by the real ACP SDK
client over stdio: a guarded reader, slash commands, ``session/list``, free-text answers,
plan edits in a file, re-asked approvals, protocol refusals and MCP servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_support import editor, new_session, prompt

from plangate.agent.workspace import copy_sample_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return copy_sample_workspace(tmp_path / "ws")


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'plangate.db'}"


async def test_garbage_lines_get_json_rpc_errors_and_the_agent_keeps_serving(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        raw = client.process.stdin
        for line in (
            b"[1, 2]",
            b'"hello"',
            b"42",
            b"{not json",
            b"\xff\xfe",
            b'{"jsonrpc": "2.0", "id": 7, "method": 5}',
            b'{"jsonrpc": "2.0", "id": [1], "result": {}}',
            b'[{"jsonrpc": "2.0", "id": 8, "method": "session/new", "params": {}}]',
        ):
            raw.write(line + b"\n")
        await raw.drain()

        # The agent still serves: a new session and a real turn.
        await new_session(client, conn, workspace)
        assert await prompt(client, conn, "Fix the failing test", "No") == "end_turn"
        assert "Understood, no plan" in client.text()

        errors = [(m["id"], m["error"]["code"]) for m in client.incoming if "error" in m]
        assert errors == [
            (None, -32600),
            (None, -32600),
            (None, -32600),
            (None, -32700),
            (None, -32700),
            (7, -32600),
            (None, -32600),
        ], "one error per bad request, in order; a malformed response is dropped"
        messages = [m["error"]["message"] for m in client.incoming if "error" in m]
        assert "got a batch (array)" in messages[0] and "got str" in messages[1]
        assert messages[3].startswith("Parse error")
