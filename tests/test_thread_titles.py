"""Thread titles follow the task a thread works on (its active session intent), not the
first message: a "try again", a side chat or a refinement keeps the title (a refinement
adds to the task, it is not a new one), a new task replaces it, a branch keeps what it
was forked on. A thread without an intent
keeps its first message. Through the real web thread list (``GET /api/threads``) and a
real ACP client's ``session/list``, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from acp_support import editor, new_session, prompt
from harness import make_agent
from plangate.adk.protocols import ProtocolOptions, get_protocol_state, setup_protocols
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.adk.thread_titles import clip_title
from plangate.models.scripted import ScriptedLlm, text
from plangate.web.server import create_app
from protocol_support import ScriptedClassifier, classification

BASE = "http://127.0.0.1:8765"


class Web:
    """The web app over an agent under protocol governance, a scripted model and a
    scripted classifier."""

    def __init__(self, database_url: str, classifier: ScriptedClassifier) -> None:
        self.model = ScriptedLlm()
        agent = setup_protocols(make_agent(self.model), ProtocolOptions(classifier=classifier))
        self.runner = build_runner(agent, database_url=database_url, app_name="web")
        app = create_app(runner=self.runner, require_token=False, token=None)
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)

    async def say(self, thread_id: str, words: str) -> None:
        self.model.add([text("ok")])
        session = await PlanSession.open(self.runner, session_id=thread_id)
        async for _ in session.run(words):
            pass

    async def titles(self) -> dict[str, str]:
        response = await self.http.get("/api/threads")
        assert response.status_code == 200, response.text
        return {t["threadId"]: t["title"] for t in response.json()["threads"]}


async def test_the_web_thread_list_titles_a_thread_by_its_active_intent(
    database_url: str,
) -> None:
    classifier = ScriptedClassifier(
        classification("data-analysis", "replace"),  # sales by region
        classification("general-task", "side-chat"),  # how are you today?
        classification("general-task", "replace"),  # the release notes
        classification("general-task", "refine"),  # only for version 2
        classification("general-task", "replace"),  # a blog post (after the branch)
        classification("general-task", "replace", confidence=0.4),  # unsure: no task
    )
    web = Web(database_url, classifier)
    try:
        await web.say("t-task", "sales by region")
        await web.say("t-task", "try again")  # a weak follow-up: no classifier call
        await web.say("t-task", "how are you today?")
        assert (await web.titles())["t-task"] == "sales by region"

        await web.say("t-task", "write the release notes instead")
        assert (await web.titles())["t-task"] == "write the release notes instead"

        await web.say("t-task", "only for version 2")
        refined = "write the release notes instead"
        assert (await web.titles())["t-task"] == refined

        # A branch is named by the task it was forked on, whatever its parent does next.
        response = await web.http.post("/api/threads/t-task/branch", json={})
        assert response.status_code == 201, response.text
        branch = response.json()["threadId"]
        await web.say("t-task", "draft a blog post about the release")
        # Weak messages and an unsure classifier: the thread never gets a task.
        await web.say("t-none", "continue")
        await web.say("t-none", "retry")
        stored = await PlanSession(web.runner, user_id="user", session_id="t-none").session()
        assert (get_protocol_state(stored, "orchestrator") or {})["intent"] is None
        titles = await web.titles()
        assert titles == {
            "t-task": "draft a blog post about the release",
            branch: refined,
            "t-none": "continue",
        }
        assert len(classifier.inputs) == 7
    finally:
        await web.http.aclose()


def test_a_title_is_the_first_line_clipped() -> None:
    assert clip_title("\n  sales  by region\n(Additional requirement: by month)") == (
        "sales by region"
    )
    assert clip_title("x" * 81) == "x" * 79 + "…"
    assert clip_title("x" * 80) == "x" * 80


async def test_acp_session_list_titles_a_session_by_its_active_intent(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    """The demo model: the first message becomes the task; a data question the demo
    classifier calls a new task replaces it, and the list follows (the session's stored
    first-message title stays as the fallback)."""
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await new_session(client, conn, workspace)
        first = client.session_id
        assert await prompt(client, conn, "Fix the failing test\nand tell me", "No") == "end_turn"
        listed = await conn.list_sessions()
        assert _titles(listed) == {first: "Fix the failing test"}

        assert await prompt(client, conn, "revenue by region last quarter") == "refusal"
        await new_session(client, conn, workspace)
        listed = await conn.list_sessions()
        assert _titles(listed) == {first: "revenue by region last quarter", client.session_id: None}


def _titles(listed: Any) -> dict[str, str | None]:
    return {s.session_id: s.title for s in listed.sessions}
