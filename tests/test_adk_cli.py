"""Plan Mode served by ADK's own FastAPI app (what ``adk web``, ``adk api_server`` serve).

An agents folder holds a package whose ``agent.py`` defines ``app = build_app(...)``,
as the README shows; ADK's loader imports it, ADK's session service keeps the sessions
and the human replies arrive as ``FunctionResponse`` parts over ADK's ``/run``. An App
without ``PlanPlugin`` or resumability is refused at its first model step with
``PLAN_APP_MISCONFIGURED``, over ADK's API and through a Runner of one's own.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.cli.fast_api import get_fast_api_app
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from harness import WRITES, Read, Write
from plangate.adk import PlanPlugin, plan_runtime, setup_plan
from plangate.adk.app_check import PlanAppError
from plangate.adk.scope import PlanScope
from plangate.errors import ErrorCode
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan.record import PlanRecord
from plangate.store.urls import ENV_VAR

USER = "alice"

AGENT_PY = """\
from google.adk.agents import LlmAgent

from harness import Read, Write
from plangate.adk import setup_plan
from plangate.adk.runner import build_app
from plangate.models.scripted import ScriptedLlm

model = ScriptedLlm()
root_agent = setup_plan(
    LlmAgent(name="planner", model=model, instruction="Plan, then act.", tools=[Read, Write])
)
{app_line}
"""

WITH_BUILD_APP = 'app = build_app(root_agent, "{name}")'  # named like its folder, as adk run wants
BARE = "# no app: ADK wraps root_agent in an App of its own"


class AgentsDir:
    """An agents folder with one agent package, named uniquely so ADK's import of it is
    this test's module."""

    def __init__(self, root: Path, app_line: str) -> None:
        self.root = root
        self.name = f"planner_{uuid.uuid4().hex[:8]}"
        package = root / self.name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("from . import agent\n")
        (package / "agent.py").write_text(AGENT_PY.format(app_line=app_line.format(name=self.name)))

    @property
    def module(self) -> ModuleType:
        """``agent.py`` as ADK imported it (after the first run)."""
        return sys.modules[f"{self.name}.agent"]

    @property
    def model(self) -> ScriptedLlm:
        return self.module.model

    def forget(self) -> None:
        for name in [m for m in sys.modules if m == self.name or m.startswith(self.name + ".")]:
            del sys.modules[name]
        while str(self.root) in sys.path:
            sys.path.remove(str(self.root))


@pytest.fixture
def adk_session_uri(database_url: str, tmp_path: Path) -> str:
    """ADK's own session service: its SQLite service on a file, or its database service
    on the PostgreSQL database the plans use."""
    if database_url.startswith("sqlite"):
        # ADK's sqlite scheme drops one slash: four make an absolute path.
        return f"sqlite:///{tmp_path / 'adk-sessions.db'}"
    # ADK's database service needs the async driver named in the URL.
    return database_url.replace("postgresql://", "postgresql+asyncpg://", 1)


def make_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str, app_line: str
) -> Iterator[AgentsDir]:
    # build_app pins the plan database when agent.py is imported, from the variable.
    monkeypatch.setenv(ENV_VAR, database_url)
    agents = AgentsDir(tmp_path / "agents", app_line)
    try:
        yield agents
    finally:
        agents.forget()


@pytest.fixture
def agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> Iterator[AgentsDir]:
    yield from make_agents(tmp_path, monkeypatch, database_url, WITH_BUILD_APP)


@pytest.fixture
def bare_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> Iterator[AgentsDir]:
    yield from make_agents(tmp_path, monkeypatch, database_url, BARE)


class AdkApi:
    """ADK's REST API as a client sees it, on ADK's FastAPI app in this event loop."""

    def __init__(self, agents: AgentsDir, session_uri: str) -> None:
        self.agents = agents
        app = get_fast_api_app(
            agents_dir=str(agents.root),
            session_service_uri=session_uri,
            use_local_storage=False,
            web=False,
        )
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://adk"
        )
        self.session_id = ""

    async def create_session(self, state: dict[str, Any] | None = None) -> str:
        url = f"/apps/{self.agents.name}/users/{USER}/sessions"
        response = await self.client.post(url, json={"state": state or {}})
        response.raise_for_status()
        self.session_id = response.json()["id"]
        return self.session_id

    async def load_agent(self) -> None:
        """ADK imports ``agent.py`` on the app's first use; the test scripts its model."""
        response = await self.client.get(f"/apps/{self.agents.name}/app-info")
        response.raise_for_status()

    async def run(self, *parts: dict[str, Any]) -> list[dict[str, Any]]:
        response = await self.client.post("/run", json=self._body(parts))
        response.raise_for_status()
        return response.json()

    async def run_sse(self, *parts: dict[str, Any]) -> list[dict[str, Any]]:
        response = await self.client.post("/run_sse", json=self._body(parts))
        response.raise_for_status()
        return [
            json.loads(line.removeprefix("data: "))
            for line in response.text.splitlines()
            if line.startswith("data: ")
        ]

    async def state(self) -> dict[str, Any]:
        url = f"/apps/{self.agents.name}/users/{USER}/sessions/{self.session_id}"
        response = await self.client.get(url)
        response.raise_for_status()
        return response.json()["state"]

    async def stored_plan(self) -> PlanRecord | None:
        """The plan as plangate's store holds it (not the session's mirror)."""
        agent = self.agents.module.root_agent
        runtime = plan_runtime(agent)
        assert runtime is not None
        scope = PlanScope(self.agents.name, USER, self.session_id, runtime.branch)
        return (await runtime.load(scope)).state.record

    def _body(self, parts: tuple[dict[str, Any], ...]) -> dict[str, Any]:
        return {
            "app_name": self.agents.name,
            "user_id": USER,
            "session_id": self.session_id,
            "new_message": {"role": "user", "parts": list(parts)},
        }


def said(message: str) -> dict[str, Any]:
    return {"text": message}


def answered(call_id: str, name: str, response: dict[str, Any]) -> dict[str, Any]:
    """A human reply as ADK's API takes it: a FunctionResponse part for the paused call."""
    return {"functionResponse": {"id": call_id, "name": name, "response": response}}


def paused_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The long-running calls of ``events`` that no event of them answers."""
    answered_ids = {
        part["functionResponse"]["id"]
        for event in events
        for part in event.get("content", {}).get("parts", [])
        if "functionResponse" in part
    }
    return [
        part["functionCall"]
        for event in events
        for part in event.get("content", {}).get("parts", [])
        if "functionCall" in part
        and part["functionCall"]["id"] in event.get("longRunningToolIds", [])
        and part["functionCall"]["id"] not in answered_ids
    ]


def results(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [
        part["functionResponse"]["response"]
        for event in events
        for part in event.get("content", {}).get("parts", [])
        if "functionResponse" in part and part["functionResponse"]["name"] == name
    ]


async def test_plan_mode_under_adks_api_server(agents: AgentsDir, adk_session_uri: str) -> None:
    """Question, plan and approval over ADK's own /run and /run_sse: each pause leaves the
    session-state mirror equal to plangate's store, and the write runs only after the
    approval."""
    api = AdkApi(agents, adk_session_uri)
    await api.create_session({"agent_mode": "plan"})
    await api.load_agent()
    agents.model.add(
        [call("Write", path="stock.py", content="too early")],
        [call("ask_user_question", question="Raise or allow backorders?", options=["raise"])],
    )
    events = await api.run(said("fix the stock bug"))
    assert results(events, "Write")[0]["code"] == ErrorCode.PLAN_MODE_GATE
    [question] = paused_calls(events)
    assert question["name"] == "ask_user_question"
    mirror = (await api.state())["plan:planner"]
    [request] = mirror["pending"]
    assert request["callId"] == question["id"] and request["kind"] == "question"

    # One step drafts and submits: the mirror must show the approval that waits.
    agents.model.add(
        [
            call("update_plan_content", content="1. Raise in reserve()", mode="replace"),
            call("exit_plan_mode", summary="raise on over-reservation"),
        ]
    )
    answer = {"status": "answered", "question_id": request["questionId"], "answer": "raise"}
    events = await api.run_sse(answered(question["id"], "ask_user_question", answer))
    [submit] = paused_calls(events)
    assert submit["name"] == "exit_plan_mode"
    mirror = (await api.state())["plan:planner"]
    stored = await api.stored_plan()
    assert stored is not None and stored.status.value == "pending_approval"
    assert mirror == stored.dump()
    [approval] = mirror["pending"]
    assert approval["callId"] == submit["id"]

    agents.model.add([call("Write", path="stock.py", content="fixed")], [text("done")])
    decision = {
        "status": "approved",
        "approval_id": approval["approvalId"],
        "revision": approval["revision"],
        "sha256": approval["sha256"],
    }
    events = await api.run(answered(submit["id"], "exit_plan_mode", decision))
    assert results(events, "Write") == [{"written": "stock.py"}]
    assert WRITES == [("stock.py", "fixed")]
    mirror = (await api.state())["plan:planner"]
    stored = await api.stored_plan()
    assert stored is not None and stored.status.value == "approved"
    assert mirror == stored.dump()


async def test_a_bare_root_agent_under_adks_api_server_is_refused_with_a_coded_error(
    bare_agents: AgentsDir, adk_session_uri: str
) -> None:
    """``adk web``/``adk api_server`` wrap a bare ``root_agent`` in an App with neither
    PlanPlugin nor resumability: the first model step fails and says how to fix it,
    before any tool runs."""
    api = AdkApi(bare_agents, adk_session_uri)
    await api.create_session({"agent_mode": "plan"})
    await api.load_agent()
    bare_agents.model.add([call("Write", path="stock.py", content="x")])
    events = await api.run_sse(said("fix the stock bug"))
    # ADK appends an event carrying the error, then ends the stream with it.
    failed, ended = events
    assert failed["errorCode"] == "PlanAppError"
    assert ended["error_details"]["error_message"] == failed["errorMessage"]
    message = failed["errorMessage"]
    assert message.startswith("PLAN_APP_MISCONFIGURED")
    assert "PlanPlugin()" in message and "build_app" in message
    assert bare_agents.model.requests == [] and WRITES == []
    assert await api.stored_plan() is None


@pytest.mark.parametrize(
    ("plugins", "resumable", "missing"),
    [
        ([], True, ["has no PlanPlugin()"]),
        ([PlanPlugin()], False, ["is not resumable"]),
        ([], False, ["has no PlanPlugin()", "is not resumable"]),
    ],
)
async def test_an_app_without_plan_plugin_or_resumability_is_refused(
    database_url: str, plugins: list[Any], resumable: bool, missing: list[str]
) -> None:
    """An App built by hand: without PlanPlugin a step that drafts and submits left the
    mirror at ``drafting`` while the approval waited; without resumability the run did
    not pause. Either way the first model step now raises the coded error."""
    model = ScriptedLlm()
    agent = setup_plan(LlmAgent(name="planner", model=model, tools=[Read, Write]))
    runtime = plan_runtime(agent)
    assert runtime is not None
    runtime.database_url = database_url
    config = ResumabilityConfig(is_resumable=True) if resumable else None
    app = App(name="own", root_agent=agent, plugins=plugins, resumability_config=config)
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(
        app_name="own", user_id=USER, state={"agent_mode": "plan"}
    )
    model.add([call("update_plan_content", content="1. x"), call("exit_plan_mode")])
    message = types.Content(role="user", parts=[types.Part(text="task")])
    with pytest.raises(PlanAppError) as raised:
        async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=message):
            pass
    error = raised.value
    assert error.code is ErrorCode.PLAN_APP_MISCONFIGURED
    assert error.fields["missing"] == missing
    assert "PlanPlugin()" in str(error) and "build_app" in str(error)
    assert "build_app(root_agent)" in error.hint
    assert model.requests == []


def test_the_agent_py_of_the_readme_is_the_one_tested() -> None:
    """The README's ``agent.py`` builds its App the way these tests do."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Plan Mode under `adk web`", 1)[1].split("\n## ", 1)[0]
    assert WITH_BUILD_APP.format(name="planner") in section and "setup_plan(" in section
