"""Only a recorded human decision ends a grant.

The agent ticking every todo of an approved plan ends the approved-plan note and offers
Plan Mode again, but the grant -- the scope, "ask for each edit", the sandbox's scoped
binds -- holds until a human closes the plan (``PlanSession.close_plan``, ``/plan done``,
the web's close-plan endpoint, or selecting Plan Mode for the next plan), journaled with
the human as actor. Through the real ADK Runner, the real coding agent and its tools, a
scripted model, SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from harness import Harness
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan.record import PlanRecord, PlanStatus

THREAD = "t-close"
PLAN = "1. Fix the stock rounding in inventory/stock.py\n2. Add a test\n"
SCOPE = {
    "write": ["inventory/stock.py", "tests/test_stock.py"],
    "commands": ["python -m pytest"],
}
DONE = [
    {"content": "Fix the stock rounding in inventory/stock.py", "status": "completed"},
    {"content": "Add a test", "status": "completed"},
]


async def _approved_and_done(
    database_url: str, workspace: Path, **choices: Any
) -> tuple[Harness, ScriptedLlm, PlanSession]:
    """The coding agent's scoped plan, approved with ``choices``, its todos all done."""
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), database_url)
    await harness.start({"agent_mode": "plan"}, session_id=THREAD)
    model.add(
        [call("update_plan_content", content=PLAN, scope=SCOPE)],
        [call("exit_plan_mode", summary="ready")],
    )
    await harness.send("fix the rounding")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    (request,) = await session.pending()
    model.add([call("todo_write", todos=DONE)], [text("all done")])
    await harness.send(PlanSession.approve(request, **choices))
    record = await session.record()
    assert record is not None and record.finished_at is not None
    return harness, model, session


async def _kinds_by(session: PlanSession) -> list[tuple[str, str]]:
    return [(entry.event.kind, entry.event.actor) for entry in await session.journal()]


async def test_completed_todos_leave_the_scope_in_force(database_url: str, workspace: Path) -> None:
    harness, model, session = await _approved_and_done(database_url, workspace)
    readme = (workspace / "README.md").read_text()
    model.add([call("Write", path="README.md", content="owned\n")])
    await harness.send("one more thing")
    (amendment,) = await session.pending()
    assert amendment.kind == "amendment" and amendment.tool_name == "Write"
    assert (workspace / "README.md").read_text() == readme
    record = await session.record()
    assert record is not None and record.governs_writes() and record.closed_at is None
    # The agent's finished todos are journaled, but as ending nothing it was granted.
    kinds = await _kinds_by(session)
    assert ("plan.todos_done", "agent") in kinds
    assert not any(kind in ("plan.finished", "plan.closed") for kind, _ in kinds)


async def test_completed_todos_leave_a_destructive_command_paused(
    database_url: str, workspace: Path
) -> None:
    harness, model, session = await _approved_and_done(database_url, workspace)
    model.add([call("Bash", command="rm -rf inventory tests")])
    await harness.send("clean up")
    (amendment,) = await session.pending()
    assert amendment.kind == "amendment" and amendment.tool_name == "Bash"
    assert (workspace / "inventory").is_dir() and (workspace / "tests").is_dir()


async def test_ask_each_edit_still_pauses_every_write_after_the_todos_are_done(
    database_url: str, workspace: Path
) -> None:
    harness, model, session = await _approved_and_done(
        database_url, workspace, permission="ask_each_edit"
    )
    original = (workspace / "inventory" / "stock.py").read_text()
    model.add([call("Write", path="inventory/stock.py", content="# rewritten\n")])
    await harness.send("touch it up")
    (review,) = await session.pending()
    assert review.kind == "edit" and "+# rewritten" in review.payload["diff"]
    assert (workspace / "inventory" / "stock.py").read_text() == original


async def test_the_user_closing_the_plan_ends_the_grant_and_the_next_plan_works(
    database_url: str, workspace: Path
) -> None:
    harness, model, session = await _approved_and_done(database_url, workspace)
    first = await session.record()
    assert first is not None
    assert await session.close_plan() is True
    assert await session.close_plan() is False  # nothing left to close
    closed = await session.record()
    assert closed is not None and closed.closed_by == "user" and not closed.governs_writes()
    assert ("plan.closed", "user") in await _kinds_by(session)
    # The grant is over: the write runs unasked, as the user chose.
    model.add([call("Write", path="README.md", content="accepted\n")], [text("ok")])
    await harness.send("note it in the readme")
    assert await session.pending() == []
    assert (workspace / "README.md").read_text() == "accepted\n"
    # The next plan: offered, confirmed, approved with its own scope, the old one archived.
    model.add([call("enter_plan_mode", objective="next task")])
    await harness.send("now the next task")
    (enter,) = await session.pending()
    model.add(
        [call("update_plan_content", content="1. Touch tests\n", scope={"write": ["tests"]})],
        [call("exit_plan_mode", summary="next")],
    )
    await harness.send(PlanSession.confirm_enter(enter, True))
    (approval,) = await session.pending()
    model.add([call("Write", path="README.md", content="again\n")])
    await harness.send(PlanSession.approve(approval))
    (amendment,) = await session.pending()
    assert amendment.kind == "amendment"
    second = await session.record()
    assert second is not None and second.id != first.id and second.scope is not None
    assert list(second.scope.write) == ["tests"]
    assert first.id in [p.id for p in await session.archived()]


async def test_selecting_plan_mode_closes_the_open_plan_as_the_user(
    database_url: str, workspace: Path
) -> None:
    harness, model, session = await _approved_and_done(database_url, workspace)
    first = await session.record()
    assert first is not None
    await session.select_plan()
    model.add([text("exploring")])
    await harness.send("plan the next thing")
    record = await session.record()
    assert record is not None and record.status is PlanStatus.EXPLORING
    (archived,) = [p for p in await session.archived() if p.id == first.id]
    assert archived.closed_by == "user" and archived.closed_at is not None
    closing = [e.event for e in await session.journal() if e.event.kind == "plan.closed"]
    assert [(e.subject, e.actor) for e in closing] == [(first.id, "user")]


async def test_the_web_close_plan_button_ends_the_grant_as_the_user(
    database_url: str, workspace: Path
) -> None:
    from plangate.web.server import create_app

    harness, _model, session = await _approved_and_done(database_url, workspace)
    app = create_app(runner=harness.runner, require_token=False, token=None)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765"
    ) as http:
        path = f"/api/threads/{THREAD}/close-plan"
        response = await http.post(path, json={})
        assert response.status_code == 200, response.text
        assert response.json()["message"].startswith("Closed the approved plan")
        again = await http.post(path, json={})
        assert again.status_code == 409 and again.json()["code"] == "INVALID_STATE"
        not_json = await http.post(path, content=b"{}")
        assert not_json.status_code == 415
    record = await session.record()
    assert record is not None and record.closed_by == "user" and not record.governs_writes()
    assert ("plan.closed", "user") in await _kinds_by(session)


def test_a_stored_plan_finished_before_closing_existed_keeps_its_grant() -> None:
    # Records written when completed todos ended the plan carry ``finished_at`` and no
    # ``closed_at``: their grant holds until a human closes the plan.
    stored = {
        "id": "p1",
        "status": "approved",
        "objective": "old",
        "scope": {"write": ["a.py"]},
        "startedAt": 1.0,
        "updatedAt": 2.0,
        "finishedAt": 2.0,
    }
    record = PlanRecord.model_validate(stored)
    assert record.is_being_implemented() and record.governs_writes()
    assert not record.is_unfinished()


async def test_a_new_plan_the_model_asks_for_ends_no_grant_until_the_user_confirms(
    database_url: str, workspace: Path
) -> None:
    """The model asks to plan anew while the approved plan's grant holds; the user
    declines: the approved plan and its scope are back, and a write outside it still
    waits. Confirming instead closes the old plan as the user."""
    harness, model, session = await _approved_and_done(database_url, workspace)
    model.add([call("enter_plan_mode", objective="something else")])
    await harness.send("next task")
    (entry,) = await session.pending()
    assert entry.kind == "enter"
    readme = (workspace / "README.md").read_text()
    model.add([call("Write", path="README.md", content="owned\n")])
    await harness.send(PlanSession.confirm_enter(entry, False))
    (amendment,) = await session.pending()
    assert amendment.kind == "amendment" and amendment.tool_name == "Write"
    assert (workspace / "README.md").read_text() == readme
    record = await session.record()
    assert record is not None and record.status is PlanStatus.APPROVED
    assert record.governs_writes() and record.closed_at is None
    assert ("plan.restored", "user") in await _kinds_by(session)


async def test_confirming_the_new_plan_closes_the_old_one_as_the_user(
    database_url: str, workspace: Path
) -> None:
    harness, model, session = await _approved_and_done(database_url, workspace)
    model.add([call("enter_plan_mode", objective="something else")])
    await harness.send("next task")
    (entry,) = await session.pending()
    model.add([text("exploring")])
    await harness.send(PlanSession.confirm_enter(entry, True))
    record = await session.record()
    assert record is not None and record.status is PlanStatus.EXPLORING
    assert ("plan.closed", "user") in await _kinds_by(session)
