"""The approved plan as a capability in the editor (issue #14): the real ACP SDK client
over stdio, ``plangate acp`` with a scripted model that drifts from its plan.

The approval's permission request carries the scope and offers the graded choice (auto
within scope / ask for each edit / reject); an amendment and each reviewed edit go out as
``session/request_permission`` with ACP's ``diff`` content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp.schema import FileEditToolCallContent, ToolCallStart, ToolCallUpdate

from acp_support import editor, open_session, planning_session, prompt, script, sqlite_database_url
from plangate.plan import PlanStatus

database_url = sqlite_database_url

STOCK = "inventory/stock.py"
PLAN = [
    [
        {
            "call": "update_plan_content",
            "args": {
                "content": "1. Fix the rounding in inventory/stock.py\n",
                "scope": {"write": [STOCK], "commands": ["python -m pytest"]},
            },
        }
    ],
    [{"call": "exit_plan_mode", "args": {"summary": "fix the rounding"}}],
]


def write(path: str, content: str) -> list[dict[str, Any]]:
    return [{"call": "Write", "args": {"path": path, "content": content}}]


def texts(request: ToolCallUpdate) -> str:
    return "\n".join(c.content.text for c in request.content or [] if c.type == "content")


def diffs(request: ToolCallUpdate) -> list[FileEditToolCallContent]:
    return [c for c in request.content or [] if isinstance(c, FileEditToolCallContent)]


async def test_fix_14_the_approval_shows_the_scope_and_an_amendment_carries_the_diff(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    model = script(
        tmp_path,
        "drift",
        *PLAN,
        write(STOCK, "# fixed\n"),
        write(".github/ci.yml", "on: push\n"),
        write("README.md", "gone\n"),
        [{"echo": "after: "}],
    )
    readme = (workspace / "README.md").read_text()
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await planning_session(client, conn, workspace)
        stop = await prompt(client, conn, "fix the rounding", "approve", "Allow", "Refuse")
        assert stop == "end_turn"
        (approval, options, _), (amend, amend_options, _), (refused, _, _) = client.permissions
        # The graded choice at approval, with the scope in the request.
        assert [(o.option_id, o.name) for o in options] == [
            ("approve", "Approve, auto within scope"),
            ("approve_ask_each_edit", "Approve, ask for each edit"),
            ("keep_planning", "Keep planning"),
            ("in_words", "Reject with a note"),
        ]
        assert approval.raw_input["scope"]["write"] == [STOCK]
        shown = texts(approval)
        assert "Scope: This plan may write `inventory/stock.py`; run `python -m pytest`" in shown
        assert "- write `inventory/stock.py`\n- run `python -m pytest`\n- network: no" in shown
        # The drift: exactly what it wants outside the scope, and the file change as a diff.
        assert amend.title.startswith("Amend the plan's scope?")
        assert "Outside the approved scope:\n- write `.github/ci.yml`\n\n" in texts(amend)
        assert "- network" not in texts(amend)  # listed only when asked for
        assert [(o.option_id, o.kind) for o in amend_options][:2] == [
            ("approve", "allow_once"),
            ("refuse", "reject_once"),
        ]
        (diff,) = diffs(amend)
        assert diff.path == str(workspace / ".github" / "ci.yml")
        assert (diff.old_text, diff.new_text) == (None, "on: push\n")
        assert amend.kind == "edit" and amend.locations[0].path == diff.path
        (readme_diff,) = diffs(refused)
        assert (readme_diff.old_text, readme_diff.new_text) == (readme, "gone\n")
        assert "SCOPE_AMENDMENT_REFUSED" in client.text()
        # The paused Write is shown once, as the request, then finishes once.
        assert not [u for u in client.of(ToolCallStart) if "confirmation" in u.title]
        assert [u.status for u in client.results(amend.tool_call_id)] == ["completed"]
        assert [u.status for u in client.results(refused.tool_call_id)][-1] == "failed"
    assert (workspace / STOCK).read_text() == "# fixed\n"
    assert (workspace / ".github" / "ci.yml").read_text() == "on: push\n"
    assert (workspace / "README.md").read_text() == readme
    record = await (await open_session(workspace, database_url, client.session_id)).record()
    assert record is not None and record.scope is not None
    assert record.scope.write == (STOCK, ".github/ci.yml") and record.pending == []


async def test_fix_14_ask_for_each_edit_asks_with_the_diff(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    original = (workspace / STOCK).read_text()
    model = script(
        tmp_path,
        "each-edit",
        *PLAN,
        write(STOCK, "# one\n"),
        write(STOCK, "# two\n"),
        [{"echo": "after: "}],
    )
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await planning_session(client, conn, workspace)
        stop = await prompt(
            client, conn, "fix the rounding", "approve_ask_each_edit", "approve", "refuse"
        )
        assert stop == "end_turn"
        (_, first, second) = (p[0] for p in client.permissions)
        assert first.title.startswith("Review this edit?")
        (diff,) = diffs(first)
        assert (diff.old_text, diff.new_text) == (original, "# one\n")
        (diff,) = diffs(second)
        assert (diff.old_text, diff.new_text) == ("# one\n", "# two\n")
        assert "EDIT_REFUSED" in client.text()
    assert (workspace / STOCK).read_text() == "# one\n"
    record = await (await open_session(workspace, database_url, client.session_id)).record()
    assert record is not None and record.status is PlanStatus.APPROVED
    assert record.permission == "ask_each_edit"


async def test_fix_14_the_scope_is_edited_in_the_plan_file(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    """The plan file holds the scope above the plan (TOML between +++ lines); what the
    user saves there before approving is the scope the approval grants."""
    model = script(tmp_path, "scope-file", *PLAN, write("CHANGELOG.md", "- fixed\n"))
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await planning_session(client, conn, workspace)

        def widen(tool_call: Any) -> None:
            path = Path(tool_call.locations[0].path)
            text = path.read_text()
            assert text.startswith("+++\n") and f'write = ["{STOCK}"]' in text
            path.write_text(
                text.replace(f'write = ["{STOCK}"]', f'write = ["{STOCK}", "CHANGELOG.md"]')
            )

        client.before_answer = widen
        assert await prompt(client, conn, "fix the rounding", "approve") == "end_turn"
        assert len(client.permissions) == 1, "the widened scope covers the write: no amendment"
    assert (workspace / "CHANGELOG.md").read_text() == "- fixed\n"
    record = await (await open_session(workspace, database_url, client.session_id)).record()
    assert record is not None and record.scope is not None
    assert record.scope.write == (STOCK, "CHANGELOG.md")
    assert record.content == "1. Fix the rounding in inventory/stock.py\n"
