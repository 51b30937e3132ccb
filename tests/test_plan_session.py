"""The surface API: mode selection at the boundary, /plan off semantics, bound replies."""

from __future__ import annotations

from harness import WRITES, make_agent, tool_results
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from plangate.plan.transitions import force_enter


async def open_session(database_url: str, model: ScriptedLlm) -> PlanSession:
    runner = build_runner(make_agent(model), database_url=database_url, app_name="surface")
    return await PlanSession.open(runner, session_id="s1")


async def collect(session: PlanSession, message) -> list:
    return [event async for event in session.run(message)]


async def test_plan_selection_applies_at_the_next_step(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    assert (await session.mode()).active is False
    assert await session.select_plan() == (
        "Entering plan mode (applies from the next step). Use /plan off to leave."
    )
    mode = await session.mode()
    assert mode.active is False and mode.pending is True
    model.add([call("Write", path="a", content="b")], [text("planning")])
    events = await collect(session, "build it")
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    mode = await session.mode()
    assert mode.active is True and mode.pending is None and mode.plan_status == "exploring"


async def test_plan_off_variants(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    assert await session.leave_plan() == "Plan mode is already inactive."
    await session.select_plan()
    assert await session.leave_plan() == "Plan mode entry cancelled."
    assert (await session.mode()).pending is None
    model.add([call("Write", path="a", content="b")], [text("done")])
    await collect(session, "write")
    assert WRITES == [("a", "b")]
    assert await session.record() is None
    await session.select_plan()
    model.add([text("planning")])
    await collect(session, "plan it")
    assert (await session.mode()).active
    assert (await session.leave_plan()).startswith("Left plan mode")
    assert (await session.record()).status is PlanStatus.CANCELLED
    assert (await session.mode()).active is False
    journal = [e.event for e in await session.journal()]
    assert any(e.to_state == "cancelled" and e.actor == "user" for e in journal)


async def test_leaving_while_an_approval_waits_withdraws_it(database_url: str) -> None:
    model = ScriptedLlm(assign_ids=False)
    session = await open_session(database_url, model)
    await session.select_plan()
    model.add([call("update_plan_content", content="1. x")], [call("exit_plan_mode")])
    await collect(session, "task")
    assert len(await session.pending()) == 1
    await session.leave_plan()
    assert await session.pending() == []
    model.add([call("Write", path="a", content="b")], [text("ok")])
    await collect(session, "just do it")
    last = model.requests[-1]
    withdrawn = [
        p.function_response.response
        for c in last.contents
        for p in c.parts or []
        if p.function_response and p.function_response.name == "exit_plan_mode"
    ]
    assert withdrawn and withdrawn[0]["status"] == "cancelled"
    assert WRITES == [("a", "b")]


async def test_bound_replies_and_resume_after_reopen(database_url: str) -> None:
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await session.select_plan()
    model.add([call("update_plan_content", content="1. x")], [call("exit_plan_mode")])
    await collect(session, "task")
    reopened = await open_session(database_url, model)
    [request] = await reopened.pending()
    assert request.kind == "exit" and request.revision == 1
    model.add([text("approved, implementing")])
    await collect(reopened, PlanSession.approve(request, content="1. x\n2. y"))
    record = await reopened.record()
    assert record.status is PlanStatus.APPROVED and record.content.endswith("2. y")
    assert (await reopened.selection()) == "agent"


async def test_a_run_settles_with_the_session_state_as_stored(database_url: str) -> None:
    """The state a run settled with is what a caller reconciles with afterwards (the
    AG-UI end of run reads no more): it must equal the stored state, mirror included."""
    model = ScriptedLlm()
    session = await open_session(database_url, model)
    await session.select_plan()
    model.add([call("Write", path="a", content="b")], [text("planning")])
    await collect(session, "build it")
    stored = await session.session(events=False)
    assert session.settled_state == stored.state
    assert session.settled_state[session.runtime.state_key]["status"] == "exploring"
    # The store changes after the run's last step (another writer): settling appends the
    # mirror, and the settled state holds that write.
    model.add([text("ok")])
    async for event in session.run("thanks"):
        if event.is_final_response():
            loaded = await session.runtime.load(session.scope)
            edited = force_enter(None, objective="edited elsewhere", now=1.0).record
            await session.runtime.commit(
                session.scope, loaded, loaded.state.model_copy(update={"record": edited})
            )
    stored = await session.session(events=False)
    assert session.settled_state == stored.state
    assert stored.state[session.runtime.state_key]["objective"] == "edited elsewhere"
