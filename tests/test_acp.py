"""``plangate acp`` driven by the real ACP SDK client over stdio, as an editor would.

Each test spawns ``python -m plangate.cli.main acp`` on a copy of the sample workspace
with the offline demo model, records every session update the agent sends and answers
``session/request_permission`` from a scripted queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentPlanUpdate,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeniedOutcome,
    ToolCallStart,
    UserMessageChunk,
)

from acp_support import (
    CANCEL,
    FIXED,
    FORMS,
    editor,
    new_session,
    open_session,
    planning_session,
    prompt,
    script,
    sqlite_database_url,
)
from plangate.acp import mapping, requests
from plangate.adk.session import ModeState
from plangate.models.demo import OPTIONS
from plangate.plan import PlanStatus
from plangate.plan.record import PendingRequest
from plangate.sandbox import sandbox_status
from plangate.store.leases import LeaseHeld, RunLeases
from plangate.store.store import Store

database_url = sqlite_database_url


# -- the tests ------------------------------------------------------------------------------


async def test_modes_are_advertised_and_only_real_changes_are_announced(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        info = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert info.agent_info.name == "plangate" and info.agent_info.version
        sandbox = info.agent_info.field_meta["plangate"]["sandbox"]
        assert sandbox["available"] == sandbox_status().available and sandbox["detail"]
        assert info.agent_capabilities.load_session is True

        session = await new_session(client, conn, workspace)
        assert session.modes.current_mode_id == "default"
        assert [(m.id, m.name) for m in session.modes.available_modes] == [
            ("default", "Default"),
            ("plan", "Plan"),
        ]
        [option] = session.config_options
        option = option.root if hasattr(option, "root") else option
        assert option.category == "mode" and option.current_value == "default"
        assert [o.value for o in option.options] == ["default", "plan"]
        # Only the slash commands, sent after the response: no mode or plan updates.
        await client.wait_for(AvailableCommandsUpdate)
        assert [type(u) for u in client.updates] == [AvailableCommandsUpdate]

        await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
        assert client.modes() == ["plan"]
        await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
        assert client.modes() == ["plan"], "a no-op selection sends nothing"

        before = len(client.updates)
        with pytest.raises(RequestError) as refused:
            await conn.set_session_mode(session_id=client.session_id, mode_id="yolo")
        assert refused.value.code == -32602
        assert "unknown session mode 'yolo' — available modes: default, plan" in str(refused.value)
        assert len(client.updates) == before

        # The config option is the same switch: back to default withdraws the pending entry.
        response = await conn.set_config_option(
            config_id="mode", session_id=client.session_id, value="default"
        )
        [option] = response.config_options
        option = option.root if hasattr(option, "root") else option
        assert option.current_value == "default"
        assert client.modes() == ["plan", "default"]
        [changed] = client.of(ConfigOptionUpdate, before)
        assert changed.config_options[0].current_value == "default"


async def test_planned_fix_with_question_and_approval_in_one_prompt(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await planning_session(client, conn, workspace)

        stop = await prompt(client, conn, "Fix the failing test", "0", "approve")
        assert stop == "end_turn"

        kinds = {u.title.split(" ")[0]: u.kind for u in client.of(ToolCallStart)}
        assert kinds["Glob"] == "search" and kinds["Read"] == "read"
        assert kinds["Run"] == "execute" and kinds["Edit"] == "edit"

        early_edit, late_edit = client.calls("Edit inventory/stock.py")
        assert early_edit.locations[0].path == str(workspace / "inventory" / "stock.py")
        [refused] = client.results(early_edit.tool_call_id)
        assert refused.status == "failed"
        shown = refused.content[0].content.text
        assert shown.startswith("Refused by the plan gate (PLAN_MODE_GATE): tool 'Edit'")
        # The hint comes from the result's field, under the message.
        assert "What to do: explore with read-only tools" in shown
        assert [u.status for u in client.results(late_edit.tool_call_id)] == ["completed"]

        (question, options, _), (approval, approval_options, asked_at) = client.permissions
        assert [o.name for o in options] == [*OPTIONS, "Answer in my own words"]
        assert [o.option_id for o in options] == ["0", "1", "in_words"]
        assert approval.kind == "switch_mode"
        assert approval.title == "Approve plan (revision 1)"
        assert approval.raw_input["revision"] == 1 and len(approval.raw_input["sha256"]) == 64
        assert approval.raw_input["plan"].startswith("# Fix over-reservation")
        assert [(o.name, o.kind) for o in approval_options] == [
            ("Approve, auto within scope", "allow_once"),
            ("Approve, ask for each edit", "allow_once"),
            ("Keep planning", "reject_once"),
            ("Reject with a note", "reject_once"),
        ]
        [answered] = client.results(question.tool_call_id)
        assert answered.status == "completed" and answered.raw_output["answer"] == OPTIONS[0]

        assert client.modes() == ["plan", "default"]
        [switched_at] = [
            i for i, u in enumerate(client.updates) if isinstance(u, CurrentModeUpdate)
        ][1:]
        assert switched_at > asked_at
        assert switched_at < client.updates.index(late_edit), "mode flips before the edit"
        [approved] = client.results(approval.tool_call_id)
        assert approved.status == "completed" and approved.raw_output["status"] == "approved"

        plans = client.of(AgentPlanUpdate)
        [approved_steps, *_] = client.of(AgentPlanUpdate, asked_at)
        assert {e.status for e in approved_steps.entries} == {"pending"}, "the approved steps"
        assert plans[0].entries[0].content.startswith("Change the guard")
        todos = [(e.content.split(" ")[0], e.status) for e in plans[-1].entries]
        assert todos == [("Change", "completed"), ("Run", "completed")]
        assert any(e.status == "in_progress" for p in plans for e in p.entries)
        assert "5 passed" in client.text()
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()


async def test_the_agent_asks_to_enter_plan_mode_and_the_editor_follows(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    # No --workspace: the agent works in the folder the editor opened the session in.
    async with editor(tmp_path, None, database_url) as (client, conn):
        await new_session(client, conn, workspace)
        stop = await prompt(client, conn, "Fix the failing test", "Enter Plan Mode", "0", "approve")
        assert stop == "end_turn"
        entry, options, asked_at = client.permissions[0]
        assert entry.kind == "switch_mode" and entry.title.startswith("Enter Plan Mode")
        assert [(o.name, o.kind) for o in options] == [
            ("Enter Plan Mode", "allow_once"),
            ("No", "reject_once"),
            ("No, with a note", "reject_once"),
        ]
        [entered] = client.results(entry.tool_call_id)
        assert entered.status == "completed" and entered.raw_output["status"] == "approved"
        # The agent's own entry is announced (the gate is on while it asks), then the approval.
        assert client.modes() == ["plan", "default"]
        assert client.updates.index(client.of(CurrentModeUpdate)[0]) < asked_at
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()


async def test_keep_planning_rejects_then_the_revised_plan_is_approved(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url, capabilities=FORMS) as (client, conn):
        await planning_session(client, conn, workspace)

        # Keep planning names no change (its note says only that), so the demo asks what
        # should change.
        change = "Also cover reserving exactly what is on hand"
        client.elicited_answers.append({"text": change})
        stop = await prompt(
            client,
            conn,
            "Fix the failing test",
            "0",
            "Keep planning",
            "Answer in my own words",
            "approve",
        )
        assert stop == "end_turn"

        first, asked, second = (p[0] for p in client.permissions[1:])
        assert first.title == "Approve plan (revision 1)"
        assert asked.title == "What should change in the plan before I submit it again?"
        assert second.title == "Approve plan (revision 2)"
        assert f"3. {change}\n" in second.raw_input["plan"], "the answer is a step of the plan"
        [kept] = client.results(first.tool_call_id)
        assert kept.raw_output["status"] == "rejected"
        # The reviewer's choice, as its standard note: a rejection is never empty.
        assert kept.raw_output["reviewer_note"] == "Keep planning"
        assert kept.raw_output["plan"]["status"] == "drafting"
        assert "kept planning" in kept.content[0].content.text.lower()
        assert client.modes() == ["plan", "default"]
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()


async def test_cancel_then_load_session_after_restart_advertises_the_mode_and_replays(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await planning_session(client, conn, workspace)
        # The user stops the turn while the approved plan's tests run.
        client.cancel_at = "Run python -m pytest"
        stop = await prompt(client, conn, "Fix the failing test", "0", "approve")
        assert stop == "cancelled"
        [tests] = client.calls("Run python -m pytest")
        [stopped] = client.results(tests.tool_call_id)
        assert stopped.status == "failed" and "Cancelled" in stopped.content[0].content.text
        assert client.modes() == ["plan", "default"]
        # A selection made between turns is durable: it survives the restart below.
        await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
        assert client.modes() == ["plan", "default", "plan"]
    session_id = client.session_id

    async with editor(tmp_path, workspace, database_url) as (client, conn):
        loaded = await conn.load_session(cwd=str(workspace), session_id=session_id, mcp_servers=[])
        assert loaded.modes.current_mode_id == "plan"
        [user] = client.of(UserMessageChunk)
        assert user.content.text == "Fix the failing test"
        assert "Plan Mode is on" in client.text() and "Implementing" in client.text()
        [refused, _] = client.calls("Edit")
        assert client.results(refused.tool_call_id)[0].status == "failed"
        # The call the cancel interrupted has no stored result; the replay says so.
        [tests] = client.calls("Run python -m pytest")
        [stopped] = client.results(tests.tool_call_id)
        assert stopped.status == "failed" and "interrupted" in stopped.content[0].content.text
        assert client.of(AgentPlanUpdate)[-1].entries[0].status == "in_progress"

        with pytest.raises(RequestError) as unknown:
            await conn.load_session(cwd=str(workspace), session_id="nope", mcp_servers=[])
        assert unknown.value.code == -32602
    assert FIXED in (workspace / "inventory" / "stock.py").read_text()


async def test_leaving_plan_mode_cancels_the_active_plan_as_a_user_exit(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await planning_session(client, conn, workspace)
        # Stopped at the approval prompt: the request stays pending, the gate stays on.
        assert await prompt(client, conn, "Fix the failing test", "0", CANCEL) == "cancelled"
        waiting = await open_session(workspace, database_url, client.session_id)
        assert [p.kind for p in await waiting.pending()] == ["exit"]
        before = len(client.updates)

        await conn.set_session_mode(session_id=client.session_id, mode_id="default")
        assert client.modes(before) == ["default"]
        assert client.of(AgentPlanUpdate, before)[-1].entries == []

    session = await open_session(workspace, database_url, client.session_id)
    record = await session.record()
    assert record.status is PlanStatus.CANCELLED and not record.pending
    exits = [
        e.event
        for e in await session.journal()
        if e.event.kind == "mode.selected" and e.event.actor == "user"
    ]
    assert exits[-1].to_state == session.runtime.options.agent_state_value
    assert "if quantity > on_hand + 1:" in (workspace / "inventory" / "stock.py").read_text()


async def test_a_model_failure_ends_the_turn_with_a_message(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url, "--model", "gemini-2.0-flash") as (
        client,
        conn,
    ):
        await new_session(client, conn, workspace)
        assert await prompt(client, conn, "Fix the failing test") == "end_turn"
        assert "The run failed" in client.text()
        # The connection survives: the session still answers.
        await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
        assert client.modes() == ["plan"]


# -- the pure mapping -----------------------------------------------------------------------


def request(kind: str, **payload: Any) -> PendingRequest:
    return PendingRequest(
        kind=kind,
        call_id="call-1",
        approval_id="approval-1",
        tool_name={"enter": "enter_plan_mode", "question": "ask_user_question"}[kind],
        payload=payload,
        question_id=1 if kind == "question" else None,
        created_at=0.0,
    )


def reply_of(content: Any) -> dict[str, Any]:
    response = content.parts[0].function_response
    assert response.id == "call-1"
    return dict(response.response)


def test_mapping_modes_kinds_and_bound_replies() -> None:
    assert mapping.mode_id(ModeState(active=True, pending=False, plan_status=None)) == "default"
    assert mapping.mode_id(ModeState(active=False, pending=True, plan_status=None)) == "plan"
    assert mapping.mode_id(ModeState(active=True, pending=None, plan_status=None)) == "plan"
    kinds = {
        name: mapping.tool_kind(name)
        for name in ("Read", "Glob", "lookup_values", "Edit", "run_sql_readonly", "spawn_subagent")
    }
    assert kinds == {
        "Read": "read",
        "Glob": "search",
        "lookup_values": "search",
        "Edit": "edit",
        "run_sql_readonly": "execute",
        "spawn_subagent": "other",
    }

    question = request("question", message="Anything else?")
    skip, words = requests.permission_options(question)
    assert (skip.name, skip.kind) == ("Skip", "reject_once")
    assert (words.name, words.option_id) == ("Answer in my own words", "in_words")
    selected = AllowedOutcome(outcome="selected", option_id="skip")
    assert reply_of(requests.reply_for(question, selected))["answer"] == "(no answer)"

    entry = request("enter", objective="Fix it")
    refused = requests.reply_for(entry, AllowedOutcome(outcome="selected", option_id="no"))
    assert reply_of(refused)["status"] == "rejected"
    assert requests.reply_for(entry, DeniedOutcome(outcome="cancelled")) is None
    with pytest.raises(ValueError, match="was not offered"):
        requests.reply_for(entry, AllowedOutcome(outcome="selected", option_id="approve"))


WAIT_FOR_RELEASE = "while [ ! -e release ]; do sleep 0.05; done; echo released"


async def test_fix_12_an_editor_and_a_server_never_run_one_thread_at_once(
    tmp_path: Path, workspace: Path, sqlite_database_url: str
) -> None:
    """``plangate acp`` takes the same per-thread lease as ``plangate serve``: a prompt
    while a server runs the session's thread is answered plainly and sends nothing, and
    while the editor's run goes on a server cannot take the thread."""
    database_url = sqlite_database_url
    model = script(
        tmp_path,
        "steps",
        [{"text": "first answer"}],
        [{"call": "Bash", "args": {"command": WAIT_FOR_RELEASE}}],
        [{"text": "released"}],
    )
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await new_session(client, conn, workspace)
        thread_key = f"plangate/user/{client.session_id}"
        store = await Store.open(database_url)
        try:
            server = RunLeases(store, holder="a server")
            held, _ = await server.acquire(thread_key, "server-run")
            start = len(client.updates)
            assert await prompt(client, conn, "hello") == "end_turn"
            assert "run in progress elsewhere" in client.text(start)
            assert "first answer" not in client.text(start)
            await server.release(held)
            assert await prompt(client, conn, "hello") == "end_turn"
            assert "first answer" in client.text(start)

            refused: list[BaseException] = []

            async def server_tries() -> None:
                try:
                    await server.acquire(thread_key, "server-run-2")
                except LeaseHeld as exc:
                    refused.append(exc)
                (workspace / "release").touch()  # the command waits for this

            client.during = ("Run while", server_tries)
            assert await prompt(client, conn, "wait a while") == "end_turn"
            assert client.during_task is not None
            await client.during_task
            assert len(refused) == 1
            again, _ = await server.acquire(thread_key, "server-run-3")  # free once done
            await server.release(again)
        finally:
            await store.close()


def test_a_prompt_spelling_an_unpaired_surrogate_keeps_it_as_a_replacement() -> None:
    """An editor's JSON can spell half a surrogate pair: the message is kept with U+FFFD
    in its place, as every store keeps such text (nothing downstream can encode it)."""
    from acp import text_block

    assert mapping.prompt_text([text_block("fix \ud800 this"), text_block("x\x00")]) == (
        "fix \ufffd this\nx\ufffd"
    )
