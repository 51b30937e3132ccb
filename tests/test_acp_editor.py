"""``plangate acp`` as capable as the terminal and the web, driven by the real ACP SDK
client over stdio: a guarded reader, slash commands, ``session/list``, free-text answers,
plan edits in a file, re-asked approvals, protocol refusals and MCP servers."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    EnvVariable,
    HttpMcpServer,
    McpServerStdio,
    ToolCallStart,
)

from acp_support import (
    CANCEL,
    DECLINE,
    FIXED,
    TESTS,
    editor,
    new_session,
    open_session,
    planning_session,
    prompt,
    sqlite_database_url,
)
from plangate.acp import mapping, markdown, requests
from plangate.acp.commands import Command, parse_command
from plangate.acp.listing import CWD_KEY, PAGE_SIZE, session_page
from plangate.acp.stdio import InvalidMessage, check_message
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.demo import QUESTION
from plangate.plan import PlanStatus
from plangate.plan.record import PendingRequest
from plangate.plan.scope import Scope, plan_sha256
from plangate.plan.scope_text import split_scope_block

database_url = sqlite_database_url


async def test_garbage_lines_get_json_rpc_errors_and_the_agent_keeps_serving(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        raw = client.process.stdin
        for line in (
            b"[1, 2]",
            b'"hello"',
            b"42",
            b"{not json",
            b"\xff\xfe",
            b'{"jsonrpc": "2.0", "id": 7, "method": 5}',
            b'{"jsonrpc": "2.0", "id": [1], "result": {}}',
            b'[{"jsonrpc": "2.0", "id": 8, "method": "session/new", "params": {}}]',
        ):
            raw.write(line + b"\n")
        await raw.drain()

        # The agent still serves: a new session and a real turn.
        await new_session(client, conn, workspace)
        assert await prompt(client, conn, "Fix the failing test", "No") == "end_turn"
        assert "Understood, no plan" in client.text()

        errors = [(m["id"], m["error"]["code"]) for m in client.incoming if "error" in m]
        assert errors == [
            (None, -32600),
            (None, -32600),
            (None, -32600),
            (None, -32700),
            (None, -32700),
            (7, -32600),
            (None, -32600),
        ], "one error per bad request, in order; a malformed response is dropped"
        messages = [m["error"]["message"] for m in client.incoming if "error" in m]
        assert "got a batch (array)" in messages[0] and "got str" in messages[1]
        assert messages[3].startswith("Parse error")


async def test_slash_commands_are_advertised_and_run_like_the_terminal(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await new_session(client, conn, workspace)
        advertised = await client.wait_for(AvailableCommandsUpdate)
        assert [c.name for c in advertised.available_commands] == ["plan", "status", "journal"]
        assert advertised.available_commands[0].input.root.hint == "off, done, or a message to plan"

        # Bare /plan selects Plan Mode and calls no model; /plan off withdraws it.
        assert await prompt(client, conn, "/plan") == "end_turn"
        assert client.text() == (
            "Entering plan mode (applies from the next step). Use /plan off to leave."
        )
        assert client.modes() == ["plan"]
        start = len(client.updates)
        assert await prompt(client, conn, "/plan off") == "end_turn"
        assert client.text(start) == "Plan mode entry cancelled."
        assert client.modes() == ["plan", "default"]
        assert not client.of(ToolCallStart), "no command reached the model"

        # /plan <message> selects, then sends the message: a planned turn.
        stop = await prompt(client, conn, "/plan Fix the failing test", "0", CANCEL)
        assert stop == "cancelled"
        assert client.modes() == ["plan", "default", "plan"]
        assert client.calls("Glob")
        assert client.permissions[-1][0].title == "Approve plan (revision 1)"

        start = len(client.updates)
        assert await prompt(client, conn, "/status") == "end_turn"
        status = client.text(start)
        assert f"- Session: `{client.session_id}`" in status
        assert "- Mode: plan\n" in status
        assert "- Plan: pending_approval · revision 1 · Fix the failing test" in status
        assert "- Waiting for you: approval of plan revision 1" in status
        assert "- Protocol: general-task@1" in status
        assert not client.permissions[2:], "a command does not ask the open request again"

        start = len(client.updates)
        assert await prompt(client, conn, "/journal") == "end_turn"
        table = client.text(start).splitlines()
        assert table[0] == "| # | Event | Actor | Change | Revision | Detail |"
        denied = [row for row in table if "| plan.gate.denied |" in row]
        assert len(denied) == 1 and "| Edit |" in denied[0]
        assert all(row.count(" | ") == 5 for row in table[2:]), "one row per entry, 6 cells"

        start = len(client.updates)
        assert await prompt(client, conn, "/plan off") == "end_turn"
        assert (
            client.text(start) == "Left plan mode: the plan was cancelled. Write tools run again."
        )
        assert client.modes() == ["plan", "default", "plan", "default"]


async def test_session_list_names_each_session_with_its_folder_title_and_time(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    other = copy_sample_workspace(tmp_path / "other")
    # No --workspace: each session works in the folder the editor opened it in.
    async with editor(tmp_path, None, database_url) as (client, conn):
        info = await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert info.agent_capabilities.session_capabilities.list is not None
        first = (await new_session(client, conn, workspace)).session_id
        assert await prompt(client, conn, "Fix the failing test\nand tell me", "No") == "end_turn"
        second = (await new_session(client, conn, other)).session_id

        listed = await conn.list_sessions()
        assert [(s.session_id, s.cwd, s.title) for s in listed.sessions] == [
            (second, str(other), None),
            (first, str(workspace), "Fix the failing test"),
        ], "newest first"
        assert listed.next_cursor is None
        newest, oldest = (datetime.fromisoformat(s.updated_at) for s in listed.sessions)
        assert newest >= oldest and newest.tzinfo is not None

        mine = await conn.list_sessions(cwd=str(workspace))
        assert [s.session_id for s in mine.sessions] == [first]
        assert (await conn.list_sessions(cwd=str(tmp_path))).sessions == []


async def test_own_words_and_an_edited_plan_file_are_the_bound_replies(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    forms = ClientCapabilities(
        elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
    )
    async with editor(tmp_path, workspace, database_url, capabilities=forms) as (client, conn):
        await planning_session(client, conn, workspace)
        answer = "Raise an error and log the refused quantity"
        # The question is answered in a form; the rejection note form is closed, so the
        # note comes as the next message.
        client.elicited_answers.extend([{"text": answer}, DECLINE])
        stop = await prompt(
            client, conn, "Fix the failing test", "Answer in my own words", "Reject with a note"
        )
        assert stop == "end_turn"
        (question, _, _), (first, _, _) = client.permissions
        (asked, form), _ = client.elicitations
        assert asked == QUESTION and form.tool_call_id == question.tool_call_id
        assert form.requested_schema.required == ["text"]
        [answered] = client.results(question.tool_call_id)
        assert answered.raw_output["answer"] == answer

        plan_file = Path(first.locations[0].path)
        assert plan_file == workspace / ".plangate" / f"plan-{client.session_id}.md"
        assert first.raw_input["plan_file"] == str(plan_file)
        # The file holds the plan under its scope, as an editable block.
        shown_scope = Scope.model_validate(first.raw_input["scope"])
        assert split_scope_block(
            plan_file.read_text(), content=first.raw_input["plan"], scope=shown_scope
        ) == (first.raw_input["plan"], shown_scope)
        assert f"The plan is also in {plan_file}" in first.content[-1].content.text
        assert client.text().endswith(
            "Type the note that rejects plan revision 1 as your next message: it is sent to "
            "this request, not as a new task. (/plan off leaves Plan Mode instead.)"
        )
        assert not client.results(first.tool_call_id), "still open"

        # The next message is the note; the revised plan is then edited in the file and
        # approved: the saved text is what gets approved.
        def edit_plan(tool_call: Any) -> None:
            path = Path(tool_call.locations[0].path)
            path.write_text(path.read_text() + "3. Note the fix in CHANGELOG.md\n")

        client.before_answer = edit_plan
        note = "Also cover reserving exactly what is on hand"
        assert await prompt(client, conn, note, "approve") == "end_turn"
        [rejected] = client.results(first.tool_call_id)
        assert rejected.raw_output["status"] == "rejected"
        assert rejected.raw_output["reviewer_note"] == note
        _, (second, _, _) = client.permissions[1:]
        assert second.title == "Approve plan (revision 2)" and note in second.raw_input["plan"]
        [approved] = client.results(second.tool_call_id)
        assert approved.raw_output["status"] == "approved"
        assert "revision 3) with the reviewer's edits" in approved.raw_output["message"]
        assert not plan_file.exists(), "the file goes once the plan is answered"
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()

    session = await open_session(workspace, database_url, client.session_id)
    record = await session.record()
    assert record.status is PlanStatus.APPROVED and record.content_revisions == 3
    assert record.content.endswith("3. Note the fix in CHANGELOG.md\n")
    # The hash covers the approved text and the scope the demo's plan names.
    assert record.scope is not None
    assert record.sha256 == plan_sha256(record.content, record.scope)
    decision = record.approvals[-1]
    assert decision.decision == "approved"
    assert (decision.revision, decision.sha256) == (3, record.sha256)


async def test_an_open_approval_is_asked_again_after_a_cancel_and_after_load(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await planning_session(client, conn, workspace)
        assert await prompt(client, conn, "Fix the failing test", "0", CANCEL) == "cancelled"
        [(approval, _, _)] = client.permissions[1:]
        plan_file = Path(approval.locations[0].path)
        plan_file.write_text(plan_file.read_text() + "3. An edit saved before the cancel\n")

        # After the cancel, the next prompt asks the same request again before any model
        # call (cancelled again here: the prompt is over, its message never sent).
        start = len(client.updates)
        assert await prompt(client, conn, "continue", CANCEL) == "cancelled"
        assert plan_file.read_text().endswith("3. An edit saved before the cancel\n")
        [(again, _, _)] = client.permissions[2:]
        assert again.tool_call_id == approval.tool_call_id and again.title == approval.title
        assert not client.of(AgentMessageChunk, start)
        [card] = client.of(ToolCallStart, start)
        assert card.tool_call_id == approval.tool_call_id, "the request is shown again"

        # The editor reopens the session (a restart is covered in test_acp.py): the
        # replay says the request is open, and the next prompt asks it first.
        loaded_at = len(client.updates)
        await conn.load_session(cwd=str(workspace), session_id=client.session_id, mcp_servers=[])
        await client.wait_for(AvailableCommandsUpdate, loaded_at)
        assert client.text(loaded_at).endswith(
            "The approval of plan revision 1 is still open: it is asked again when you send "
            "your next message."
        )
        start = len(client.updates)
        assert await prompt(client, conn, "Go ahead", "approve") == "end_turn"
        [(again, _, asked_at)] = client.permissions[3:]
        assert again.tool_call_id == approval.tool_call_id
        before_asking = client.updates[start:asked_at]
        assert [type(u).__name__ for u in before_asking] == ["ToolCallStart"], "no model call"
        [approved] = client.results(approval.tool_call_id)
        assert approved.raw_output["status"] == "approved"
        # The message follows the resumed run. The step saved in the plan file is not one
        # the demo can do: it says so rather than ticking it, and the plan stays open.
        text = client.text(asked_at)
        assert "Approved. Implementing." in text
        assert "Not done: “An edit saved before the cancel”" in text
        assert "The approved plan is still open" in text
        assert not plan_file.exists()
        assert FIXED in (workspace / "inventory" / "stock.py").read_text()
    record = await (await open_session(workspace, database_url, client.session_id)).record()
    assert record.content.endswith("3. An edit saved before the cancel\n"), "kept across load"


async def test_a_run_failed_by_protocol_governance_ends_as_a_refusal(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    async with editor(tmp_path, workspace, database_url) as (client, conn):
        await new_session(client, conn, workspace)
        assert await prompt(client, conn, "revenue by region last quarter") == "refusal"
        said = client.text()
        assert "\n\nProtocol governance stopped this run under general-task@1 — " in said
        assert "DATA_ACTIONS_REJECTED_BY_PROTOCOL: 1 data tool call(s) (list_data_sources)" in said
        assert said.endswith("Or rephrase the request.") and "Type “try again”" in said

        start = len(client.updates)
        assert await prompt(client, conn, "try again") == "end_turn"
        assert "DATA_ACTIONS_REJECTED_BY_PROTOCOL" not in client.text(start)
        [query] = client.calls("run_sql_readonly", start)
        assert "Completed revenue by region" in client.text(start)
        # The query result is shown as a Markdown table, numbers aligned right.
        [result] = client.results(query.tool_call_id)
        shown = result.content[0].content.text.splitlines()
        rows = result.raw_output["rows"]
        assert shown[0] == f"{len(rows)} rows"
        assert shown[2:4] == ["| region | revenue |", "|---|---:|"]
        assert shown[4] == f"| {rows[0]['region']} | {rows[0]['revenue']} |"
        assert len(shown) == 4 + len(rows)


async def test_stdio_mcp_servers_are_session_tools_under_the_plan_gate(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    server = McpServerStdio(
        name="notes",
        command=sys.executable,
        args=[str(TESTS / "acp_echo_server.py")],
        env=[EnvVariable(name="ECHO_TEST", value="1")],
    )
    web = HttpMcpServer(type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[])
    async with editor(tmp_path, workspace, database_url, module="acp_echo_agent") as (
        client,
        conn,
    ):
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(workspace), mcp_servers=[server, web])
        assert refused.value.code == -32602
        assert "MCP server 'web' uses the http transport" in str(refused.value)
        broken = McpServerStdio(name="broken", command=str(tmp_path / "missing"), args=[], env=[])
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(workspace), mcp_servers=[server, broken])
        assert refused.value.code == -32602
        assert "MCP server 'broken' did not start" in str(refused.value)

        await new_session(client, conn, workspace, mcp_servers=[server])
        # No plan: the server's tool runs.
        assert await prompt(client, conn, "echo hello") == "end_turn"
        [call] = client.calls("notes_echo")
        assert call.kind == "other" and call.raw_input == {"text": "hello"}
        [ran] = client.results(call.tool_call_id)
        assert ran.status == "completed" and "echo: hello" in client.text()

        # Planning: an MCP tool declares no effect, so the gate's default deny refuses it.
        await conn.set_session_mode(session_id=client.session_id, mode_id="plan")
        start = len(client.updates)
        assert await prompt(client, conn, "echo again") == "end_turn"
        [call] = client.calls("notes_echo", start)
        [refused_call] = client.results(call.tool_call_id)
        assert refused_call.status == "failed"
        assert "Refused by the plan gate (PLAN_MODE_GATE)" in refused_call.content[0].content.text
        assert "echo: again" not in client.text(start)

        # Another session does not get this session's server.
        await new_session(client, conn, workspace)
        start = len(client.updates)
        assert await prompt(client, conn, "echo nobody") == "end_turn"
        assert client.text(start) == "[echo] there is no echo tool"


# -- the pure pieces ------------------------------------------------------------------------


def test_check_message_answers_what_the_dispatcher_cannot_take() -> None:
    request = b'{"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}}'
    assert check_message(request) == json.loads(request)
    assert check_message(b'{"jsonrpc": "2.0", "id": "a", "result": null}') is not None
    assert check_message(b'{"jsonrpc": "2.0", "id": {"x": 1}, "error": {}}') is None
    assert check_message(b'{"jsonrpc": "2.0"}') is None
    cases = {
        b"[]": (-32600, None),
        b"null": (-32600, None),
        b"true": (-32600, None),
        b"{": (-32700, None),
        b'{"id": true, "method": "x"}': (-32600, None),
        b'{"id": 3, "method": "x", "params": 5}': (-32600, 3),
    }
    for line, (code, request_id) in cases.items():
        with pytest.raises(InvalidMessage) as invalid:
            check_message(line)
        response = invalid.value.response()
        assert (response["error"]["code"], response["id"]) == (code, request_id), line


def test_commands_are_recognised_only_by_their_exact_names() -> None:
    assert parse_command("/plan") == Command("plan", "")
    assert parse_command("/plan   off ") == Command("plan", "off")
    assert parse_command("/plan fix it\nthen test") == Command("plan", "fix it\nthen test")
    assert parse_command("/status") == Command("status", "")
    for text in ("/planning", "/usr/bin is empty", "plan", " /plan", "/help"):
        assert parse_command(text) is None, text


def test_session_pages_filter_by_folder_and_page_by_offset() -> None:
    sessions = [
        SimpleNamespace(id=f"s{i}", state={CWD_KEY: "/a" if i % 2 else "/b"}, last_update_time=i)
        for i in range(PAGE_SIZE * 2 + 4)
    ] + [SimpleNamespace(id="web", state={}, last_update_time=0.5)]
    first = session_page(sessions, cwd="/a", cursor=None, default_cwd=None)
    assert [s.session_id for s in first.sessions][:2] == ["s103", "s101"]
    assert len(first.sessions) == PAGE_SIZE and first.next_cursor == str(PAGE_SIZE)
    rest = session_page(sessions, cwd="/a", cursor=first.next_cursor, default_cwd=None)
    assert len(rest.sessions) == 2 and rest.next_cursor is None
    fixed = session_page(sessions, cwd="/w", cursor=None, default_cwd="/w")
    assert [s.session_id for s in fixed.sessions] == ["web"], "a session opened elsewhere"
    with pytest.raises(RequestError):
        session_page(sessions, cwd=None, cursor="next", default_cwd=None)


def test_data_results_are_markdown_tables_no_value_can_break() -> None:
    rows = [{"name": "a|b\nc", "n": 1}, {"name": None, "n": 2.5}, {"name": "x\\", "n": None}]
    shown = (
        mapping.resolution_update(
            "c1", "run_sql_readonly", {"columns": ["name", "n"], "rows": rows, "truncated": True}
        )
        .content[0]
        .content.text
    )
    assert shown.splitlines() == [
        "3 rows (truncated: the result has more)",
        "",
        "| name | n |",
        "|---|---:|",
        "| a\\|b c | 1 |",
        "| NULL | 2.5 |",
        "| x\\\\ | NULL |",
    ]
    many = [{"v": i} for i in range(markdown.DATA_ROWS + 3)]
    preview = (
        mapping.resolution_update(
            "c2", "preview_table", {"table": "t", "total_rows": 900, "columns": ["v"], "rows": many}
        )
        .content[0]
        .content.text
    )
    assert preview.startswith(f"t: first {len(many)} of 900 rows\n\n| v |\n|---:|\n| 0 |")
    assert preview.endswith("\n\n… and 3 more rows.")
    values = (
        mapping.resolution_update(
            "c3",
            "lookup_values",
            {"column": "status", "distinct_count": 2, "values": [{"value": "done", "count": 7}]},
        )
        .content[0]
        .content.text
    )
    assert values == "2 distinct values of status\n\n| value | count |\n|---|---:|\n| done | 7 |"


def test_protocol_refusal_speaks_only_of_this_turns_failure() -> None:
    failed = {
        "run_id": "r1",
        "run_status": "failed",
        "protocol": "general-task",
        "version": 1,
        "run_outcome_code": "DATA_ACTIONS_REJECTED_BY_PROTOCOL",
        "run_outcome_message": "DATA_ACTIONS_REJECTED_BY_PROTOCOL: list_data_sources",
    }
    said = mapping.protocol_refusal({"run_id": "r0", "run_status": "completed"}, failed)
    assert said is not None and said.startswith(
        "Protocol governance stopped this run under general-task@1 — "
        "DATA_ACTIONS_REJECTED_BY_PROTOCOL: list_data_sources."
    )
    assert mapping.protocol_refusal(failed, failed) is None, "already failed before the turn"
    assert mapping.protocol_refusal(None, {**failed, "run_status": "completed"}) is None
    assert mapping.protocol_refusal(None, None) is None


def test_own_words_replies_are_bound_to_the_request_that_was_shown() -> None:
    def pending(kind: str, **fields: Any) -> PendingRequest:
        return PendingRequest(
            kind=kind, call_id="call-7", approval_id="approval-7", created_at=0.0, **fields
        )

    approval = pending("exit", tool_name="exit_plan_mode", payload={}, revision=2, sha256="f" * 64)
    response = requests.reply_with_words(approval, "Cover the edge case", "# Edited\n")
    [part] = response.parts
    assert part.function_response.id == "call-7"
    assert part.function_response.response == {
        "status": "rejected",
        "approval_id": "approval-7",
        "revision": 2,
        "sha256": "f" * 64,
        "reviewer_note": "Cover the edge case",
        "content": "# Edited\n",
    }
    question = pending(
        "question", tool_name="ask_user_question", payload={"message": "Which?"}, question_id=3
    )
    answered = requests.reply_with_words(question, "Neither").parts[0].function_response.response
    assert answered == {"status": "answered", "question_id": 3, "answer": "Neither"}
    entry = pending("enter", tool_name="enter_plan_mode", payload={})
    declined = requests.reply_with_words(entry, "Just do it").parts[0].function_response.response
    assert (declined["status"], declined["reviewer_note"]) == ("rejected", "Just do it")
    with pytest.raises(ValueError, match="was not offered"):
        requests.reply_for(approval, AllowedOutcome(outcome="selected", option_id="in_words"))
    assert "your answer to “Which?”" in requests.next_message_notice(question)
    assert requests.reask_notice([question, approval]) == (
        "2 requests are still open (the question “Which?”; the approval of plan revision 2): "
        "they are asked again, in turn, when you send your next message."
    )
