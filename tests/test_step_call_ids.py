"""A model step whose calls share an id (a gateway that repeats one), or reuse an earlier
step's id (a server numbering ids per response): each call gets an id of its own, so a
read's result never answers the question beside it, the run pauses for the user, and the
history sent back has exactly one result per call. Through the real Runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.genai import types

from harness import agreeing_reply
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.adk.step_call_ids import unique_call_ids
from plangate.agent.coding_agent import build_coding_agent
from plangate.models.scripted import ScriptedLlm, call, text


def sent_calls_and_results(model: ScriptedLlm, request: int) -> tuple[list[str], list[str]]:
    ids: tuple[list[str], list[str]] = ([], [])
    for content in model.requests[request].contents:
        for part in content.parts or []:
            if part.function_call is not None:
                ids[0].append(part.function_call.id or "")
            if part.function_response is not None:
                ids[1].append(part.function_response.id or "")
    return ids


async def open_planning(workspace: Path, database_url: str, model: ScriptedLlm) -> PlanSession:
    runner = build_runner(build_coding_agent(workspace, model), database_url=database_url)
    return await PlanSession.open(runner, state={"agent_mode": "plan"})


async def run(session: PlanSession, message: Any) -> None:
    async for _ in session.run(message):
        pass


async def test_a_read_and_a_question_sharing_an_id_still_pause_for_the_answer(
    workspace: Path, database_url: str
) -> None:
    model = ScriptedLlm().add(
        [
            call("Read", "call_0", path="inventory/stock.py"),
            call("ask_user_question", "call_0", question="Which file?", options=["a", "b"]),
        ],
        [text("Noted.")],
    )
    session = await open_planning(workspace, database_url, model)
    await run(session, "look first")
    [question] = await session.pending()
    assert question.kind == "question" and question.call_id != "call_0"
    assert len(model.requests) == 1, "the run waited for the user"

    await run(session, agreeing_reply(question))
    assert await session.pending() == []
    calls, results = sent_calls_and_results(model, 1)
    assert len(set(calls)) == 2 and sorted(results) == sorted(calls)
    record = await session.record()
    assert record is not None and record.asked_questions[0].answer == "a"


async def test_an_id_reused_from_an_earlier_step_is_a_new_request(
    workspace: Path, database_url: str
) -> None:
    ask = {"question": "Which file?", "options": ["a", "b"]}
    model = ScriptedLlm().add(
        [call("ask_user_question", "call_0", **ask)],
        [call("ask_user_question", "call_0", **{**ask, "question": "Which test?"})],
        [text("Noted.")],
    )
    session = await open_planning(workspace, database_url, model)
    await run(session, "look first")
    [first] = await session.pending()
    await run(session, agreeing_reply(first))
    [second] = await session.pending()
    assert second.call_id != first.call_id, "the earlier answer does not answer it"
    assert len(model.requests) == 2
    await run(session, agreeing_reply(second))
    record = await session.record()
    assert record is not None
    assert [(q.question, q.answer) for q in record.asked_questions] == [
        ("Which file?", "a"),
        ("Which test?", "a"),
    ]
    calls, results = sent_calls_and_results(model, 2)
    assert len(set(calls)) == 2 and sorted(results) == sorted(calls)


def test_a_repeat_is_renamed_to_an_id_no_call_holds() -> None:
    content = types.Content(
        role="model",
        parts=[
            types.Part(text="two calls"),
            call("Read", "call_1", path="a"),
            call("Read", "call_1", path="b"),
            call("Read", "call_1_2", path="c"),
            call("Read", None, path="d"),
        ],
    )
    assert unique_call_ids(content) == {2: "call_1_3"}
    ids = [p.function_call.id for p in content.parts or [] if p.function_call is not None]
    assert ids == ["call_1", "call_1_3", "call_1_2", None]
    assert unique_call_ids(content) == {}, "nothing left to rename"
