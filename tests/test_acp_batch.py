"""Several requests in one model step, and mode switches while a turn runs, over ACP:
the real SDK client over stdio, ``plangate acp`` with a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_support import (
    CANCEL,
    FORMS,
    editor,
    new_session,
    open_session,
    planning_session,
    prompt,
    script,
    sqlite_database_url,
)
from plangate.plan import PlanStatus

database_url = sqlite_database_url


def ask(question: str, *options: str) -> dict[str, Any]:
    args: dict[str, Any] = {"question": question}
    if options:
        args["options"] = list(options)
    return {"call": "ask_user_question", "args": args}


TWO_QUESTIONS = [ask("Which database?", "PostgreSQL", "SQLite"), ask("Which port?")]
ECHO = [{"echo": "resumed with "}]


def replies_sent(stored: Any) -> list[list[str]]:
    """The call ids of each user turn in the stored session that carried replies."""
    turns = [
        [p.function_response.id for p in event.content.parts or [] if p.function_response]
        for event in stored.events
        if event.author == "user" and event.content is not None
    ]
    return [turn for turn in turns if turn]


def echoed(text: str) -> list[dict[str, Any]]:
    """The function responses the scripted model echoed after ``resumed with``."""
    return json.loads(text.split("resumed with ", 1)[1])


async def test_two_questions_in_one_step_are_each_asked_once_then_resumed_together(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    model = script(tmp_path, "two-questions", TWO_QUESTIONS, ECHO)
    async with editor(tmp_path, workspace, database_url, *model, capabilities=FORMS) as (
        client,
        conn,
    ):
        await planning_session(client, conn, workspace)
        client.elicited_answers.append({"text": "5432"})
        stop = await prompt(client, conn, "add persistence", "PostgreSQL", "Answer in my own words")
        assert stop == "end_turn"

        (first, _, _), (second, _, _) = client.permissions
        assert (first.title, second.title) == ("Which database?", "Which port?")
        assert first.tool_call_id != second.tool_call_id, "each question asked once"
        # Each answer is shown as it is recorded, before the run resumes.
        [db] = client.results(first.tool_call_id)
        [port] = client.results(second.tool_call_id)
        assert (db.raw_output["answer"], port.raw_output["answer"]) == ("PostgreSQL", "5432")
        # One resume, with both answers.
        answers = [r["answer"] for r in echoed(client.text()) if "answer" in r]
        assert answers == ["PostgreSQL", "5432"]

    session = await open_session(workspace, database_url, client.session_id)
    assert await session.pending() == []
    # The run was resumed once, by one message answering both calls.
    assert replies_sent(await session.session()) == [[first.tool_call_id, second.tool_call_id]]
    record = await session.record()
    assert [(q.question, q.answer) for q in record.asked_questions] == [
        ("Which database?", "PostgreSQL"),
        ("Which port?", "5432"),
    ]


async def test_a_question_beside_the_plan_submission_then_the_approval(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    model = script(
        tmp_path,
        "question-and-approval",
        [
            {
                "call": "update_plan_content",
                "args": {"content": "1. Add the table\n2. Run the tests\n", "mode": "replace"},
            }
        ],
        [ask("Which database?", "PostgreSQL", "SQLite"), {"call": "exit_plan_mode"}],
        ECHO,
    )
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await planning_session(client, conn, workspace)
        stop = await prompt(client, conn, "add persistence", "SQLite", "approve")
        assert stop == "end_turn"

        (question, _, _), (approval, _, _) = client.permissions
        assert question.title == "Which database?"
        assert approval.title == "Approve plan (revision 1)"
        [answered] = client.results(question.tool_call_id)
        assert answered.raw_output["answer"] == "SQLite"
        [approved] = client.results(approval.tool_call_id)
        assert approved.raw_output["status"] == "approved"
        assert client.modes() == ["plan", "default"]
        seen = echoed(client.text())
        assert [r.get("answer") for r in seen if "question_id" in r] == ["SQLite"]
        assert any(r.get("status") == "approved" for r in seen)

    record = await (await open_session(workspace, database_url, client.session_id)).record()
    assert record.status is PlanStatus.APPROVED and record.pending == []


async def test_a_cancel_mid_batch_keeps_the_answer_given_and_asks_only_the_rest(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    first_run = script(tmp_path, "first", TWO_QUESTIONS)
    async with editor(tmp_path, workspace, database_url, *first_run) as (client, conn):
        await planning_session(client, conn, workspace)
        assert await prompt(client, conn, "add persistence", "SQLite", CANCEL) == "cancelled"
        (first, _, _), (second, _, _) = client.permissions
        [answered] = client.results(first.tool_call_id)
        assert answered.raw_output["answer"] == "SQLite"

        # After the cancel only the open question is asked; the prompt is cancelled again.
        assert await prompt(client, conn, "go on", CANCEL) == "cancelled"
        [(again, _, _)] = client.permissions[2:]
        assert again.tool_call_id == second.tool_call_id

    # Durable: after a restart, the first answer stands and only the rest is asked.
    session = await open_session(workspace, database_url, client.session_id)
    assert [p.call_id for p in await session.pending()] == [second.tool_call_id]
    assert (await session.record()).asked_questions[0].answer == "SQLite"

    resumed = script(tmp_path, "resumed", ECHO, [{"text": "noted: go on"}])
    async with editor(tmp_path, workspace, database_url, *resumed) as (client, conn):
        await conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[])
        client.session_id = session.session_id
        assert client.text().endswith(
            "The question “Which port?” is still open: it is asked again when you send your "
            "next message."
        )
        start = len(client.updates)
        assert await prompt(client, conn, "go on", "Skip") == "end_turn"
        [(asked, _, _)] = client.permissions
        assert asked.tool_call_id == second.tool_call_id, "never the answered question"
        text = client.text(start)
        assert [r["answer"] for r in echoed(text.split("noted")[0]) if "answer" in r] == [
            "SQLite",
            "(no answer)",
        ]
        assert text.endswith("noted: go on"), "the message follows the resumed run"
    stored = await (await open_session(workspace, database_url, session.session_id)).session()
    assert replies_sent(stored) == [[first.tool_call_id, second.tool_call_id]]


# -- mode switches while a turn runs --------------------------------------------------------

WAIT_FOR_RELEASE = "while [ ! -e release ]; do sleep 0.05; done; echo released"


@pytest.mark.parametrize("switch", ["set_mode", "config_option"])
async def test_plan_mode_selected_while_a_tool_runs_refuses_the_next_write_in_the_same_run(
    tmp_path: Path, workspace: Path, database_url: str, switch: str
) -> None:
    model = script(
        tmp_path,
        "switch",
        [{"call": "Bash", "args": {"command": WAIT_FOR_RELEASE}}],
        [{"call": "Write", "args": {"path": "notes.txt", "content": "written\n"}}],
        [{"echo": "after the write: "}],
    )
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await new_session(client, conn, workspace)

        async def select_plan_then_release() -> Any:
            # The command waits for the file, so the switch lands while the run is in
            # progress; the command then finishes and the run goes on.
            if switch == "set_mode":
                answer = await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
            else:
                answer = await conn.set_config_option(
                    config_id="mode", session_id=client.session_id, value="plan"
                )
            (workspace / "release").touch()
            return answer

        client.during = ("Run while", select_plan_then_release)
        assert await prompt(client, conn, "write a note") == "end_turn"
        assert client.during_task is not None and client.during_task.done()
        client.during_task.result()  # no error (no StaleSessionError)

        [bash] = client.calls("Run while")
        [ran] = client.results(bash.tool_call_id)
        assert ran.status == "completed" and ran.raw_output["exit_code"] == 0
        assert "released" in ran.raw_output["stdout"], "the running tool's result is kept"
        [write] = client.calls("Write notes.txt")
        [refused] = client.results(write.tool_call_id)
        assert refused.status == "failed"
        assert "PLAN_MODE_GATE" in refused.content[0].content.text
        assert not (workspace / "notes.txt").exists()
        assert "PLAN_MODE_GATE" in client.text(), "the model was told in the same run"
        assert client.modes() == ["plan"]

    session = await open_session(workspace, database_url, client.session_id)
    mode = await session.mode()
    assert mode.active and mode.pending is None
