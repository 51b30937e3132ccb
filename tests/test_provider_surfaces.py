"""The demo with its batched steps (a read beside the question, the plan written and
submitted together) on a real provider wire, through each surface: ``plangate chat``
under a pseudo-terminal (Anthropic Messages streamed, with thinking), ``plangate serve``'s
app over AG-UI (Gemini streamed, with thought parts), ``plangate acp`` over stdio with the
real ACP SDK client (OpenAI chat completions streamed, argument fragments interleaved).
One stand-in server for the module; the surfaces' processes reach it over the loopback."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from acp_support import editor, new_session, prompt
from conftest import require_service
from plangate.adk.runner import build_runner
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.data import DataCatalog
from plangate.models.config import resolve_model
from plangate.models.demo import FIX, OPTIONS, QUESTION
from plangate.web.server import create_app
from protocol_support import classification
from provider_standins import API_KEY, StandIn, Wire, serve
from test_cli_chat import PROMPT, spawn, transcript
from test_provider_corpus import THINKING, assert_history_is_well_formed, demo_steps
from web_support import run_input, sse_events, user_message

FIXED = "        if quantity > on_hand:\n"
DONE = "Done. Plan implemented; the tests pass."


@pytest.fixture(scope="module")
def provider_env() -> Iterator[tuple[StandIn, dict[str, str]]]:
    """The stand-in, and the settings that point every provider at it (set here and
    passed to the surfaces' processes)."""
    if importlib.util.find_spec("litellm") is None:
        require_service("the models extra (litellm) is not installed")
    with serve(StandIn()) as server, pytest.MonkeyPatch.context() as patch:
        base = server.base_url
        env = {
            "OPENAI_API_KEY": API_KEY,
            "OPENAI_BASE_URL": f"{base}/v1",
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": base,
            "GOOGLE_API_KEY": API_KEY,
            "GOOGLE_GEMINI_BASE_URL": base,
            "PLANGATE_MODEL_RETRIES": "1",
        }
        for name, value in env.items():
            patch.setenv(name, value)
        for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GEMINI_API_KEY", "ANTHROPIC_API_BASE"):
            patch.delenv(name, raising=False)
        yield server, env


def scripted(stand_in: StandIn, wire: Wire) -> StandIn:
    stand_in.reset()
    stand_in.wire = wire
    stand_in.side_answer = classification("general-task", "replace")
    return stand_in.script(*demo_steps(THINKING))


def assert_the_demo_ran(stand_in: StandIn, kind: str, workspace: Path) -> None:
    assert stand_in.steps == [], "every step of the script was asked for"
    assert len(stand_in.step_requests()) == 9
    assert all(r.provider == kind for r in stand_in.step_requests())
    assert_history_is_well_formed(kind, stand_in)
    assert FIXED in (workspace / FIX["path"]).read_text()


def test_chat_in_a_terminal_on_anthropic_messages_streamed(
    provider_env: tuple[StandIn, dict[str, str]], tmp_path: Path
) -> None:
    stand_in, env = provider_env
    scripted(stand_in, Wire(fragment=5, empty_text=True))
    child = spawn(tmp_path, "--model", "anthropic:claude-sonnet-4-5", env=env)
    child.expect(PROMPT)
    child.sendline("Fix the failing test")
    child.expect(r"Enter Plan Mode\?")
    child.sendline("y")
    child.expect(r"option number or text")
    child.sendline("1")
    child.expect(r"Approve this plan\?")
    child.sendline("a")
    child.expect("5 passed")
    child.expect(DONE)
    child.expect(PROMPT)
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    log = transcript(tmp_path)
    assert log.count(QUESTION) >= 1 and "refused by plan gate" in log
    assert_the_demo_ran(stand_in, "anthropic", tmp_path / ".plangate" / "workspace")


async def test_serve_over_ag_ui_on_gemini_streamed(
    provider_env: tuple[StandIn, dict[str, str]], tmp_path: Path
) -> None:
    stand_in, _ = provider_env
    scripted(stand_in, Wire(empty_text=True))
    workspace = copy_sample_workspace(tmp_path / "workspace")
    catalog = DataCatalog(cache_dir=tmp_path / "data")
    agent = build_coding_agent(workspace, resolve_model("gemini-2.5-flash"), data=catalog)
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'web.db'}", app_name="web")
    app = create_app(runner=runner, require_token=False, token=None)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765", timeout=120
    ) as http:

        async def run(**fields: Any) -> list[dict[str, Any]]:
            response = await http.post("/api/agent", json=run_input("corpus", **fields))
            assert response.status_code == 200, response.text
            events = sse_events(response.text)
            assert not [e for e in events if e["type"] == "RUN_ERROR"], events[-1]
            return events

        def asked(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            outcome = events[-1]["outcome"]
            assert outcome["type"] == "interrupt", outcome
            return outcome["interrupts"]

        async def resume(interrupt: dict[str, Any], **payload: Any) -> list[dict[str, Any]]:
            entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
            return await run(resume=[entry])

        [entry] = asked(await run(messages=[user_message("Fix the failing test")]))
        assert entry["reason"] == "plan_entry"
        [question] = asked(await resume(entry, decision="approve"))
        assert question["reason"] == "question" and question["message"] == QUESTION
        [approval] = asked(await resume(question, answer=OPTIONS[0]))
        events = await resume(approval, decision="approve")
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "success"
    said = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert DONE in said
    assert_the_demo_ran(stand_in, "gemini", workspace)


async def test_acp_over_stdio_on_openai_chat_completions_streamed(
    provider_env: tuple[StandIn, dict[str, str]], tmp_path: Path, workspace: Path
) -> None:
    stand_in, env = provider_env
    scripted(stand_in, Wire(fragment=7, interleave=True, empty_text=True))
    database_url = f"sqlite:///{tmp_path / 'plangate.db'}"
    model = ("--model", "openai:gpt-4o-mini")
    async with editor(tmp_path, workspace, database_url, *model, env=env) as (client, conn):
        await new_session(client, conn, workspace)
        answers = ("Enter Plan Mode", "0", "approve")
        assert await prompt(client, conn, "Fix the failing test", *answers) == "end_turn"
        titles = [p[0].title for p in client.permissions]
        assert titles[1:] == [QUESTION, "Approve plan (revision 1)"], titles
        assert client.text().endswith(DONE)
    assert_the_demo_ran(stand_in, "openai", workspace)
