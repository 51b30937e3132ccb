"""The shipped agent (the coding agent with the data tools, protocol routing on) under a
model that batches its calls: every shape of a model step that pauses -- a pausing call
beside reads, beside writes, several pausing calls, the plan written and submitted
together -- pauses, resumes once every request is answered, and the protocol run goes on
until the run really ends. Through the real Runner, with a scripted model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import agreeing_reply, tool_results
from plangate.adk.protocols import get_protocol_state
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.data import DataCatalog
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan import PlanStatus
from protocol_support import classification

PLAN = "1. Round stock in inventory/stock.py\n2. Run the tests"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


async def open_shipped(
    workspace: Path, database_url: str, catalog: DataCatalog, model: ScriptedLlm
) -> PlanSession:
    agent = build_coding_agent(workspace, model, data=catalog)
    runner = build_runner(agent, database_url=database_url)
    return await PlanSession.open(runner, session_id="batches", state={"agent_mode": "plan"})


def shipped_model() -> ScriptedLlm:
    # The protocol router's classifier is a side call with no tools.
    return ScriptedLlm(side_answer=classification("general-task", "new"))


async def collect(session: PlanSession, message: Any) -> list[Any]:
    return [event async for event in session.run(message)]


async def answer_all(session: PlanSession) -> list[Any]:
    """Answer every open request as an agreeing user; resume once all are answered."""
    events: list[Any] = []
    while pending := await session.pending():
        waiting = None
        for request in pending:
            waiting = await session.submit(agreeing_reply(request))
        assert waiting is not None and waiting.ready, waiting
        events += await collect(session, waiting.message)
    return events


def refusals(events: list[Any]) -> list[dict[str, Any]]:
    return [r for r in tool_results(events) if "error" in r]


async def protocol_status(session: PlanSession) -> str:
    state = get_protocol_state(await session.session())
    assert state is not None
    return state["run_status"]


@pytest.mark.parametrize(
    "first_step",
    [
        pytest.param(
            [call("update_plan_content", content=PLAN), call("exit_plan_mode")],
            id="write-and-submit",
        ),
        pytest.param(
            [
                call("Read", path="inventory/stock.py"),
                call("update_plan_content", content=PLAN),
                call("exit_plan_mode"),
            ],
            id="read-write-submit",
        ),
    ],
)
async def test_a_plan_written_and_submitted_in_one_step_is_implemented(
    workspace: Path,
    database_url: str,
    catalog: DataCatalog,
    first_step: list[Any],
) -> None:
    model = shipped_model()
    session = await open_shipped(workspace, database_url, catalog, model)
    model.add(first_step)
    await collect(session, "round the stock")
    assert (await session.record()).status is PlanStatus.PENDING_APPROVAL
    assert await protocol_status(session) == "running"

    model.add(
        [call("Write", path="NOTES.md", content="rounded\n")],
        [text("Done.")],
    )
    events = await answer_all(session)
    assert refusals(events) == []
    assert (workspace / "NOTES.md").read_text() == "rounded\n"
    assert (await session.record()).status is PlanStatus.APPROVED
    assert await protocol_status(session) == "completed"


@pytest.mark.parametrize(
    "first_step",
    [
        pytest.param(
            [
                call("ask_user_question", question="Which file?", options=["a", "b"]),
                call("ask_user_question", question="Which test?", options=["c", "d"]),
            ],
            id="two-questions",
        ),
        pytest.param(
            [
                call("Read", path="inventory/stock.py"),
                call("ask_user_question", question="Which file?", options=["a", "b"]),
            ],
            id="read-and-question",
        ),
        pytest.param(
            [
                call("Write", path="NOTES.md", content="early\n"),
                call("ask_user_question", question="Which file?", options=["a", "b"]),
            ],
            id="refused-write-and-question",
        ),
    ],
)
async def test_a_question_beside_other_calls_lets_the_plan_go_on(
    workspace: Path,
    database_url: str,
    catalog: DataCatalog,
    first_step: list[Any],
) -> None:
    model = shipped_model()
    session = await open_shipped(workspace, database_url, catalog, model)
    model.add(first_step)
    await collect(session, "round the stock")
    assert len(await session.pending()) == sum(
        1 for c in first_step if c.function_call.name == "ask_user_question"
    )
    assert await protocol_status(session) == "running"

    model.add(
        [call("update_plan_content", content=PLAN)],
        [call("exit_plan_mode")],
        [call("Write", path="NOTES.md", content="after\n")],
        [text("Done.")],
    )
    events = await answer_all(session)
    assert [r for r in refusals(events) if "PROTOCOL" in r["error"]] == []
    assert (await session.record()).status is PlanStatus.APPROVED
    assert (workspace / "NOTES.md").read_text() == "after\n"
    assert await protocol_status(session) == "completed"


async def test_a_sub_agent_beside_a_question_reports_and_the_plan_goes_on(
    workspace: Path, database_url: str, catalog: DataCatalog
) -> None:
    model = shipped_model()
    session = await open_shipped(workspace, database_url, catalog, model)
    model.add(
        [
            call("spawn_subagent", subagent_type="Explore", prompt="Where is stock reserved?"),
            call("ask_user_question", question="Round up or down?", options=["up", "down"]),
        ],
        [text("inventory/stock.py reserves stock")],  # the sub-agent's answer
    )
    events = await collect(session, "round the stock")
    (report,) = tool_results(events, "spawn_subagent")
    assert report["text"] == "inventory/stock.py reserves stock"
    assert [p.kind for p in await session.pending()] == ["question"]
    assert await protocol_status(session) == "running"

    model.add(
        [call("update_plan_content", content=PLAN), call("exit_plan_mode")],
        [call("Write", path="NOTES.md", content="after\n")],
        [text("Done.")],
    )
    events = await answer_all(session)
    assert [r for r in refusals(events) if "PROTOCOL" in r["error"]] == []
    assert (workspace / "NOTES.md").read_text() == "after\n"
    assert await protocol_status(session) == "completed"


async def test_two_writes_outside_the_scope_in_one_step_each_wait_and_both_run(
    workspace: Path, database_url: str, catalog: DataCatalog
) -> None:
    model = shipped_model()
    session = await open_shipped(workspace, database_url, catalog, model)
    scope = {"write": ["inventory/stock.py"], "commands": ["python -m pytest"]}
    model.add([call("update_plan_content", content=PLAN, scope=scope), call("exit_plan_mode")])
    await collect(session, "round the stock")
    model.add(
        [
            call("Write", path="NOTES.md", content="one\n"),
            call("Write", path="CHANGES.md", content="two\n"),
        ]
    )
    (request,) = await session.pending()
    waiting = await session.submit(PlanSession.approve(request))
    await collect(session, waiting.message)
    asked = await session.pending()
    assert [p.kind for p in asked] == ["amendment", "amendment"]
    assert await protocol_status(session) == "running"

    model.add([text("Both written.")])
    events = await answer_all(session)
    assert refusals(events) == []
    assert (workspace / "NOTES.md").read_text() == "one\n"
    assert (workspace / "CHANGES.md").read_text() == "two\n"
    assert await protocol_status(session) == "completed"
