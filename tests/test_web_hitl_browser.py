"""Human requests on the page, in headless Chromium against a real uvicorn server and a
scripted model (issues 9 and 10, the web parts): every card of a batched step, answered
one by one and resumed once; typed text answering the waiting card; a restart between
two answers; withdrawal on approval; the toggle and Stop during a run; tab sync; kept
drafts with Retry; stale actions in plain words; the thread list.

Screenshots go to ``test-artifacts/web/`` (prefixed ``hitl-``).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from harness import WRITES, Read, Write, make_agent
from plangate.adk.runner import build_runner
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.policy.effects import Effect, declare_effect
from plangate.web.server import create_app
from test_web_render import assert_accessible
from web_support import ARTIFACTS, RestartableSite, ServerThread, headless_chromium

pytestmark = pytest.mark.browser

TIMEOUT = 30_000
HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")

TWO_QUESTIONS = [
    call("ask_user_question", question="Which database?", options=["PostgreSQL", "SQLite"]),
    call("ask_user_question", question="Which port?"),
]
QUESTION_AND_PLAN = [
    call("ask_user_question", question="Tabs or spaces?", options=["tabs", "spaces"]),
    call("exit_plan_mode"),
]
PLAN = "# Plan\n\n1. Add the setting\n2. Test it\n"


def echo_answers(request: Any) -> list[types.Part]:
    """The model says back the answers it was given in its last turn."""
    answers = [
        str((part.function_response.response or {}).get("answer"))
        for part in request.contents[-1].parts or []
        if part.function_response is not None
    ]
    return [text("Answers: " + ", ".join(answers))]


class Gate:
    """A read-only tool that blocks (in the server's thread) until the test releases it."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

        async def Inspect(path: str) -> dict[str, Any]:
            """Inspect a path slowly."""
            self.started.set()
            await asyncio.to_thread(self.release.wait, 60)
            return {"inspected": path}

        self.tool = declare_effect(Inspect, Effect.READ)


class Site(RestartableSite):
    """A server over a scripted model and a database file that outlives restarts."""

    def __init__(self, database: Path, gate: Gate | None = None) -> None:
        super().__init__(database)
        self.gate = gate or Gate()

    def agent(self) -> Any:
        return make_agent(self.model, tools=[Read, Write, self.gate.tool])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as browser:
        yield browser


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = Site(tmp_path / "web.db").start()
    yield site
    site.gate.release.set()
    site.stop()


class Pages:
    """Browser contexts and pages of one test; every page must end without script errors."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.contexts: list[Any] = []
        self.errors: list[str] = []

    def context(self) -> Any:
        context = self.browser.new_context(viewport={"width": 1280, "height": 720}, bypass_csp=True)
        self.contexts.append(context)
        return context

    def page(self, context: Any | None = None) -> Any:
        page = (context or self.context()).new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.set_default_timeout(TIMEOUT)
        return page

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def pages(browser: Any) -> Iterator[Pages]:
    made = Pages(browser)
    yield made
    made.close()
    assert made.errors == [], made.errors


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"hitl-{name}.png"))


def runs_ended(page: Any) -> int:
    return page.evaluate(
        "() => window.__events.filter(e => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')"
        ".length"
    )


def runs_started(page: Any) -> int:
    return page.evaluate("() => window.__events.filter(e => e.type === 'RUN_STARTED').length")


def wait_runs(page: Any, count: int) -> None:
    page.wait_for_function(
        "n => window.__events.filter(e => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR')"
        ".length >= n",
        arg=count,
    )


def open_thread(page: Any, url: str, thread: str) -> None:
    page.goto(f"{url}/#thread={thread}")
    page.wait_for_function("() => window.__events.some(e => e.type === 'THREAD_LOADED')")


def say(page: Any, words: str) -> None:
    page.locator("#input").fill(words)
    page.locator("#input").press("Enter")


def plan_and_say(page: Any, words: str) -> None:
    page.locator("#mode-plan").click()
    say(page, words)


def test_fix_9_every_card_of_a_batch_shows_and_the_run_resumes_after_the_last(
    site: Site, pages: Pages
) -> None:
    site.model.add(list(TWO_QUESTIONS), echo_answers)
    page = pages.page()
    open_thread(page, site.url, "t-batch")
    plan_and_say(page, "add persistence")
    cards = page.locator(".card.question")
    cards.nth(1).wait_for()
    assert cards.count() == 2
    assert [c.locator(".question-text").inner_text() for c in cards.all()] == [
        "Which database?",
        "Which port?",
    ]
    # Waiting for you: the header, the tab title and a live region say so.
    assert page.locator("#run-indicator").inner_text() == "waiting for you"
    assert page.title().startswith("● waiting for you")
    page.wait_for_function(
        "() => document.getElementById('announcer').textContent.includes('2 requests wait')"
    )
    assert "answers: Question from the agent (1 of 2)" in page.locator("#reply-hint").inner_text()
    # The chat scrolled to the new cards.
    assert cards.first.evaluate(
        "n => { const r = n.getBoundingClientRect(), b = n.parentElement.getBoundingClientRect();"
        " return r.top >= b.top - 1 && r.top < b.bottom; }"
    )
    shot(page, "01-two-cards")
    assert_accessible(page, "two question cards")

    calls = len(site.model.requests)
    cards.first.locator("button.option", has_text="PostgreSQL").click()
    wait_runs(page, 2)
    # Recorded, collapsed to a chip; the other card still waits; the model was not called.
    assert page.locator(".card.question").count() == 1
    chip = page.locator(".msg.decision.chip")
    assert chip.inner_text().strip() == "Answered: PostgreSQL"
    assert len(site.model.requests) == calls
    assert "(1 of" not in page.locator("#reply-hint").inner_text()

    # Text typed in the composer while a card waits answers that card: no second turn.
    say(page, "5432")
    wait_runs(page, 3)
    page.locator(".msg.assistant", has_text="Answers: PostgreSQL, 5432").wait_for()
    assert len(site.model.requests) == calls + 1  # resumed once, with both answers
    assert page.locator(".card").count() == 0
    assert page.locator(".msg.user:not(.decision)").all_inner_texts() == ["add persistence"]
    assert page.locator(".msg.decision.chip").all_inner_texts() == [
        "Answered: PostgreSQL",
        "Answered: 5432",
    ]
    assert page.locator("#run-indicator").is_hidden()
    assert page.locator("#input").input_value() == ""
    shot(page, "02-batch-answered")


def test_fix_9_a_restart_between_two_answers_continues_on_the_page(
    site: Site, pages: Pages
) -> None:
    site.model.add(list(TWO_QUESTIONS))
    page = pages.page()
    open_thread(page, site.url, "t-restart")
    plan_and_say(page, "add persistence")
    page.locator(".card.question").nth(1).wait_for()
    page.locator(".card.question").first.locator("button.option").first.click()
    wait_runs(page, 2)
    site.stop()

    site.start(ScriptedLlm().add(echo_answers))  # a new process over the same database
    open_thread(page, site.url, "t-restart")
    [card] = page.locator(".card.question").all()
    assert card.locator(".question-text").inner_text() == "Which port?"
    assert "Answered: PostgreSQL" in page.locator(".msg.decision").first.inner_text()
    card.locator("input.answer").fill("5432")
    card.locator("input.answer").press("Enter")
    page.locator(".msg.assistant", has_text="Answers: PostgreSQL, 5432").wait_for()
    assert page.locator(".card").count() == 0


def test_fix_9_approving_withdraws_the_open_question_and_the_page_shows_it(
    site: Site, pages: Pages
) -> None:
    site.model.add(
        [call("update_plan_content", content=PLAN * 12)],
        list(QUESTION_AND_PLAN),
        [text("Implementing now.")],
    )
    page = pages.page()
    page.set_viewport_size({"width": 1280, "height": 600})
    open_thread(page, site.url, "t-withdraw")
    plan_and_say(page, "add a setting")
    approval = page.locator(".card.approval")
    approval.wait_for()
    assert page.locator(".card.question").count() == 1

    # Text typed while the cards wait goes to the first one (the question) as its answer
    # only when it is a question; here the user moves on to the plan instead. On the plan
    # card, edit/preview and an action bar that stays in view however long the plan is.
    approval.locator(".view-toggle button", has_text="Preview").click()
    assert approval.locator("textarea.editor").is_hidden()
    assert approval.locator(".plan-preview h3").first.inner_text() == "Plan"
    approval.locator(".view-toggle button", has_text="Edit").click()
    assert approval.locator("textarea.editor").is_visible()
    actions = approval.locator(".actions")
    assert actions.evaluate("n => getComputedStyle(n).position") == "sticky"
    approval.locator("h3").first.scroll_into_view_if_needed()
    box = page.locator("#messages").bounding_box()
    bar = actions.bounding_box()
    assert bar["y"] + bar["height"] <= box["y"] + box["height"] + 1  # Approve is in view
    shot(page, "03-question-beside-approval")
    assert_accessible(page, "a question beside the approval card")

    approval.locator("button.primary").click()
    page.locator(".msg.assistant", has_text="Implementing now.").wait_for()
    assert page.locator(".card").count() == 0
    chips = page.locator(".msg.decision.chip").all_inner_texts()
    assert any(c.startswith("Withdrawn") and "approved the plan" in c for c in chips), chips
    assert any(c.startswith("Approved the plan (revision 1)") for c in chips), chips
    shot(page, "04-withdrawn-and-approved-chips")
    assert_accessible(page, "decided chips")
    # After a reload the same story is read back from the thread.
    open_thread(page, site.url, "t-withdraw")
    decisions = page.locator(".msg.decision").all_inner_texts()
    assert any(d.startswith("Withdrawn") for d in decisions), decisions


def test_fix_10_text_typed_at_an_approval_becomes_its_note_and_cancel_first(
    site: Site, pages: Pages
) -> None:
    site.model.add(
        [call("update_plan_content", content=PLAN), call("exit_plan_mode")],
        [call("update_plan_content", content=PLAN + "3. Shorter\n"), call("exit_plan_mode")],
    )
    page = pages.page()
    open_thread(page, site.url, "t-note")
    plan_and_say(page, "add a setting")
    approval = page.locator(".card.approval")
    approval.wait_for()
    started = runs_started(page)
    say(page, "Make it shorter")
    note = approval.locator("textarea.note")
    assert note.input_value() == "Make it shorter"
    assert runs_started(page) == started  # no second turn
    assert approval.locator("button.danger").evaluate("n => n === document.activeElement")
    approval.locator("button.danger").click()
    page.locator(".card.approval h3", has_text="revision 2").wait_for()
    assert "Rejected revision 1: Make it shorter" in page.locator(".msg.decision.chip").inner_text()

    # Cancelling the request first: the composer's hint cancels the waiting card.
    page.locator("#reply-hint button", has_text="Cancel this request").click()
    page.locator(".card.approval h3", has_text="revision 3").wait_for(state="detached")
    wait_runs(page, 3)
    chips = page.locator(".msg.decision.chip").all_inner_texts()
    assert chips[-1].startswith("Rejected revision 2"), chips


def test_fix_9_the_plan_toggle_during_a_run_applies_at_the_next_step_and_stop_works(
    site: Site, pages: Pages
) -> None:
    site.model.add(
        [call("Inspect", path="src")], [call("Write", path="a", content="b")], [text("ok")]
    )
    page = pages.page()
    open_thread(page, site.url, "t-toggle")
    say(page, "do the task")
    assert site.gate.started.wait(30)
    assert page.locator("#stop").is_visible()
    page.locator("#mode-plan").click()
    page.locator("#banner", has_text="Entering plan mode").wait_for()
    assert page.locator("#mode-plan").get_attribute("aria-pressed") == "true"
    shot(page, "05-plan-selected-mid-run")
    site.gate.release.set()
    wait_runs(page, 1)
    refused = page.locator('.tool.refused[data-tool="Write"]')
    refused.wait_for()
    assert WRITES == []
    assert page.locator("#plan-status").inner_text() == "exploring (read-only)"
    page.locator("#timeline", has_text="Asked for plan mode from the next step").wait_for()

    # Stop: the run ends at once, is journaled, and the thread goes on.
    site.gate.started.clear()
    site.gate.release.clear()
    site.model.add([call("Inspect", path="src")], [text("never said")])
    say(page, "inspect again")
    assert site.gate.started.wait(30)
    page.locator("#stop").click()
    wait_runs(page, 2)
    assert "Stopped" in page.locator("#banner").inner_text()
    page.locator("#timeline", has_text="Stopped the run").wait_for()
    assert page.locator("#stop").is_hidden()
    assert page.locator(".msg.assistant", has_text="never said").count() == 0
    site.gate.release.set()
    shot(page, "06-stopped")


def test_fix_10_two_tabs_on_one_thread_stay_in_sync(site: Site, pages: Pages) -> None:
    site.model.add(list(TWO_QUESTIONS), echo_answers)
    context = pages.context()
    first, second = pages.page(context), pages.page(context)
    open_thread(first, site.url, "t-tabs")
    open_thread(second, site.url, "t-tabs")
    plan_and_say(first, "add persistence")
    second.locator(".card.question").nth(1).wait_for()  # the other tab shows the cards too
    second.locator(".card.question").first.locator("button.option").first.click()
    first.wait_for_function("() => document.querySelectorAll('.card.question').length === 1")
    first.locator(".card.question input.answer").fill("5432")
    first.locator(".card.question input.answer").press("Enter")
    second.locator(".msg.assistant", has_text="Answers: PostgreSQL, 5432").wait_for()
    assert second.locator(".card").count() == 0


def test_fix_10_a_stale_action_is_explained_in_plain_words(site: Site, pages: Pages) -> None:
    site.model.add(list(TWO_QUESTIONS), echo_answers)
    mine, theirs = pages.page(), pages.page()  # two browsers: no tab sync between them
    # ... and "mine" has lost its live stream (a dropped connection), so it still shows
    # the question the other browser answers meanwhile.
    mine.route("**/live", lambda route: route.abort())
    open_thread(mine, site.url, "t-stale")
    plan_and_say(mine, "add persistence")
    mine.locator(".card.question").nth(1).wait_for()
    open_thread(theirs, site.url, "t-stale")
    theirs.locator(".card.question").first.locator("button.option").first.click()
    wait_runs(theirs, 1)
    mine.locator(".card.question").first.locator("button.option").last.click()
    banner = mine.locator("#banner")
    banner.wait_for()
    words = banner.inner_text()
    assert "no longer waiting" in words and "Nothing was changed" in words
    assert not HEX_ID.search(words) and "STALE_RESUME" not in words
    mine.wait_for_function("() => document.querySelectorAll('.card.question').length === 1")
    shot(mine, "07-stale-in-plain-words")


def test_fix_10_unsent_text_is_kept_with_a_retry_when_the_server_is_down(
    site: Site, pages: Pages
) -> None:
    site.model.add([text("Got it.")])
    page = pages.page()
    open_thread(page, site.url, "t-down")
    port = site.server.port
    site.stop()
    say(page, "Please keep this")
    banner = page.locator("#banner")
    banner.wait_for()
    assert "Could not reach the server" in banner.inner_text()
    assert page.locator("#input").input_value() == "Please keep this"
    assert page.locator(".msg.user").count() == 0
    shot(page, "08-kept-with-retry")
    # The draft survives a reload of the page too.
    assert (
        page.evaluate("() => localStorage.getItem('plangate.draft.t-down')") == "Please keep this"
    )

    # The server comes back on the same address; Retry sends the kept text.
    runner = build_runner(site.agent(), database_url=f"sqlite:///{site.database}", app_name="web")
    server = ServerThread(create_app(runner=runner, require_token=False, token=None), port)
    server.start()
    try:
        banner.locator("button", has_text="Retry").click()
        page.locator(".msg.assistant", has_text="Got it.").wait_for()
        assert page.locator(".msg.user").all_inner_texts() == ["Please keep this"]
        assert page.locator("#input").input_value() == ""
        assert page.evaluate("() => localStorage.getItem('plangate.draft.t-down')") is None
    finally:
        server.stop()


def test_fix_10_the_thread_list_reopens_any_thread(site: Site, pages: Pages) -> None:
    site.model.add([text("first answer")], [text("second answer")])
    page = pages.page()
    open_thread(page, site.url, "t-one")
    say(page, "the first task")
    wait_runs(page, 1)
    page.locator("#new-thread").click()
    say(page, "the second task")
    wait_runs(page, 2)
    page.locator("#threads-button").click()
    items = page.locator(".thread-item")
    items.nth(1).wait_for()
    titles = [i.locator(".thread-title").inner_text() for i in items.all()]
    assert titles == ["the second task", "the first task"]
    assert items.first.get_attribute("aria-current") == "true"
    shot(page, "09-thread-list")
    assert_accessible(page, "thread list")
    items.nth(1).click()
    page.locator(".msg.assistant", has_text="first answer").wait_for()
    assert page.locator(".msg.assistant", has_text="second answer").count() == 0
    assert "t-one" in page.url
    assert page.locator("#thread-list").is_hidden()
