"""The page in headless Chromium against a real uvicorn server running the agent of
``plangate serve`` (the coding agent with the data tools under protocol governance) and
the offline demo model.

Screenshots of every step go to ``test-artifacts/web/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plangate.agent.workspace import copy_sample_workspace
from web_support import ARTIFACTS, ServerThread, demo_app, demo_server, headless_chromium

pytestmark = pytest.mark.browser

TASK = "Fix the failing test"
TIMEOUT = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # Only this run's screenshots; test_web_scope_browser's (scope-*) are its own, and
    # may be written meanwhile by another worker.
    for old in ARTIFACTS.glob("*.png"):
        if not old.name.startswith("scope-"):
            old.unlink(missing_ok=True)
    with headless_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with demo_server(tmp_path_factory.mktemp("web"), tmp_path_factory.mktemp("data")) as server:
        yield server


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    copy_sample_workspace(server.workspace)  # every test starts from the buggy sample
    # bypass_csp lets Playwright evaluate its wait predicates; the page itself needs no eval.
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT)
    yield page
    context.close()
    assert errors == [], errors


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def events(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("() => window.__events")


def wait_runs(page: Any, count: int) -> None:
    page.wait_for_function(
        "n => window.__events.filter(e => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')"
        ".length >= n",
        arg=count,
    )


def open_page(page: Any, url: str) -> None:
    page.goto(url + "/")
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")


def start_task(page: Any, url: str, mode: str, *, navigate: bool = True) -> None:
    if navigate:
        open_page(page, url)
    page.locator(f"#mode-{mode}").click()
    assert page.locator(f"#mode-{mode}").get_attribute("aria-pressed") == "true"
    page.locator("#input").fill(TASK)
    page.locator("#input").press("Enter")


def last_run(page: Any) -> list[dict[str, Any]]:
    seen = events(page)
    start = max(i for i, e in enumerate(seen) if e["type"] == "RUN_STARTED")
    return seen[start:]


def test_plan_question_approve_with_edit_then_implement_and_reload(page: Any, server: Any) -> None:
    open_page(page, server.url)
    assert "No plan yet" in page.locator("#plan-body").inner_text()
    # The demo's threads share one workspace, and the page says which.
    note = page.locator("#workspace-note")
    note.wait_for()
    assert "Every thread works on the same folder" in note.inner_text()
    shot(page, "01-empty")
    start_task(page, server.url, "plan", navigate=False)
    question = page.locator(".card.question")
    question.wait_for()
    refused = page.locator('.tool.refused[data-tool="Edit"]')
    assert refused.locator(".tool-status").inner_text() == "refused by plan gate"
    assert "blocked while the plan is 'exploring'" in refused.locator(".tool-note").inner_text()
    assert page.locator("#plan-status").inner_text() == "exploring (read-only)"
    assert page.locator('.tool.waiting[data-tool="ask_user_question"]').count() == 1
    shot(page, "02-question")

    question.locator("button.option").first.click()
    approval = page.locator(".card.approval")
    approval.wait_for()
    run = last_run(page)
    finished = next(i for i, e in enumerate(run) if e["type"] == "RUN_FINISHED")
    drafted = [
        i
        for i, e in enumerate(run)
        if e["type"] == "STATE_DELTA" and e["planStatus"] == "drafting" and e["planPanelChars"] > 0
    ]
    # The plan panel showed the draft while the run was still streaming.
    assert drafted and drafted[0] < finished
    assert run[finished]["reasons"] == ["plan_approval"]
    assert run[finished]["planPanelChars"] > 0
    assert "Fix over-reservation" in page.locator("#plan-body").inner_text()
    assert page.locator("#plan-status").inner_text() == "waiting for your approval"
    assert "revision 1" in approval.locator("h3").inner_text()
    shot(page, "03-approval-card")

    editor = approval.locator("textarea.editor")
    content = editor.input_value()
    editor.fill(
        content.replace("-m pytest -q`\n", "-m pytest -q`\n3. Keep the change to one line\n")
    )
    assert approval.locator("button.primary").inner_text() == "Approve with edits"
    assert "Keep the change to one line" in approval.locator(".edits .diff-line.add").inner_text()
    shot(page, "04-approval-edited")

    approval.locator("button.primary").click()
    wait_runs(page, 3)
    page.locator('.tool.ok[data-tool="Edit"]').wait_for()
    bash = page.locator('.tool[data-tool="Bash"]').last
    assert "ok" in bash.get_attribute("class")
    assert re.search(r"exit 0 · 5 passed", bash.locator(".tool-note").inner_text())
    assert page.locator("#mode-agent").get_attribute("aria-pressed") == "true"
    assert page.locator("#plan-status").inner_text() == "approved"
    assert "Keep the change to one line" in page.locator("#plan-body").inner_text()
    # The step added in the edit is not one the demo did: it stays open.
    assert page.locator("#todo-count").inner_text() == "2/3 done"
    assert "Not done: “Keep the change to one line”" in page.locator(".msg").last.inner_text()
    assert page.locator(".card").count() == 0
    page.locator("#timeline", has_text="Approved revision 2 with edits").wait_for()
    assert "Gate refused Edit" in page.locator("#timeline").inner_text()
    assert (
        "Approved the plan (revision 2) with edits"
        in page.locator(".msg.decision").last.inner_text()
    )
    assert "if quantity > on_hand:\n" in (server.workspace / "inventory/stock.py").read_text()
    shot(page, "05-implemented")

    page.reload()
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")
    assert page.locator("#plan-status").inner_text() == "approved"
    assert page.locator("#mode-agent").get_attribute("aria-pressed") == "true"
    assert page.locator("#todo-count").inner_text() == "2/3 done"
    assert page.locator('.tool.refused[data-tool="Edit"]').count() == 1
    assert "5 passed" in page.locator('.tool[data-tool="Bash"]').last.inner_text()
    assert page.locator(".msg.user").first.inner_text() == TASK
    assert "Approved revision 2 with edits" in page.locator("#timeline").inner_text()
    shot(page, "06-reloaded")


def test_reject_with_a_note_brings_a_new_revision_with_a_diff(page: Any, server: Any) -> None:
    start_task(page, server.url, "plan")
    page.locator(".card.question button.option").first.click()
    approval = page.locator(".card.approval")
    approval.wait_for()
    approval.locator("button.danger").click()  # no note yet: asks for one, sends nothing
    assert approval.locator("textarea.note").evaluate("n => n === document.activeElement")
    assert len([e for e in events(page) if e["type"] == "RUN_STARTED"]) == 2
    approval.locator("textarea.note").fill("Also mention the docstring")
    approval.locator("button.danger").click()
    page.locator(".card.approval h3", has_text="revision 2").wait_for()
    card = page.locator(".card.approval")
    assert "Changes since revision 1" in card.locator(".changes summary").inner_text()
    added = card.locator(".changes .diff-line.add").all_inner_texts()
    assert any("Also mention the docstring" in line for line in added)
    assert (
        "Rejected revision 1: Also mention the docstring"
        in page.locator(".msg.decision").last.inner_text()
    )
    page.locator("#timeline", has_text="Rejected revision 1").wait_for()
    assert "Also mention the docstring" in page.locator("#plan-meta").inner_text()
    shot(page, "07-rejected-new-revision")

    # The Agent toggle is the user's exit: the plan is cancelled and the request withdrawn.
    assert page.locator("#mode-plan").get_attribute("aria-pressed") == "true"
    page.locator("#mode-agent").click()
    page.wait_for_function("() => window.__events.some(e => e.type === 'LEFT_PLAN')")
    assert page.locator(".card").count() == 0
    assert page.locator("#plan-status").inner_text() == "cancelled"
    assert page.locator("#mode-agent").get_attribute("aria-pressed") == "true"
    assert "Left plan mode" in page.locator("#banner").inner_text()
    assert "Cancelled the plan (user exit)" in page.locator("#timeline").inner_text()
    assert page.locator('.tool[data-tool="exit_plan_mode"]').last.get_attribute("class") != (
        "tool waiting"
    )
    shot(page, "08-left-plan-mode")


def test_entry_confirmation_and_a_free_text_answer(page: Any, server: Any) -> None:
    start_task(page, server.url, "agent")
    entry = page.locator(".card.entry")
    entry.wait_for()
    assert TASK in entry.inner_text()
    assert page.locator("#plan-status").inner_text() == "waiting for you to confirm"
    shot(page, "09-entry-card")
    entry.locator("button.primary").click()
    answer = page.locator(".card.question input.answer")
    answer.wait_for()
    answer.fill("Raise OutOfStock and log the SKU")
    answer.press("Enter")
    page.locator(".card.approval").wait_for()
    assert "Raise OutOfStock and log the SKU" in page.locator("#plan-body").inner_text()
    decisions = page.locator(".msg.decision").all_inner_texts()
    assert any("Confirmed Plan mode" in d for d in decisions)
    assert any("Answered: Raise OutOfStock and log the SKU" in d for d in decisions)
    shot(page, "10-free-text-answer")


def test_the_page_sends_the_token_from_the_url_fragment(browser: Any, tmp_path: Path) -> None:
    app, _ = demo_app(tmp_path, require_token=True, token="tok-123")
    server = ServerThread(app).start()
    context = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        page.goto(server.url + "/")
        page.locator("#banner", has_text="needs a token").wait_for()
        shot(page, "11-token-missing")
        page.goto(server.url + "/#token=tok-123")
        page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")
        assert "token" not in page.url  # kept in sessionStorage, not in the address bar
        page.locator("#mode-plan").click()
        page.locator("#input").fill(TASK)
        page.locator("#send").click()
        page.locator(".card.question").wait_for()
        page.reload()
        page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")
        page.locator(".card.question").wait_for()
        assert page.locator("#banner").is_hidden()
    finally:
        context.close()
        server.stop()


REVENUE = [
    "North: 97,979.81",
    "East: 95,016.68",
    "South: 83,800.54",
    "West: 71,066.94",
    "Central: 30,216.51",
]


def say(page: Any, text: str, runs: int) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")
    wait_runs(page, runs)


def test_the_protocol_panel_follows_routing_a_failed_run_and_a_handoff(
    page: Any, server: Any
) -> None:
    from playwright.sync_api import expect

    open_page(page, server.url)
    page.locator("#new-thread").click()  # a fresh thread: no session intent yet
    panel = page.locator("#protocol-panel")
    assert panel.is_visible()
    assert page.locator("#protocol-status").inner_text() == "no run yet"

    # 1. Routed to general-task: the data tool is refused by the protocol, the run fails.
    say(page, "revenue by region last quarter", 1)
    run = last_run(page)
    assert run[-1]["type"] == "RUN_ERROR"
    assert run[-1]["code"] == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"
    assert page.locator("#protocol-name").inner_text() == "general-task@1"
    assert page.locator("#protocol-phase").inner_text() == "understand"
    assert page.locator("#protocol-status").inner_text() == "failed"
    outcome = page.locator("#protocol-outcome")
    assert "Last run failed: DATA_ACTIONS_REJECTED_BY_PROTOCOL" in outcome.inner_text()
    assert "revenue by region last quarter" in page.locator("#protocol-intent").inner_text()
    assert "default" in page.locator("#protocol-route").inner_text()
    assert page.locator("#protocol-handoffs").inner_text() == "none"
    refused = page.locator('.tool.refused.by-protocol[data-tool="list_data_sources"]')
    assert refused.locator(".tool-status").inner_text() == "refused by protocol"
    assert "not allowed in phase “understand”" in refused.locator(".tool-note").inner_text()
    banner = page.locator("#banner").inner_text()
    assert banner.startswith("The protocol failed this run — 1 data tool call(s)")
    assert "never ran (DATA_ACTIONS_REJECTED_BY_PROTOCOL)" in banner
    assert banner.count("DATA_ACTIONS_REJECTED_BY_PROTOCOL") == 1  # the code once
    timeline = page.locator("#timeline")
    timeline.locator("text=Run failed: DATA_ACTIONS_REJECTED_BY_PROTOCOL").wait_for()
    assert "Routed to general-task@1" in timeline.inner_text()
    assert "Protocol refused list_data_sources in phase understand" in timeline.inner_text()
    shot(page, "12-protocol-failed-run")

    # 2. "try again": the same task, handed off to data-analysis while the run streams.
    say(page, "try again", 2)
    run = last_run(page)
    assert run[-1]["type"] == "RUN_FINISHED" and run[-1]["outcome"] == "success"
    deltas = [e for e in run if e["type"] == "STATE_DELTA"]
    handed = next(i for i, e in enumerate(deltas) if e["handoffs"])
    assert deltas[0]["protocol"] == "general-task"
    assert deltas[handed]["protocol"] == "data-analysis"
    assert [e["phase"] for e in deltas[handed:]][-1] == "synthesis"
    assert page.locator("#protocol-name").inner_text() == "data-analysis@1"
    assert page.locator("#protocol-phase").inner_text() == "synthesis"
    assert page.locator("#protocol-status").inner_text() == "completed"
    assert "general-task → data-analysis" in page.locator("#protocol-handoffs").inner_text()
    assert "handoff" in page.locator("#protocol-intent").locator("..").inner_text()
    assert "SESSION_INTENT_INHERITED" in page.locator("#protocol-route").inner_text()
    answer = page.locator(".msg.assistant").last
    for line in REVENUE:
        assert line in answer.inner_text()
    expect(answer).to_be_in_viewport()  # the chat followed the run to its answer
    # The handoff and the data calls after it (one model step each) share one bubble.
    handoff = page.locator(".msg.assistant", has=page.locator('[data-tool="protocol_handoff"]'))
    # ... the requirements the analysis reports on included.
    assert handoff.locator(".tool.ok").count() == 9
    assert handoff.locator('[data-tool="analysis_requirements_commit"]').count() == 1
    assert "5 rows" in handoff.locator('[data-tool="run_sql_readonly"]').inner_text()
    timeline.locator("text=Handoff accepted: now data-analysis@1").wait_for()
    text = timeline.inner_text()
    assert "Proposed a handoff general-task@1 → data-analysis@1" in text
    assert "Run completed" in text
    assert page.locator("#banner").is_hidden()
    shot(page, "12-protocol-handoff")

    # 3. A refinement stays in data-analysis; the earlier handoff is still listed.
    say(page, "break it down by month", 3)
    assert last_run(page)[-1]["type"] == "RUN_FINISHED"
    assert "refine" in page.locator("#protocol-route").inner_text()
    assert "earlier run" in page.locator("#protocol-handoffs").inner_text()
    assert "East 2026-08: 33,530.46" in page.locator(".msg.assistant").last.inner_text()
    shot(page, "12-protocol-refined")

    # A reload restores the panel, the inline refusal and the protocol timeline.
    page.reload()
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")
    assert page.locator("#protocol-name").inner_text() == "data-analysis@1"
    assert page.locator(".tool.refused.by-protocol").count() == 1
    assert "Run failed: DATA_ACTIONS_REJECTED_BY_PROTOCOL" in timeline.inner_text()


def test_branch_from_here_and_delete_a_thread_from_the_thread_list(page: Any, server: Any) -> None:
    start_task(page, server.url, "plan")
    page.locator(".card.question").wait_for()
    source = page.evaluate("() => new URLSearchParams(location.hash.slice(1)).get('thread')")

    page.locator("#threads-button").click()
    row = page.locator(".thread-row", has=page.locator(f'[data-thread-id="{source}"]'))
    row.locator('[data-action="branch"]').click()
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_BRANCHED')")
    [branched] = [e for e in events(page) if e["type"] == "THREAD_BRANCHED"]
    assert branched["from"] == source and branched["threadId"] != source
    # The branch opens where the thread was: the message and the waiting question.
    page.locator(".card.question").wait_for()
    assert page.locator(".msg.user").first.inner_text() == TASK
    assert "Branched" in page.locator("#banner").inner_text()
    shot(page, "20-branched")

    # Delete the original: asked first; dismissing keeps it.
    page.locator("#threads-button").click()
    row = page.locator(".thread-row", has=page.locator(f'[data-thread-id="{source}"]'))
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator('[data-action="delete"]').click()
    assert page.locator(f'.thread-item[data-thread-id="{source}"]').count() == 1
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    row.locator('[data-action="delete"]').click()
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_DELETED')")
    assert asked and asked[0].startswith(f'Delete the thread "{TASK}"?')
    assert [e["threadId"] for e in events(page) if e["type"] == "THREAD_DELETED"] == [source]
    page.locator(f'.thread-item[data-thread-id="{branched["threadId"]}"]').wait_for()
    assert page.locator(f'.thread-item[data-thread-id="{source}"]').count() == 0
    assert "deleted" in page.locator("#banner").inner_text()
    shot(page, "21-deleted")
    # The branch, still open, still waits for its answer.
    assert page.locator(".card.question").count() == 1
