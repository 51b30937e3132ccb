"""The offline demo tells the truth, through the real Runner: it ticks only the todos it
did, a rejection note changes the plan, a failed edit is never followed by "Done", a
workspace that is already fixed is said to be so, and its hints fit the surface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from google.genai import types

from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.todos import todos_state_key
from plangate.models.config import resolve_model
from plangate.models.demo import (
    FIX_STEP,
    OPTIONS,
    REVISE_QUESTION,
    TEST_STEP,
    DemoModel,
)
from plangate.plan import PlanStatus
from plangate.plan.record import PendingRequest
from plangate.plan.replies import KEEP_PLANNING_NOTE

Decide = Callable[[PendingRequest], types.Content]
ADDED = "Note the fix in CHANGELOG.md"


async def open_demo(tmp_path: Path, workspace: Path, surface: str | None = None) -> PlanSession:
    agent = build_coding_agent(workspace, DemoModel(surface=surface))
    runner = build_runner(agent, database_url=f"sqlite:///{tmp_path / 'demo.db'}")
    return await PlanSession.open(runner)


async def drive(session: PlanSession, message: str, decide: Decide) -> list[str]:
    """Run the message, answer every request with ``decide``; the texts the demo said."""
    said: list[str] = []

    async def run(content: str | types.Content) -> None:
        async for event in session.run(content):
            said.extend(
                p.text for p in (event.content.parts if event.content else []) or [] if p.text
            )

    await run(message)
    while (waiting := await session.awaiting()).open:
        for request in waiting.open:
            await session.submit(decide(request))
        resume = await session.resume_message()
        assert resume is not None
        await run(resume)
    return said


def plan_then(approval: Callable[[PendingRequest], types.Content]) -> Decide:
    def decide(request: PendingRequest) -> types.Content:
        if request.kind == "enter":
            return PlanSession.confirm_enter(request, True)
        if request.kind == "question":
            return PlanSession.answer(request, OPTIONS[0])
        return approval(request)

    return decide


async def todos(session: PlanSession) -> list[tuple[str, str]]:
    stored = await session.session()
    return [
        (t["content"], t["status"]) for t in stored.state[todos_state_key(session.runtime.branch)]
    ]


async def test_a_step_added_in_a_plan_edit_is_not_ticked(tmp_path: Path, workspace: Path) -> None:
    session = await open_demo(tmp_path, workspace)

    def approve_with_a_step(request: PendingRequest) -> types.Content:
        content = str(request.payload["content"]).replace(
            f"2. {TEST_STEP}\n", f"2. {TEST_STEP}\n3. {ADDED}\n"
        )
        return PlanSession.approve(request, content=content)

    said = await drive(session, "Fix the failing test", plan_then(approve_with_a_step))
    assert await todos(session) == [
        (FIX_STEP, "completed"),
        (TEST_STEP, "completed"),
        (ADDED, "pending"),
    ]
    report = said[-1]
    assert not report.startswith("[demo] Done") and f"Not done: “{ADDED}”" in report
    assert "5 passed" in report

    # Asked later, it does not claim the open plan is implemented.
    said = await drive(session, "Anything left?", plan_then(PlanSession.approve))
    assert "still open" in said[-1] and "implemented and the tests pass" not in said[-1]


async def test_a_rejection_note_becomes_a_step_of_the_revised_plan(
    tmp_path: Path, workspace: Path
) -> None:
    session = await open_demo(tmp_path, workspace)
    note = "Also log the refused quantity"

    def reject_once(request: PendingRequest) -> types.Content:
        if request.revision == 1:
            return PlanSession.reject(request, note=note)
        return PlanSession.approve(request)

    await drive(session, "Fix the failing test", plan_then(reject_once))
    record = await session.record()
    assert record.status is PlanStatus.APPROVED
    assert f"2. {TEST_STEP}\n3. {note}\n" in record.content
    assert "Addressed" not in record.content and "Reviewer feedback" not in record.content
    assert (note, "pending") in await todos(session)


async def test_a_rejection_without_a_note_asks_what_to_change(
    tmp_path: Path, workspace: Path
) -> None:
    session = await open_demo(tmp_path, workspace)
    asked: list[str] = []

    def decide(request: PendingRequest) -> types.Content:
        if request.kind == "question" and request.payload["message"] == REVISE_QUESTION:
            asked.append(REVISE_QUESTION)
            return PlanSession.answer(request, "Keep the error message short")
        if request.kind == "exit" and request.revision == 1:
            return PlanSession.reject(request, note=KEEP_PLANNING_NOTE)
        return plan_then(PlanSession.approve)(request)

    await drive(session, "Fix the failing test", decide)
    assert asked == [REVISE_QUESTION]
    assert "3. Keep the error message short\n" in (await session.record()).content


async def test_a_failed_edit_is_never_followed_by_done(tmp_path: Path, workspace: Path) -> None:
    session = await open_demo(tmp_path, workspace)
    stock = workspace / "inventory" / "stock.py"

    def changed_meanwhile(request: PendingRequest) -> types.Content:
        # Someone else changes the file between the review and the approval.
        stock.write_text(stock.read_text().replace("on_hand + 1", "on_hand + 2"))
        return PlanSession.approve(request)

    said = await drive(session, "Fix the failing test", plan_then(changed_meanwhile))
    assert "EDIT_NO_MATCH" in said[-1] and "Nothing was marked done" in said[-1]
    assert not any("Done" in text for text in said)
    assert all(status != "completed" for _, status in await todos(session))


async def test_an_already_fixed_workspace_is_said_to_be_so(tmp_path: Path, workspace: Path) -> None:
    stock = workspace / "inventory" / "stock.py"
    stock.write_text(stock.read_text().replace("on_hand + 1", "on_hand"))
    session = await open_demo(tmp_path, workspace)
    said = await drive(session, "Fix the failing test", plan_then(PlanSession.approve))
    assert any("already fixed in this workspace" in text for text in said)
    assert "EDIT_NO_MATCH" in said[-1] and "Nothing was marked done" in said[-1]
    assert not any("Done" in text for text in said)


@pytest.mark.parametrize(
    ("surface", "hint"),
    [
        ("terminal", "type /plan and the task"),
        ("web", "switch Plan mode on and send the task again"),
        ("editor", "switch the mode to Plan (or type /plan"),
        (None, "turn Plan Mode on and send the task again"),
    ],
)
async def test_hints_fit_the_surface(
    tmp_path: Path, workspace: Path, surface: str | None, hint: str
) -> None:
    session = await open_demo(tmp_path, workspace, surface)

    def decline(request: PendingRequest) -> types.Content:
        return PlanSession.confirm_enter(request, False)

    said = await drive(session, "Fix the failing test", decline)
    assert hint in said[-1]
    if surface != "terminal" and surface != "editor":
        assert "/plan" not in said[-1]


def test_the_surface_reaches_the_demo_and_is_checked() -> None:
    model = resolve_model("demo", surface="web")
    assert isinstance(model, DemoModel) and model.surface == "web"
    with pytest.raises(ValueError):
        DemoModel(surface="fax")  # type: ignore[arg-type]


@pytest.mark.parametrize("approve_edit", [True, False])
async def test_an_edit_reviewed_on_approval_is_applied_or_refused_as_said(
    tmp_path: Path, workspace: Path, approve_edit: bool
) -> None:
    """With "ask for each edit" the fix waits for the reviewer; refused, the demo says so
    (never that the file changed under it) and marks nothing done."""
    session = await open_demo(tmp_path, workspace, surface="web")
    stock = workspace / "inventory" / "stock.py"
    before = stock.read_text()
    reviewed: list[str] = []

    def decide(request: PendingRequest) -> types.Content:
        if request.kind == "edit":
            reviewed.append(str(request.payload.get("diff")))
            if approve_edit:
                return PlanSession.approve(request)
            return PlanSession.reject(request, note="not now")
        return plan_then(lambda r: PlanSession.approve(r, permission="ask_each_edit"))(request)

    said = await drive(session, "Fix the failing test", decide)
    # The file edit, and (approved) the test command, which could rewrite files too.
    diff, *commands = reviewed
    assert commands == (["None"] if approve_edit else [])
    assert "-        if quantity > on_hand + 1:\n+        if quantity > on_hand:\n" in diff
    if approve_edit:
        assert "on_hand + 1" not in stock.read_text()
        assert said[-1].startswith("[demo] Done.") and "5 passed" in said[-1]
        return
    assert stock.read_text() == before
    assert said[-1] == (
        "[demo] You refused the edit of `inventory/stock.py`, so the fix is not applied: "
        "nothing was changed and nothing was marked done."
    )
    assert all(status != "completed" for _, status in await todos(session))
