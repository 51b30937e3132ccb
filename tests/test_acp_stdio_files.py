"""``plangate acp`` with a regular file on stdin or stdout (``plangate acp < requests.jsonl
> replies.jsonl``): the event loop cannot watch a file, so files are read and written off
it instead of crashing; with its input read from a file, every request read is answered
before the agent exits."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from acp_support import agent_env
from plangate.acp.stdio import INTERNAL_ERROR, FileWriter, GuardedStdio

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def new_session(request_id: int, cwd: Path) -> dict[str, Any]:
    params = {"cwd": str(cwd), "mcpServers": []}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/new", "params": params}


def acp(tmp_path: Path, stdin: Any, stdout: Any) -> subprocess.Popen[bytes]:
    database = f"sqlite:///{tmp_path / 'plangate.db'}"
    return subprocess.Popen(
        [sys.executable, "-m", "plangate.cli.main", "acp", "--database-url", database],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=agent_env(),
    )


def replies(path: Path) -> dict[Any, dict[str, Any]]:
    """The responses in the output, by id (every line must be one JSON-RPC message)."""
    messages = [json.loads(line) for line in path.read_text().splitlines()]
    return {m["id"]: m for m in messages if "method" not in m}


def test_requests_from_a_file_are_all_answered_into_a_file(tmp_path: Path, workspace: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    lines = [json.dumps(INITIALIZE), "[1, 2]", json.dumps(new_session(2, workspace))]
    requests.write_text("\n".join(lines) + "\n")
    output = tmp_path / "replies.jsonl"
    with requests.open("rb") as stdin, output.open("wb") as stdout:
        process = acp(tmp_path, stdin, stdout)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert b"Traceback" not in stderr
    answered = replies(output)
    assert set(answered) == {1, 2, None}
    assert answered[1]["result"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
    assert answered[2]["result"]["sessionId"]
    assert answered[None]["error"]["code"] == -32600


def test_a_pipe_in_and_a_file_out(tmp_path: Path) -> None:
    output = tmp_path / "replies.jsonl"
    with output.open("wb") as stdout:
        process = acp(tmp_path, subprocess.PIPE, stdout)
        assert process.stdin is not None
        process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        process.stdin.flush()
        # An editor waits for the answer before it goes on; so does this one.
        size = 0
        while not size:
            assert process.poll() is None, process.stderr.read().decode()  # type: ignore[union-attr]
            size = os.path.getsize(output)
            time.sleep(0.02)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert replies(output)[1]["result"]["protocolVersion"] == 1


async def test_at_the_end_of_a_file_the_agents_own_questions_are_answered_with_an_error(
    tmp_path: Path,
) -> None:
    """A request the agent sends after the input ended can get no answer from the file: the
    transport answers it with an error in the client's place, and ends only once every
    request it read has its answer."""
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {}}\n')
    reader.feed_eof()
    fd = os.open(tmp_path / "out.jsonl", os.O_WRONLY | os.O_CREAT)
    transport = GuardedStdio(reader, FileWriter(fd), answer_all=True)
    assert (await transport.receive())["id"] == 5
    await transport.send({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission"})
    stand_in = await transport.receive()
    assert stand_in is not None and stand_in["id"] == 0
    assert stand_in["error"]["code"] == INTERNAL_ERROR
    ending = asyncio.create_task(transport.receive())
    await asyncio.sleep(0)
    assert not ending.done(), "request 5 has no answer yet"
    await transport.send({"jsonrpc": "2.0", "id": 5, "result": {"stopReason": "end_turn"}})
    assert await ending is None
    await transport.close()
    sent = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [m["id"] for m in sent] == [0, 5]


async def test_closing_while_the_last_reply_is_written_keeps_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "replies.jsonl"
    writer = FileWriter(os.open(path, os.O_WRONLY | os.O_CREAT))
    writer.write(b'{"id": 1}\n')
    writing = asyncio.ensure_future(writer.drain())
    await asyncio.sleep(0)  # the write is handed to its thread
    writer.write(b'{"id": 2}\n')
    writer.close()  # the session ends before that thread is done
    await writing
    assert path.read_bytes() == b'{"id": 1}\n{"id": 2}\n'
