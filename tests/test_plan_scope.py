"""The approved plan as a capability (issue #14, invariant 9).

Through the real ADK Runner, the real workspace tools and a scripted model: a plan names
its scope; after approval a call outside it pauses for an amendment bound to the call
and the revision; approving widens the scope and runs the call, refusing leaves the file
untouched; in the sandbox only the scoped paths are writable; ``ask_each_edit`` pauses
every write with its diff; the journal shows the scope and who approved each amendment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Harness, tool_results
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan.record import PlanStatus, content_sha256
from plangate.plan.replies import ReplyError
from plangate.plan.scope import Scope

PLAN = "1. Fix the stock rounding in inventory/stock.py\n2. Add a test\n"
SCOPE = {
    "write": ["inventory/stock.py", "tests/test_stock.py"],
    "commands": ["python -m pytest"],
}


async def _planned(
    tmp_path: Path, scope: Any = SCOPE
) -> tuple[Harness, ScriptedLlm, PlanSession, Path]:
    """A coding agent whose plan (with ``scope``) waits for approval."""
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content=PLAN, scope=scope)],
        [call("exit_plan_mode", summary="ready")],
    )
    await harness.send("fix the rounding")
    session = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    return harness, model, session, workspace


async def _approve(harness: Harness, session: PlanSession, **choices: Any) -> list[Any]:
    (request,) = await session.pending()
    assert request.kind == "exit"
    return await harness.send(PlanSession.approve(request, **choices))


async def _decide(harness: Harness, session: PlanSession, approve: bool, **extra: Any) -> list[Any]:
    (request,) = await session.pending()
    reply = (
        PlanSession.approve(request, **extra)
        if approve
        else PlanSession.reject(request, note="not part of this task")
    )
    waiting = await session.submit(reply)
    assert waiting.ready and waiting.message is not None
    return await harness.send(waiting.message)


async def test_a_bad_scope_is_a_clear_error_and_changes_nothing(tmp_path: Path) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    bad = [
        {"write": ["../outside.txt"]},
        {"write": ["/etc/passwd"]},
        {"write": "src", "network": "yes"},
        {"writes": ["a.py"]},
        ["not", "an", "object"],
    ]
    model.add(
        [call("update_plan_content", content=PLAN)],
        *[[call("update_plan_content", content="more", scope=s)] for s in bad],
        [text("done")],
    )
    results = tool_results(await harness.send("plan"), "update_plan_content")
    for result in results[1:]:
        assert result["error"].startswith("INVALID_ARGS: "), result
    assert "leaves the workspace" in results[1]["error"]
    assert "unknown field" in results[4]["error"]
    record = await harness.record()
    assert record is not None and record.content == PLAN and record.scope is None
    assert record.content_revisions == 1


async def test_the_scope_is_shown_hashed_and_editable_at_approval(tmp_path: Path) -> None:
    harness, model, session, _ = await _planned(tmp_path)
    (request,) = await session.pending()
    assert request.payload["scope_summary"] == (
        "This plan may write `inventory/stock.py`, `tests/test_stock.py`; "
        "run `python -m pytest`; no network."
    )
    record = await session.record()
    assert record is not None and record.scope == Scope(**SCOPE)
    # The hash covers the scope: the same content with another scope is another plan.
    assert request.sha256 == record.sha256 != content_sha256(PLAN)
    # A malformed edited scope is refused with a reason and nothing changes.
    with pytest.raises(ReplyError, match="leaves the workspace"):
        await session.submit(PlanSession.approve(request, scope={"write": ["../x"]}))
    with pytest.raises(ReplyError, match="permission"):
        await session.submit(PlanSession.approve(request, permission="yolo"))  # type: ignore[arg-type]
    assert [p.call_id for p in await session.pending()] == [request.call_id]
    # The reviewer narrows the scope as they approve.
    model.add([text("ok")])
    await _approve(harness, session, scope={"write": ["inventory/stock.py"]})
    record = await session.record()
    assert record is not None and record.status is PlanStatus.APPROVED
    assert record.scope == Scope(write=["inventory/stock.py"])
    assert record.revisions[-1].author == "reviewer"
    assert record.revisions[-1].scope == record.scope


async def test_a_write_outside_the_scope_waits_for_an_amendment(tmp_path: Path) -> None:
    harness, model, session, workspace = await _planned(tmp_path)
    ci = ".github/workflows/ci.yml"
    model.add(
        [call("Write", path="inventory/stock.py", content="# fixed\n")],
        [call("Write", path=ci, content="on: push\n")],
    )
    events = await _approve(harness, session)
    assert tool_results(events, "Write")[0]["bytes_written"] == 8  # in scope: ran
    (request,) = await session.pending()
    assert request.kind == "amendment" and request.tool_name == "Write"
    assert request.payload["message"].startswith(f"The agent also wants to write `{ci}`")
    record = await session.record()
    assert record is not None
    assert (request.revision, request.sha256) == (record.content_revisions, record.sha256)
    assert not (workspace / ci).exists()
    # Approving records a revision with the widened scope, and the call runs.
    model.add([text("done")])
    events = await _decide(harness, session, approve=True)
    assert (workspace / ci).read_text() == "on: push\n"
    assert tool_results(events, "Write")[-1]["bytes_written"] == 9
    after = await session.record()
    assert after is not None and after.scope is not None
    assert ci in after.scope.write and after.content_revisions == record.content_revisions + 1
    assert await session.pending() == []
    # The journal shows the scope, the amendment and who approved it.
    journal = [e.event for e in await session.journal()]
    approved = next(e for e in journal if e.detail.get("permission") == "auto")
    assert "inventory/stock.py" in approved.detail["scope"]
    asked = next(e for e in journal if e.kind == "plan.amendment.requested")
    assert asked.detail["wants"] == f"write `{ci}`" and asked.actor == "model"
    decided = next(e for e in journal if e.kind == "plan.amendment")
    assert decided.actor == "user" and ci in decided.detail["scope"]
    assert [a.actor for a in after.approvals if a.kind == "amendment"] == ["user"]


async def test_an_amendment_approved_with_a_grant_that_does_not_cover_the_call_does_not_run_it(
    tmp_path: Path,
) -> None:
    """The reviewer approves the amendment but sends back a scope without the file asked
    for: the scope is what they sent, and the call is refused, not run."""
    harness, model, session, workspace = await _planned(tmp_path)
    model.add([call("Write", path="CHANGELOG.md", content="- drift\n")], [text("told")])
    await _approve(harness, session)
    narrower = {"write": ["inventory/stock.py", "docs/"], "commands": ["python -m pytest"]}
    events = await _decide(harness, session, approve=True, scope=narrower)
    (result,) = [r for r in tool_results(events, "Write") if "code" in r]
    assert result["code"] == "OUTSIDE_SCOPE" and "write `CHANGELOG.md`" in result["message"]
    assert not (workspace / "CHANGELOG.md").exists()
    after = await session.record()
    assert after is not None and after.scope == Scope.model_validate(narrower)
    assert await session.pending() == []


async def test_an_amendment_cut_off_by_a_stop_and_answered_elsewhere_resumes_the_run(
    tmp_path: Path,
) -> None:
    """The editor cancels while the amendment is asked (the run is stopped there); the
    request stays open, and its answer from another surface resumes the run with it."""
    harness, model, session, workspace = await _planned(tmp_path)
    ci = ".github/workflows/ci.yml"
    model.add([call("Write", path=ci, content="on: push\n")])
    await _approve(harness, session)
    await session.note_stopped(surface="acp")  # what a cancel in the editor does
    (request,) = await session.pending()
    assert request.kind == "amendment"

    elsewhere = PlanSession(harness.runner, user_id="user", session_id=harness.session_id)
    waiting = await elsewhere.submit(PlanSession.approve(request))
    assert waiting.open == [] and waiting.ready and waiting.message is not None
    model.add([text("done")])
    events = await harness.send(waiting.message)
    assert (workspace / ci).read_text() == "on: push\n"
    assert tool_results(events, "Write")[-1]["bytes_written"] == 9
    # The model saw the call's real result, not the pause.
    seen = [
        part.function_response.response
        for part in model.requests[-1].contents[-1].parts or []
        if part.function_response is not None
    ]
    assert seen and all("pending" not in str(r.get("status", "")) for r in seen)


async def test_a_refused_amendment_leaves_the_file_untouched(tmp_path: Path) -> None:
    harness, model, session, workspace = await _planned(tmp_path)
    before = (workspace / "README.md").read_text()
    model.add([call("Edit", path="README.md", old_string="#", new_string="##")])
    await _approve(harness, session)
    (request,) = await session.pending()
    assert request.kind == "amendment"
    model.add([text("understood")])
    events = await _decide(harness, session, approve=False)
    (result,) = tool_results(events, "Edit")[-1:]
    assert result["error"].startswith("SCOPE_AMENDMENT_REFUSED: ")
    assert "not part of this task" in result["error"]
    assert (workspace / "README.md").read_text() == before
    record = await session.record()
    assert record is not None and record.scope == Scope(**SCOPE)
    # The model saw the refusal as the call's result.
    (seen,) = model.requests[-1].contents[-1].parts or []
    assert seen.function_response is not None and seen.function_response.response
    assert seen.function_response.response["code"] == "SCOPE_AMENDMENT_REFUSED"


async def test_a_command_outside_the_prefixes_waits(tmp_path: Path) -> None:
    harness, model, session, workspace = await _planned(tmp_path)
    model.add([call("Bash", command="python -m pytest -q && touch made.txt")])
    await _approve(harness, session)
    (request,) = await session.pending()
    assert request.payload["wants"]["commands"] == ["touch made.txt"]
    assert not (workspace / "made.txt").exists()


async def test_read_only_commands_need_no_scope_entry(tmp_path: Path) -> None:
    """What ran while planning without asking (proven read-only) runs after approval
    without an amendment; only the part with side effects is asked for."""
    harness, model, session, workspace = await _planned(tmp_path)
    model.add(
        [call("Bash", command="ls inventory && git status --short | head -5")],
        [call("Bash", command="cat README.md && touch made.txt")],
    )
    events = await _approve(harness, session)
    listed, paused = tool_results(events, "Bash")
    assert "error" not in listed, listed
    assert "stock.py" in str(listed)
    assert paused["status"] == "pending_amendment", paused
    (request,) = await session.pending()
    assert request.payload["wants"]["commands"] == ["touch made.txt"]
    assert not (workspace / "made.txt").exists()


async def test_network_needs_an_amendment_when_the_scope_has_none(tmp_path: Path) -> None:
    harness, model, session, _ = await _planned(tmp_path)
    model.add([call("Bash", command="curl -s https://example.com")])
    await _approve(harness, session)
    (request,) = await session.pending()
    assert request.payload["wants"]["network"] is True
    assert "use the network" in request.payload["message"]


async def test_an_in_scope_command_cannot_write_outside_the_scope(
    tmp_path: Path, sandbox: None
) -> None:
    scope = {"write": ["inventory/stock.py", "tests/new/"], "commands": ["python -c"]}
    harness, model, session, workspace = await _planned(tmp_path, scope)
    (workspace / "tests" / "new").mkdir()
    model.add(
        [call("Bash", command="python -c \"open('other.txt','w')\"")],
        [call("Bash", command="python -c \"open('inventory/stock.py','a').write('#')\"")],
        [call("Bash", command="python -c \"open('tests/new/t.py','w').write('x')\"")],
        [text("done")],
    )
    results = tool_results(await _approve(harness, session), "Bash")
    assert results[0]["exit_code"] != 0 and "Read-only file system" in results[0]["stderr"]
    assert not (workspace / "other.txt").exists()
    assert results[1]["exit_code"] == 0, results[1]
    assert (workspace / "inventory" / "stock.py").read_text().endswith("#")
    assert results[2]["exit_code"] == 0 and (workspace / "tests/new/t.py").read_text() == "x"
    assert await session.pending() == []


async def test_new_files_new_folders_and_globs_bind_exactly_what_they_name(
    tmp_path: Path, sandbox: None
) -> None:
    """A new top-level file, a folder that does not exist yet and a top-level glob make
    exactly that writable for commands, never the workspace around them; what was made
    for a bind and never written leaves no trace."""
    scope = {
        "write": ["NOTES.md", "docs/new/", "*.txt", "never.txt"],
        "commands": ["python -c"],
    }
    harness, model, session, workspace = await _planned(tmp_path, scope)
    (workspace / "old.txt").write_text("old\n")
    tries = {
        "NOTES.md": "notes",
        "docs/new/a.md": "a",
        "old.txt": "txt",
        "README.md": "owned",  # beside the new top-level file
        "docs/other.md": "owned",  # beside the new folder
        "fresh.txt": "owned",  # a new file a glob matches: name it in the scope
    }
    model.add(
        *[
            [call("Bash", command=f"python -c \"open('{path}','w').write('{text_}')\"")]
            for path, text_ in tries.items()
        ],
        [text("done")],
    )
    readme = (workspace / "README.md").read_text()
    results = tool_results(await _approve(harness, session), "Bash")
    codes = dict(zip(tries, (r["exit_code"] for r in results), strict=True))
    assert codes == {
        "NOTES.md": 0,
        "docs/new/a.md": 0,
        "old.txt": 0,
        "README.md": 1,
        "docs/other.md": 1,
        "fresh.txt": 1,
    }, results
    assert (workspace / "NOTES.md").read_text() == "notes"
    assert (workspace / "docs" / "new" / "a.md").read_text() == "a"
    assert (workspace / "old.txt").read_text() == "txt"
    assert (workspace / "README.md").read_text() == readme
    assert not (workspace / "docs" / "other.md").exists()
    assert not (workspace / "fresh.txt").exists()
    assert not (workspace / "never.txt").exists()  # made for a bind, never written


async def test_ask_each_edit_pauses_every_write_with_its_diff(tmp_path: Path) -> None:
    harness, model, session, workspace = await _planned(tmp_path)
    original = (workspace / "inventory" / "stock.py").read_text()
    first_line = original.splitlines()[0]
    model.add([call("Edit", path="inventory/stock.py", old_string=first_line, new_string="# new")])
    await _approve(harness, session, permission="ask_each_edit")
    (request,) = await session.pending()
    assert request.kind == "edit"
    assert f"-{first_line}" in request.payload["diff"] and "+# new" in request.payload["diff"]
    assert (workspace / "inventory" / "stock.py").read_text() == original
    model.add(
        [call("Write", path="tests/test_stock.py", content="x = 1\n")],
    )
    await _decide(harness, session, approve=True)
    assert (workspace / "inventory" / "stock.py").read_text().startswith("# new")
    (second,) = await session.pending()
    assert second.kind == "edit" and "+x = 1" in second.payload["diff"]
    model.add([text("done")])
    events = await _decide(harness, session, approve=False)
    assert tool_results(events, "Write")[-1]["error"].startswith("EDIT_REFUSED: ")
    assert (workspace / "tests" / "test_stock.py").read_text() != "x = 1\n"


async def test_ask_each_edit_pauses_a_command_that_may_write_and_not_a_read(
    tmp_path: Path,
) -> None:
    """An in-scope command can rewrite an in-scope file: under "ask for each edit" it
    waits with the command shown; a command proven read-only does not."""
    harness, model, session, workspace = await _planned(tmp_path)
    original = (workspace / "inventory" / "stock.py").read_text()
    command = "python -m pytest -q -p no:cacheprovider"
    model.add([call("Bash", command="ls inventory")], [call("Bash", command=command)])
    events = await _approve(harness, session, permission="ask_each_edit")
    listed = tool_results(events, "Bash")[0]
    assert "stock.py" in listed["stdout"]
    (request,) = await session.pending()
    assert request.kind == "edit" and request.tool_name == "Bash"
    assert f"run `{command}`" in request.payload["message"]
    model.add([text("done")])
    events = await _decide(harness, session, approve=True)
    assert tool_results(events, "Bash")[-1]["exit_code"] == 1  # the sample's failing test
    assert (workspace / "inventory" / "stock.py").read_text() == original


async def test_a_plan_without_a_scope_acts_as_before(tmp_path: Path) -> None:
    harness, model, session, workspace = await _planned(tmp_path, scope=None)
    model.add([call("Write", path="anything/new.txt", content="ok")], [text("done")])
    events = await _approve(harness, session)
    assert tool_results(events, "Write")[0]["bytes_written"] == 2
    assert (workspace / "anything" / "new.txt").read_text() == "ok"
    record = await session.record()
    assert record is not None and record.sha256 == content_sha256(PLAN)


async def test_fix_14_a_call_no_scope_entry_can_name_is_an_error_not_a_crash(
    tmp_path: Path,
) -> None:
    """A path with a backslash or newline, or a command over the entry length, cannot be
    written into a scope, so no amendment can grant it: the model gets INVALID_ARGS in
    the same run and nothing is written."""
    harness, model, session, workspace = await _planned(tmp_path)
    long_command = "python -c " + repr("x" * 600)
    model.add(
        [call("Write", path="a\\b.txt", content="x")],
        [call("Write", path="c\nd.txt", content="x")],
        [call("Bash", command=long_command)],
        [text("done")],
    )
    events = await _approve(harness, session)
    results = tool_results(events, "Write") + tool_results(events, "Bash")
    assert [r["code"] for r in results] == ["INVALID_ARGS"] * 3
    assert "backslash" in results[0]["message"] and "longer than" in results[2]["message"]
    assert await session.pending() == []
    assert not (workspace / "a\\b.txt").exists() and not (workspace / "c\nd.txt").exists()
