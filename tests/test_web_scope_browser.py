"""The approved plan as a capability on the page (issue 14, the web part), in headless
Chromium against a real uvicorn server, the real coding agent over a sample workspace and
a scripted model that drifts (writes a file its plan does not name).

The approval card shows the scope as a line and a list, lets the reviewer edit it (a bad
edit is refused with its reason and loses nothing) and offers the permission; a write
outside the scope waits on an amendment card (approved: the file is written and the plan
shows a new revision with the widened scope; refused: the file is untouched and the model
is told SCOPE_AMENDMENT_REFUSED); "ask for each edit" pauses every write with its diff; a
reload or a restart between the pause and the answer loses nothing.

Screenshots go to ``test-artifacts/web/`` (prefixed ``scope-``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from test_web_render import assert_accessible
from web_support import ARTIFACTS, RestartableSite, demo_server, headless_chromium

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
PLAN = "# Fix the guard\n\n1. Change `inventory/stock.py`\n2. Run the tests\n"
SCOPE = {"write": ["inventory/stock.py"], "commands": ["python -m pytest"]}
STOCK = "inventory/stock.py"
DRIFT = "CHANGELOG.md"
SUMMARY = "This plan may write inventory/stock.py; run python -m pytest; no network."


class Site(RestartableSite):
    """The coding agent over a sample workspace, a scripted model and a database file that
    outlives restarts, on a real server."""

    def __init__(self, root: Path) -> None:
        super().__init__(root / "web.db")
        self.workspace = copy_sample_workspace(root / "workspace")

    def agent(self) -> Any:
        return build_coding_agent(self.workspace, self.model)

    def plans(self, *after: Any) -> None:
        """The model plans with SCOPE, submits, and then plays ``after``."""
        self.model.add(
            [call("update_plan_content", content=PLAN, mode="replace", scope=SCOPE)],
            [call("exit_plan_mode", summary="Fix the guard")],
            *after,
        )

    def seen_results(self) -> list[dict[str, Any]]:
        """The function results the model was shown in its last request."""
        return [
            dict(part.function_response.response or {})
            for content in self.model.requests[-1].contents[-1:]
            for part in content.parts or []
            if part.function_response is not None
        ]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as browser:
        yield browser


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = Site(tmp_path).start()
    yield site
    site.stop()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT)
    yield page
    context.close()
    assert errors == [], errors


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"scope-{name}.png"), full_page=False)


def open_thread(page: Any, url: str, thread: str) -> None:
    page.goto(f"{url}/#thread={thread}")
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")


def runs_ended(page: Any) -> int:
    return page.evaluate(
        "() => window.__events.filter(e => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')"
        ".length"
    )


def wait_runs(page: Any, count: int) -> None:
    page.wait_for_function(
        "n => window.__events.filter(e => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')"
        ".length >= n",
        arg=count,
    )


def plan_and_say(page: Any, words: str) -> Any:
    """Plan mode, the task, and the approval card it ends on."""
    page.locator("#mode-plan").click()
    page.locator("#input").fill(words)
    page.locator("#input").press("Enter")
    card = page.locator(".card.approval")
    card.wait_for()
    return card


def decide(card: Any, button: str) -> None:
    card.get_by_role("button", name=button, exact=True).click()


def test_the_approval_card_shows_the_scope_and_a_drift_waits_for_the_amendment(
    site: Site, page: Any
) -> None:
    site.plans(
        [
            call("Write", path=STOCK, content="# fixed\n"),
            call("Write", path=DRIFT, content="- fixed the guard\n"),
        ],
        [text("Done: the guard is fixed and the change is noted.")],
    )
    open_thread(page, site.url, "t-amend")
    approval = plan_and_say(page, "fix the guard")
    # The one-line summary and the readable list, and the permission choice.
    assert approval.locator(".scope-summary").inner_text() == SUMMARY
    listed = approval.locator(".scope-list .scope-row")
    assert listed.nth(0).inner_text().split("\n") == ["May write", STOCK]
    assert listed.nth(1).inner_text().split("\n") == ["May run", "python -m pytest"]
    assert listed.nth(2).inner_text().split("\n") == ["Network", "no"]
    assert approval.locator(".permission input[value=auto]").is_checked()
    assert page.locator("#plan-meta .plan-scope").inner_text().startswith("Scope\n")
    assert_accessible(page, "approval card with a scope")
    shot(page, "01-approval")
    decide(approval, "Approve")

    amendment = page.locator(".card.amendment")
    amendment.wait_for()
    # It says exactly what and why; the in-scope write of the same step already ran.
    assert amendment.locator(".request-text").inner_text() == (
        f"The agent also wants to write {DRIFT} (Write {DRIFT})."
    )
    assert amendment.locator(".scope-list .scope-row").first.inner_text().split("\n") == [
        "May write",
        DRIFT,
    ]
    assert "does not cover this" in amendment.inner_text()
    assert amendment.locator(".diff-line.add").inner_text().endswith("- fixed the guard")
    assert (site.workspace / STOCK).read_text() == "# fixed\n"
    assert not (site.workspace / DRIFT).exists()
    assert page.locator('.tool[data-tool="Write"] >> nth=1').get_attribute("class") == (
        "tool waiting"
    )
    assert page.locator("#run-indicator").inner_text() == "waiting for you"
    assert page.locator('[data-tool="adk_request_confirmation"]').count() == 0
    assert_accessible(page, "amendment card")
    shot(page, "02-amendment")
    ended = runs_ended(page)
    decide(amendment, "Approve amendment")
    wait_runs(page, ended + 1)

    page.locator(".msg.assistant", has_text="the change is noted").wait_for()
    assert (site.workspace / DRIFT).read_text() == "- fixed the guard\n"
    chip = page.locator(".msg.decision.chip").last
    assert chip.inner_text().startswith("Approved the amendment — This plan may write")
    # The plan shows a new revision with the widened scope.
    meta = page.locator("#plan-meta")
    assert "revision 2" in meta.inner_text()
    assert meta.locator(".plan-scope").inner_text() == (
        f"Scope\nThis plan may write {STOCK}, {DRIFT}; run python -m pytest; no network."
    )
    page.locator("#timeline .event", has_text=f"Approved the amendment: write {DRIFT}").wait_for()
    assert page.locator("#timeline .event", has_text="Asked to amend the scope").count() == 1
    assert page.locator(".card").count() == 0
    shot(page, "03-amended")


def test_a_refused_amendment_leaves_the_file_untouched_and_the_model_is_told(
    site: Site, page: Any
) -> None:
    before = (site.workspace / "README.md").read_text()
    site.plans(
        [call("Edit", path="README.md", old_string="#", new_string="##")],
        [text("Understood: I stay within the plan.")],
    )
    open_thread(page, site.url, "t-refuse")
    decide(plan_and_say(page, "fix the guard"), "Approve")
    amendment = page.locator(".card.amendment")
    amendment.wait_for()
    amendment.locator(".note").fill("not part of this task")
    decide(amendment, "Refuse")
    page.locator(".msg.assistant", has_text="I stay within the plan").wait_for()
    assert (site.workspace / "README.md").read_text() == before
    (seen,) = site.seen_results()
    assert seen["code"] == "SCOPE_AMENDMENT_REFUSED" and seen["status"] == "rejected"
    chip = page.locator(".msg.decision.chip").last
    assert chip.inner_text() == "Refused the amendment: not part of this task"
    edit = page.locator('.tool[data-tool="Edit"]')
    assert edit.get_attribute("class") == "tool rejected"
    assert "nothing was changed" in edit.locator(".tool-note").inner_text()
    # The scope is as approved: one revision, the same line.
    assert "revision 1" in page.locator("#plan-meta").inner_text()
    page.locator("#timeline .event", has_text="Refused the amendment: write README.md").wait_for()


def test_ask_for_each_edit_pauses_every_write_with_its_diff_across_a_reload(
    site: Site, page: Any
) -> None:
    old = (site.workspace / STOCK).read_text()
    new = old.replace("quantity > on_hand + 1", "quantity > on_hand")
    site.plans(
        [
            call("Write", path=STOCK, content=new),
            call("Write", path="inventory/notes.py", content="NOTE = 1\n"),
        ],
        [text("Applied what you allowed.")],
    )
    open_thread(page, site.url, "t-each")
    approval = plan_and_say(page, "fix the guard")
    approval.locator(".permission input[value=ask_each_edit]").check()
    decide(approval, "Approve")
    # A batch: the in-scope write waits for its review, the other for an amendment.
    review = page.locator(".card.edit-review")
    review.wait_for()
    assert page.locator(".card").count() == 2
    assert review.locator("h3").inner_text() == f"Review this edit of {STOCK}"
    assert review.locator(".diff-line.del").inner_text().endswith("if quantity > on_hand + 1:")
    assert review.locator(".diff-line.add").inner_text().endswith("if quantity > on_hand:")
    assert page.locator("#plan-meta .chip", has_text="you review each edit").count() == 1
    assert_accessible(page, "edit review card")
    shot(page, "04-edit-review")
    assert (site.workspace / STOCK).read_text() == old
    ended = runs_ended(page)
    decide(review, "Approve edit")
    wait_runs(page, ended + 1)
    # The page is reloaded before the second answer: both are stored, not page memory.
    open_thread(page, site.url, "t-each")
    assert page.locator(".card.edit-review").count() == 0
    amendment = page.locator(".card.amendment")
    assert amendment.count() == 1
    assert [d.inner_text() for d in page.locator(".msg.decision").all()] == [
        "Approved the plan (revision 1)",
        "Approved the edit",
    ]
    assert amendment.locator(".diff-line.add").inner_text().endswith("NOTE = 1")
    decide(amendment, "Refuse")
    page.locator(".msg.assistant", has_text="Applied what you allowed").wait_for()
    assert (site.workspace / STOCK).read_text() == new
    assert not (site.workspace / "inventory/notes.py").exists()
    page.locator("#timeline .event", has_text=f"Approved the edit: write {STOCK}").wait_for()


def test_the_reviewer_edits_the_scope_and_a_bad_edit_loses_nothing(site: Site, page: Any) -> None:
    site.plans([call("Write", path=DRIFT, content="- noted\n")], [text("Noted.")])
    open_thread(page, site.url, "t-edit-scope")
    approval = plan_and_say(page, "fix the guard")
    approval.locator(".scope-editor summary").click()
    write = approval.locator("textarea.scope-write")
    write.fill(f"{STOCK}\n../outside.txt")
    assert approval.get_by_role("button", name="Approve with edits").is_visible()
    ended = runs_ended(page)
    decide(approval, "Approve with edits")
    wait_runs(page, ended + 1)
    banner = page.locator("#banner")
    banner.wait_for()
    assert "leaves the workspace" in banner.inner_text()
    assert "INVALID_REPLY" in banner.inner_text()
    # Nothing changed: the same card, the typed scope still in it, the plan still waiting.
    approval = page.locator(".card.approval")
    approval.locator("textarea.scope-write").wait_for()
    assert approval.locator("textarea.scope-write").input_value() == (f"{STOCK}\n../outside.txt")
    assert "waiting for your approval" in page.locator("#plan-status").inner_text()
    shot(page, "05-bad-scope")
    approval.locator("textarea.scope-write").fill(f"{STOCK}\n{DRIFT}")
    approval.locator("input.scope-network").check()
    ended = runs_ended(page)
    decide(approval, "Approve with edits")
    wait_runs(page, ended + 1)
    page.locator(".msg.assistant", has_text="Noted.").wait_for()
    # The widened scope covered the write: no amendment, the file is there.
    assert page.locator(".card").count() == 0
    assert (site.workspace / DRIFT).read_text() == "- noted\n"
    meta = page.locator("#plan-meta")
    assert "revision 2" in meta.inner_text()
    assert meta.locator(".plan-scope").inner_text() == (
        f"Scope\nThis plan may write {STOCK}, {DRIFT}; run python -m pytest; use the network."
    )


def test_two_amendments_of_one_step_each_add_to_the_scope(site: Site, page: Any) -> None:
    """A batch: the first amendment is approved as asked, the second with the reviewer's
    grant (a folder instead of one file); the scope keeps both."""
    site.plans(
        [
            call("Write", path=DRIFT, content="- one\n"),
            call("Write", path="docs/notes.md", content="two\n"),
        ],
        [text("Both written.")],
    )
    open_thread(page, site.url, "t-two")
    decide(plan_and_say(page, "fix the guard"), "Approve")
    cards = page.locator(".card.amendment")
    cards.nth(1).wait_for()
    # The two calls pause as parallel tasks, so their cards may come in either order.
    first = cards.filter(has_text=DRIFT)
    second_id = cards.filter(has_text="docs/notes.md").get_attribute("data-interrupt-id")
    ended = runs_ended(page)
    decide(first, "Approve amendment")
    wait_runs(page, ended + 1)
    assert "revision 2" in page.locator("#plan-meta").inner_text()
    second = page.locator(f'.card.amendment[data-interrupt-id="{second_id}"]')
    assert cards.count() == 1 and second.count() == 1
    second.locator(".scope-editor summary").click()
    assert second.locator("textarea.scope-write").input_value() == "docs/notes.md"
    second.locator("textarea.scope-write").fill("docs/")
    decide(second, "Approve amendment")
    page.locator(".msg.assistant", has_text="Both written.").wait_for()
    wait_runs(page, ended + 2)
    assert (site.workspace / DRIFT).read_text() == "- one\n"
    assert (site.workspace / "docs/notes.md").read_text() == "two\n"
    assert page.locator("#plan-meta .plan-scope").inner_text() == (
        f"Scope\nThis plan may write {STOCK}, {DRIFT}, docs/**; run python -m pytest; no network."
    )


def test_a_restart_between_the_pause_and_the_answer_loses_nothing(site: Site, page: Any) -> None:
    site.plans([call("Write", path=DRIFT, content="- after a restart\n")])
    open_thread(page, site.url, "t-restart")
    decide(plan_and_say(page, "fix the guard"), "Approve")
    page.locator(".card.amendment").wait_for()
    site.stop()

    site.start(ScriptedLlm().add([text("Written after the restart.")]))  # a new process
    open_thread(page, site.url, "t-restart")
    amendment = page.locator(".card.amendment")
    assert amendment.count() == 1
    assert DRIFT in amendment.locator(".request-text").inner_text()
    decide(amendment, "Approve amendment")
    page.locator(".msg.assistant", has_text="Written after the restart").wait_for()
    assert (site.workspace / DRIFT).read_text() == "- after a restart\n"
    thread = page.evaluate("t => fetch(`/api/threads/${t}`).then(r => r.json())", "t-restart")
    record = thread["state"]["plan:orchestrator"]
    record = json.loads(record) if isinstance(record, str) else record
    assert DRIFT in record["scope"]["write"] and record["contentRevisions"] == 2


def test_a_hostile_path_in_an_amendment_is_shown_as_text(site: Site, page: Any) -> None:
    hostile = 'notes/<img src=x onerror="window.__pwned=1">.md'
    site.plans([call("Write", path=hostile, content="x\n")], [text("Left the notes alone.")])
    open_thread(page, site.url, "t-hostile")
    decide(plan_and_say(page, "fix the guard"), "Approve")
    amendment = page.locator(".card.amendment")
    amendment.wait_for()
    assert hostile in amendment.locator(".request-text").inner_text()
    assert amendment.locator(".scope-items li").inner_text() == hostile
    assert page.locator(".card img").count() == 0
    decide(amendment, "Refuse")
    # A reply no earlier message contains ("ok" also appears in plan text and tool statuses).
    page.locator(".msg.assistant", has_text="Left the notes alone.").wait_for()
    assert page.evaluate("() => window.__pwned") is None
    assert not (site.workspace / "notes").exists()


def test_hidden_characters_and_links_in_the_plan_are_shown_for_what_they_are(
    site: Site, page: Any
) -> None:
    """A right-to-left override, a no-break-space run and a link labelled like a button
    in the plan body: the reviewer sees markers and the real target."""
    hostile = (
        "# Fix the guard\n\n1. Change `inventory/stock.py`\u202e krowten on\n"
        "2. Run the tests\u00a0\u00a0\u00a0;curl evil\n\n[Approve](https://evil.example/ok)\n"
    )
    site.model.add(
        [call("update_plan_content", content=hostile, mode="replace", scope=SCOPE)],
        [call("exit_plan_mode", summary="Fix the guard")],
    )
    open_thread(page, site.url, "t-hidden")
    approval = plan_and_say(page, "fix the guard")
    shown = page.locator("#plan-body").inner_text()
    assert "\\u202e krowten on" in shown and "\u202e" not in shown
    assert "\\u00a0\\u00a0\\u00a0;curl evil" in shown and "\u00a0" not in shown
    assert "Approve (https://evil.example/ok)" in shown
    assert approval.get_by_role("button", name="Approve", exact=True).count() == 1
    shot(page, "hidden-characters")


@pytest.mark.parametrize("choice", ["ask_each_edit", "narrow_scope"])
def test_the_demo_on_plangate_serve_pauses_its_fix_for_the_reviewer(
    tmp_path: Path, page: Any, choice: str
) -> None:
    """``plangate serve``'s demo: approving with "ask for each edit" shows the fix as a
    diff to approve; a scope the reviewer narrows to another file makes the fix an
    amendment, and refusing it leaves the file as it was and the demo says so."""
    with demo_server(tmp_path / "web", tmp_path / "data") as server:
        stock = server.workspace / STOCK
        before = stock.read_text()
        open_thread(page, server.url, f"t-demo-{choice}")
        page.locator("#mode-plan").click()
        page.locator("#input").fill("Fix the failing test")
        page.locator("#input").press("Enter")
        page.locator(".card.question button.option").first.click()
        approval = page.locator(".card.approval")
        approval.wait_for()
        assert approval.locator(".scope-summary").inner_text() == (
            f"This plan may write {STOCK}; run python -m pytest; no network."
        )
        if choice == "ask_each_edit":
            approval.locator(".permission input[value=ask_each_edit]").check()
            decide(approval, "Approve")
            review = page.locator(".card.edit-review")
            review.wait_for()
            assert review.locator(".diff-line.add").inner_text().endswith("if quantity > on_hand:")
            assert stock.read_text() == before
            decide(review, "Approve edit")
            # The test command could rewrite files too: it is shown for review as well.
            command = page.locator(".card.edit-review", has_text="python -m pytest")
            command.wait_for()
            decide(command, "Approve edit")
            page.locator(".msg.assistant", has_text="[demo] Done.").wait_for()
            assert "on_hand + 1" not in stock.read_text()
            return
        approval.locator(".scope-editor summary").click()
        approval.locator("textarea.scope-write").fill("README.md")
        decide(approval, "Approve with edits")
        amendment = page.locator(".card.amendment")
        amendment.wait_for()
        assert STOCK in amendment.locator(".request-text").inner_text()
        decide(amendment, "Refuse")
        page.locator(".msg.assistant", has_text="You refused the edit").wait_for()
        assert stock.read_text() == before


def test_exact_and_network_grants_are_shown_edited_and_kept(site: Site, page: Any) -> None:
    """Commands granted exactly as shown and the network for one command are rows of the
    scope and fields of its editor; an amendment approved with the reviewer's edit keeps
    them (the page sent the scope back without them, and they were lost)."""
    scope = {**SCOPE, "exact_commands": ["make lint"], "network_commands": ["make lint"]}
    site.model.add(
        [call("update_plan_content", content=PLAN, mode="replace", scope=scope)],
        [call("exit_plan_mode", summary="Fix the guard")],
        [call("Bash", command="rm -rf build")],
        [call("Write", path=DRIFT, content="- noted\n")],
        [text("Noted.")],
    )
    open_thread(page, site.url, "t-exact")
    approval = plan_and_say(page, "fix the guard")
    rows = [r.split("\n") for r in approval.locator(".scope-list .scope-row").all_inner_texts()]
    assert ["May run exactly", "make lint"] in rows
    assert ["Network only for", "make lint"] in rows
    approval.locator(".scope-editor summary").click()
    assert approval.locator("textarea.scope-exact").input_value() == "make lint"
    assert approval.locator("textarea.scope-network-commands").input_value() == "make lint"
    shot(page, "10-exact-grants")
    decide(approval, "Approve")
    command = page.locator(".card.amendment", has_text="rm -rf build")
    command.wait_for()
    ended = runs_ended(page)
    decide(command, "Approve amendment")
    wait_runs(page, ended + 1)
    write = page.locator(".card.amendment", has_text=DRIFT)
    write.wait_for()
    write.locator(".scope-editor summary").click()
    write.locator("textarea.scope-write").fill(f"{DRIFT}\ndocs/")
    decide(write, "Approve amendment")
    page.locator(".msg.assistant", has_text="Noted.").wait_for()
    assert (site.workspace / DRIFT).read_text() == "- noted\n"
    assert page.locator("#plan-meta .plan-scope").inner_text() == (
        f"Scope\nThis plan may write {STOCK}, {DRIFT}, docs/**; run python -m pytest; "
        "run exactly make lint, rm -rf build; the network only for make lint."
    )
