"""Helpers for the ACP tests: a scripted editor (the real SDK client) and ``plangate acp``
spawned over stdio, running the plangate this test process imported."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AcceptElicitationResponse,
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    CurrentModeUpdate,
    DeclineElicitationResponse,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
)

import plangate
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.models.demo import DemoModel

FIXED = "        if quantity > on_hand:\n"
FORMS = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
"""An editor that shows forms (free-text answers come through elicitation)."""
CANCEL = "<cancel>"
DECLINE = "<decline>"
TESTS = Path(__file__).parent


@pytest.fixture
def sqlite_database_url(tmp_path: Path) -> str:
    """The store of an ACP test: SQLite only (each test spawns an agent process; the
    PostgreSQL store is covered by the host tests). A test module takes it as its
    ``database_url`` with ``database_url = sqlite_database_url``."""
    return f"sqlite:///{tmp_path / 'plangate.db'}"


class EditorClient:
    """An ACP client that records what the agent sends and answers permission requests
    from a script: an option name, or CANCEL (the user stops the turn). With ``cancel_at``
    set, it stops the turn as soon as a tool call with that title starts. ``before_answer``
    runs before each permission answer (the user editing a file, say). Elicitations are
    answered from ``elicited_answers``: a dict of field values, or DECLINE. ``during``
    runs a coroutine in the background as soon as a tool call with that title starts (the
    user acting while the tool runs); ``during_task`` is its task."""

    def __init__(self) -> None:
        self.cancel_at: str | None = None
        self.during: tuple[str, Callable[[], Awaitable[Any]]] | None = None
        self.during_task: asyncio.Task[Any] | None = None
        self.updates: list[Any] = []
        self.permissions: list[tuple[ToolCallUpdate, list[PermissionOption], int]] = []
        self.answers: deque[str] = deque()
        self.before_answer: Callable[[ToolCallUpdate], None] | None = None
        self.elicitations: list[tuple[str, Any]] = []
        self.elicited_answers: deque[dict[str, Any] | str] = deque()
        self.incoming: list[dict[str, Any]] = []
        self.conn: Any = None
        self.process: Any = None
        self.session_id = ""

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate, **_: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options, len(self.updates)))
        answer = self.answers.popleft()
        if answer == CANCEL:
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if self.before_answer is not None:
            self.before_answer(tool_call)
        matching = [o for o in options if answer in (o.name, o.option_id)]
        # Said here: a StopIteration would surface in the agent as an unrelated error.
        assert matching, f"{answer!r} is not offered: {[(o.option_id, o.name) for o in options]}"
        chosen = matching[0]
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> Any:
        self.elicitations.append((message, mode))
        answer = self.elicited_answers.popleft()
        if answer == DECLINE:
            return DeclineElicitationResponse(action="decline")
        return AcceptElicitationResponse(action="accept", content=answer)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        started = update.title if isinstance(update, ToolCallStart) else ""
        if self.cancel_at and started.startswith(self.cancel_at):
            self.cancel_at = None
            await self.conn.cancel(session_id=session_id)
        if self.during is not None and started.startswith(self.during[0]):
            action, self.during = self.during[1], None
            self.during_task = asyncio.get_running_loop().create_task(action())

    async def write_text_file(self, **_: Any) -> None:
        raise RequestError.method_not_found("fs/write_text_file")

    async def read_text_file(self, **_: Any) -> None:
        raise RequestError.method_not_found("fs/read_text_file")

    async def create_terminal(self, **_: Any) -> None:
        raise RequestError.method_not_found("terminal/create")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    def observe(self, event: StreamEvent) -> None:
        """Every raw message the agent sends (error responses with a null id included)."""
        if event.direction is StreamDirection.INCOMING:
            self.incoming.append(event.message)

    # -- reading what was sent ------------------------------------------------------------

    def of(self, kind: type, start: int = 0) -> list[Any]:
        return [u for u in self.updates[start:] if isinstance(u, kind)]

    async def wait_for(self, kind: type, start: int = 0, timeout: float = 10.0) -> Any:
        """The first update of ``kind`` from ``start`` on, waiting for it to arrive (the
        agent sends some right after its response)."""
        async with asyncio.timeout(timeout):
            while not self.of(kind, start):
                await asyncio.sleep(0.01)
        return self.of(kind, start)[0]

    def modes(self, start: int = 0) -> list[str]:
        return [u.current_mode_id for u in self.of(CurrentModeUpdate, start)]

    def text(self, start: int = 0) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk, start))

    def results(self, call_id: str) -> list[ToolCallProgress]:
        """The finished updates of one tool call (not the request cards)."""
        return [
            u
            for u in self.of(ToolCallProgress)
            if u.tool_call_id == call_id and u.status in ("completed", "failed")
        ]

    def calls(self, name_prefix: str, start: int = 0) -> list[ToolCallStart]:
        return [u for u in self.of(ToolCallStart, start) if u.title.startswith(name_prefix)]


def agent_env(model: str = "demo") -> dict[str, str]:
    """The agent process's environment: the model, and the plangate this test imported
    (a worktree's ``src`` on PYTHONPATH wins over an editable install)."""
    source = str(Path(plangate.__file__).resolve().parents[1])
    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PLANGATE_MODEL": model,
        "PYTHONPATH": os.pathsep.join(
            p for p in (source, str(TESTS), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


@asynccontextmanager
async def editor(
    tmp_path: Path,
    workspace: Path | None,
    database_url: str,
    *extra: str,
    capabilities: ClientCapabilities | None = None,
    module: str = "plangate.cli.main",
    env: dict[str, str] | None = None,
) -> AsyncIterator[tuple[EditorClient, Any]]:
    """A running ``plangate acp`` and the client connected to it (initialized); without a
    workspace, each session works in its ``cwd``. ``module`` runs another entry point
    with the same arguments (a test agent with a scripted model); ``env`` adds to the
    agent process's environment (a model provider's settings)."""
    client = EditorClient()
    if workspace is not None:
        extra = ("--workspace", str(workspace), *extra)
    with (tmp_path / "agent-stderr.log").open("ab") as stderr:
        async with spawn_agent_process(
            client,
            sys.executable,
            "-m",
            module,
            "acp",
            "--database-url",
            database_url,
            *extra,
            cwd=tmp_path,
            env={**agent_env(), **(env or {})},
            transport_kwargs={"stderr": stderr},
            observers=[client.observe],
            use_unstable_protocol=True,
        ) as (conn, process):
            response = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=capabilities or ClientCapabilities(),
            )
            assert response.protocol_version == 1
            client.process = process
            yield client, conn


async def prompt(client: EditorClient, conn: Any, text: str, *answers: str) -> str:
    client.answers.extend(answers)
    response = await conn.prompt(session_id=client.session_id, prompt=[text_block(text)])
    assert not client.answers, f"unused answers: {list(client.answers)}"
    return response.stop_reason


async def new_session(
    client: EditorClient, conn: Any, cwd: Path, mcp_servers: list[Any] | None = None
) -> Any:
    response = await conn.new_session(cwd=str(cwd), mcp_servers=mcp_servers or [])
    client.session_id = response.session_id
    return response


async def planning_session(client: EditorClient, conn: Any, cwd: Path) -> None:
    """A new session with Plan Mode selected, as an editor's mode picker does."""
    await new_session(client, conn, cwd)
    await conn.set_session_mode(session_id=client.session_id, mode_id="plan")


def open_session(workspace: Path, database_url: str, session_id: str) -> Any:
    agent = build_coding_agent(workspace, DemoModel())
    return PlanSession.open(build_runner(agent, database_url=database_url), session_id=session_id)


def script(tmp_path: Path, name: str, *steps: list[dict[str, Any]]) -> tuple[str, str]:
    """The ``--model`` arguments for a scripted model playing ``steps`` (see
    :func:`plangate.models.scripted.load_script` for the step format)."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(list(steps)))
    return "--model", f"script:{path}"
