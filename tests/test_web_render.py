"""What the page renders for people, in headless Chromium against the agent of
``plangate serve`` and the offline demo model: Markdown and diffs through the vendored
libraries, tool results (diffs, terminal blocks, query results with a chart and downloads),
the layout from phone to desktop, and accessibility (axe-core, keyboard only).

Screenshots go to ``test-artifacts/web/`` (git-ignored).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plangate.agent.workspace import copy_sample_workspace
from web_support import ARTIFACTS, demo_server, headless_chromium

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "src" / "plangate" / "web" / "static"
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
TASK = "Fix the failing test"
TIMEOUT = 30_000
ALL_DONE = re.compile(r"^(\d+)/\1 done$")
VIEWPORTS = [(390, 844), (820, 1180), (1280, 720), (1440, 900)]


# ---------------------------------------------------------------- the package's vendor files


def test_vendored_libraries_ship_with_versions_and_licences() -> None:
    manifest = json.loads((STATIC / "vendor" / "manifest.json").read_text())
    assert set(manifest) == {
        "markdown-it",
        "dompurify",
        "diff",
        "vega",
        "vega-lite",
        "vega-embed",
        "vega-interpreter",
    }
    majors = {"markdown-it": 15, "dompurify": 3, "diff": 9, "vega": 6, "vega-lite": 6}
    for name, entry in manifest.items():
        assert (STATIC / "vendor" / entry["file"]).stat().st_size > 1000, name
        assert "Copyright" in (STATIC / "vendor" / entry["licenseFile"]).read_text(), name
        if name in majors:
            assert int(entry["version"].split(".")[0]) == majors[name], name
    assert "axe-core 4." in (AXE.parent / "VERSION.txt").read_text()
    # No CDN: the page names only its own files.
    for page in (
        "index.html",
        "app.js",
        "render.js",
        "scope.js",
        "app.css",
        "cards.css",
        "render.css",
    ):
        assert not re.search(r"https?://", (STATIC / page).read_text()), page


# ---------------------------------------------------------------- browser fixtures


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with headless_chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with demo_server(tmp_path_factory.mktemp("web"), tmp_path_factory.mktemp("data")) as server:
        yield server


class Page:
    """A page plus what went wrong in it: script errors, and console errors (CSP
    violations are reported there)."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.page = context.new_page()
        self.page.set_default_timeout(TIMEOUT)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on(
            "console",
            lambda m: (
                m.type == "error" and "status of 404" not in m.text and self.errors.append(m.text)
            ),
        )


def new_page(browser: Any, server: Any, *, csp: bool, width: int = 1440, height: int = 900) -> Page:
    copy_sample_workspace(server.workspace)  # every test starts from the buggy sample
    # With csp=True the page runs under its real Content-Security-Policy; Playwright's
    # locators work there, its string predicates (wait_for_function) need bypass_csp.
    context = browser.new_context(
        viewport={"width": width, "height": height}, bypass_csp=not csp, accept_downloads=True
    )
    return Page(context)


@pytest.fixture
def strict(browser: Any, server: Any) -> Iterator[Any]:
    page = new_page(browser, server, csp=True)
    yield page.page
    page.context.close()
    assert page.errors == [], page.errors


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    page = new_page(browser, server, csp=False)
    yield page.page
    page.context.close()
    assert page.errors == [], page.errors


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def wait_loaded(page: Any) -> None:
    """Until the page has loaded its thread (polled with evaluate, which works under the
    page's CSP where Playwright's wait_for_function does not)."""
    for _ in range(600):
        if page.evaluate("() => window.__events.some(e => e.type === 'THREAD_LOADED')"):
            return
        page.wait_for_timeout(50)
    raise AssertionError("the page did not load its thread")


def open_page(page: Any, url: str) -> None:
    page.goto(url + "/")
    wait_loaded(page)


def open_new_thread(page: Any, url: str) -> None:
    open_page(page, url)
    page.locator("#new-thread").click()
    page.locator("#empty").wait_for()


def say(page: Any, text: str) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")


def run_plan_to_approval(page: Any, url: str) -> Any:
    open_new_thread(page, url)
    page.locator("#mode-plan").click()
    say(page, TASK)
    page.locator(".card.question button.option").first.click()
    approval = page.locator(".card.approval")
    approval.wait_for()
    return approval


def approve_and_finish(page: Any) -> None:
    page.locator(".card.approval button.primary").click()
    page.locator('.tool.ok[data-tool="Edit"] .tool-view .diff').wait_for()
    page.locator('.tool[data-tool="Bash"] .term-exit', has_text="exit 0").last.wait_for()
    page.locator("#todo-count", has_text=ALL_DONE).wait_for()
    page.locator("#send:not([disabled])").wait_for()


# ---------------------------------------------------------------- Markdown and sanitizing


ATTACK = """# Title

| region | revenue |
|---|--:|
| North | 97,979.81 |
| <b>East</b> | 95,016.68 |

<img src=x onerror="window.__xss = 1">
<script>window.__xss = 2</script>
[click](javascript:window.__xss=3) and ![pic](http://example.com/t.png)
<a href="#" onclick="window.__xss = 4">raw link</a> and `code` and **bold**

- [x] done step
- [ ] open step
"""


def test_markdown_tables_render_and_model_html_is_sanitized(strict: Any, server: Any) -> None:
    open_page(strict, server.url)
    html = strict.evaluate(
        "md => { const box = document.createElement('div'); box.className = 'markdown';"
        " box.id = 'probe'; box.innerHTML = window.plangateRender.markdownHtml(md);"
        " document.body.append(box); return box.innerHTML; }",
        ATTACK,
    )
    probe = strict.locator("#probe")
    assert probe.locator("h3").inner_text() == "Title"  # headings start below the page's
    table = probe.locator("table")
    assert table.locator("th").all_inner_texts() == ["region", "revenue"]
    assert table.locator("tbody tr").count() == 2
    assert "<b>East</b>" in table.locator("tbody tr").nth(1).inner_text()  # text, not markup
    # Raw HTML stays text: no element, attribute or link of it survives.
    assert probe.locator("script, img, b, [onerror], [onclick], a[href^='javascript']").count() == 0
    assert "&lt;script&gt;" in html and "<script" not in html
    assert "[click](javascript:" in probe.inner_text()  # not a link
    assert probe.locator("a", has_text="pic").get_attribute("href") == "http://example.com/t.png"
    assert probe.locator("a", has_text="pic").get_attribute("rel") == "noopener noreferrer"
    assert probe.locator("code").inner_text() == "code"
    assert probe.locator("li").all_inner_texts() == ["☑ done step", "☐ open step"]
    assert strict.evaluate("() => window.__xss") is None


# ---------------------------------------------------------------- chart choice and CSV

SHAPES = {
    "category+number": (
        {"columns": ["region", "revenue"], "column_types": ["VARCHAR", "DOUBLE"],
         "rows": [{"region": "North", "revenue": 3.5}, {"region": "East", "revenue": 2}]},
        "bar",
    ),
    "year-month+category+number": (
        {"columns": ["region", "month", "revenue"], "column_types": ["VARCHAR", "VARCHAR", "DOUBLE"],
         "rows": [{"region": r, "month": m, "revenue": 1.0} for r in ("N", "S") for m in ("2026-07", "2026-08")]},
        "line",
    ),
    "date+number": (
        {"columns": ["day", "orders"], "column_types": ["DATE", "BIGINT"],
         "rows": [{"day": "2026-07-01", "orders": 3}, {"day": "2026-07-02", "orders": 5}]},
        "line",
    ),
    "untyped values": (
        {"columns": ["k", "v"], "rows": [{"k": "a", "v": 1}, {"k": "b", "v": 2}]},
        "bar",
    ),
    "text only": (
        {"columns": ["a", "b"], "column_types": ["VARCHAR", "VARCHAR"],
         "rows": [{"a": "x", "b": "y"}, {"a": "z", "b": "w"}]},
        None,
    ),
    "one row": (
        {"columns": ["region", "revenue"], "column_types": ["VARCHAR", "DOUBLE"],
         "rows": [{"region": "North", "revenue": 3.5}]},
        None,
    ),
    "cut off": (
        {"columns": ["region", "revenue"], "column_types": ["VARCHAR", "DOUBLE"], "truncated": True,
         "rows": [{"region": "North", "revenue": 3.5}, {"region": "East", "revenue": 2}]},
        None,
    ),
    "repeated categories a chart would merge": (
        {"columns": ["region", "revenue"], "column_types": ["VARCHAR", "DOUBLE"],
         "rows": [{"region": "North", "revenue": 3.5}, {"region": "North", "revenue": 2}]},
        None,
    ),
    "hostile shapes": ({"columns": "nope", "rows": [None, 1, "x"]}, None),
}  # fmt: skip


def test_the_chart_follows_the_result_shape_and_csv_is_safe(strict: Any, server: Any) -> None:
    open_page(strict, server.url)
    marks = strict.evaluate(
        "shapes => Object.fromEntries(Object.entries(shapes).map(([k, [r]]) =>"
        " [k, (window.plangateRender.chartFor(r) || {mark: null}).mark]))",
        SHAPES,
    )
    assert marks == {name: mark for name, (_, mark) in SHAPES.items()}
    spec = strict.evaluate(
        "r => window.plangateRender.chartFor(r).spec", SHAPES["year-month+category+number"][0]
    )
    assert spec["encoding"]["color"]["field"] == "region"
    assert spec["encoding"]["x"]["field"] == "month"
    text = strict.evaluate(
        "() => window.plangateRender.toCsv(['name', 'note'], ["
        "{name: 'a,b', note: 'say \"hi\"'}, {name: '=HYPERLINK(1)', note: null}, {name: -3, note: 'x'}])"
    )
    assert text.endswith("\r\n")
    assert list(csv.reader(io.StringIO(text))) == [
        ["name", "note"],
        ["a,b", 'say "hi"'],
        ["'=HYPERLINK(1)", ""],  # a spreadsheet would run it as a formula
        ["-3", "x"],
    ]


# ---------------------------------------------------------------- tool results in a real run


def test_a_query_result_is_a_table_with_a_chart_and_downloads_under_the_csp(
    strict: Any, server: Any
) -> None:
    open_new_thread(strict, server.url)
    say(strict, "revenue by region last quarter")
    strict.locator("#banner", has_text="DATA_ACTIONS_REJECTED_BY_PROTOCOL").wait_for()
    say(strict, "try again")
    result = strict.locator('.tool[data-tool="run_sql_readonly"] .data-result[data-chart="ready"]')
    result.wait_for()
    assert result.locator(".chart").get_attribute("data-mark") == "bar"
    assert result.locator(".chart").get_attribute("aria-label") == "Bar chart of revenue by region"
    assert result.locator(".chart canvas").count() == 1
    table = result.locator("table.result-table")
    assert table.locator("th").all_inner_texts() == ["region", "revenue"]
    assert table.locator("tbody tr").count() == 5
    assert table.locator("tbody tr").first.locator("td").all_inner_texts() == ["North", "97,979.81"]
    result.scroll_into_view_if_needed()
    shot(strict, "20-query-result-chart")

    with strict.expect_download() as download:
        result.locator("button", has_text="Download CSV").click()
    assert download.value.suggested_filename.endswith(".csv")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert rows[0] == ["region", "revenue"] and rows[1] == ["North", "97979.81"] and len(rows) == 6
    with strict.expect_download() as download:
        result.locator("button", has_text="Download PNG").click()
    assert download.value.suggested_filename.endswith(".png")
    assert Path(download.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The refinement by month is a line per region.
    say(strict, "break it down by month")
    line = strict.locator('.data-result[data-chart="ready"] .chart[data-mark="line"]')
    line.wait_for()
    assert line.get_attribute("aria-label") == "Line chart of revenue by month and region"


def test_file_edits_are_diffs_and_shell_output_is_a_terminal(page: Any, server: Any) -> None:
    run_plan_to_approval(page, server.url)
    approve_and_finish(page)
    edit = page.locator('.tool[data-tool="Edit"]').last
    assert edit.locator(".tool-note").inner_text() == "edited inventory/stock.py"
    assert edit.locator(".file-path").inner_text() == "inventory/stock.py"
    added = edit.locator(".diff-line.add").all_inner_texts()
    removed = edit.locator(".diff-line.del").all_inner_texts()
    assert any("if quantity > on_hand:" in line for line in added), added
    assert any("if quantity > on_hand + 1:" in line for line in removed), removed
    assert "replacement(s)" not in edit.inner_text()
    assert edit.locator(".tool-json").first.is_hidden()  # the raw JSON stays folded
    bash = page.locator('.tool[data-tool="Bash"]').last
    assert "pytest" in bash.locator(".term-cmd").inner_text()
    assert "5 passed" in bash.locator(".term-out").inner_text()
    assert bash.locator(".term-exit").inner_text() == "exit 0"
    edit.scroll_into_view_if_needed()
    shot(page, "21-edit-diff-and-terminal")

    # A reload renders the same views from the stored thread.
    page.reload()
    page.locator('.tool[data-tool="Edit"] .diff-line.add').first.wait_for()
    assert page.locator('.tool[data-tool="Bash"] .term-exit').last.inner_text() == "exit 0"


# ---------------------------------------------------------------- layout


def assert_fits(page: Any, width: int, height: int, what: str) -> None:
    overflow = page.evaluate(
        """() => {
          const root = document.documentElement;
          const wide = [...document.querySelectorAll('body *')].filter(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > root.clientWidth + 1 && !e.closest('.sr-only');
          }).map(e => `${e.tagName}.${e.className} right=${Math.round(e.getBoundingClientRect().right)}`);
          return {scroll: root.scrollWidth, client: root.clientWidth, wide: wide.slice(0, 5)};
        }"""
    )
    assert overflow["scroll"] <= overflow["client"], (what, overflow)
    assert overflow["wide"] == [], (what, overflow)
    for selector in ["#input", "#send", ".card button"]:
        for item in page.locator(selector).all():
            if not item.is_visible():
                continue
            item.scroll_into_view_if_needed()
            box = item.bounding_box()
            assert box is not None
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (what, selector, box)
            assert box["y"] >= 0 and box["y"] + box["height"] <= height + 0.5, (what, selector, box)


def test_the_page_fits_every_screen_from_phone_to_desktop(page: Any, server: Any) -> None:
    open_page(page, server.url)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        assert_fits(page, width, height, f"empty {width}")
        shot(page, f"30-empty-{width}x{height}")
    page.set_viewport_size({"width": 1440, "height": 900})
    run_plan_to_approval(page, server.url)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        assert_fits(page, width, height, f"approval card {width}")
        # The composer is on screen without scrolling the page.
        assert page.locator("#send").bounding_box()["y"] < height  # type: ignore[index]
        shot(page, f"31-approval-card-{width}x{height}")
    approve_and_finish(page)
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        assert_fits(page, width, height, f"finished run {width}")
        shot(page, f"32-finished-run-{width}x{height}")
    # The side panels stack under the chat on a phone instead of squeezing beside it.
    page.set_viewport_size({"width": 390, "height": 844})
    chat = page.locator(".chat").bounding_box()
    plan = page.locator("#plan-panel").bounding_box()
    assert chat and plan and plan["y"] >= chat["y"] + chat["height"] and plan["width"] > 300


# ---------------------------------------------------------------- accessibility


def axe_violations(page: Any) -> list[dict[str, Any]]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


def assert_accessible(page: Any, screen: str) -> None:
    violations = axe_violations(page)
    assert violations == [], (screen, violations)


def test_axe_finds_no_serious_or_critical_violations_on_the_main_screens(
    page: Any, server: Any
) -> None:
    open_page(page, server.url)
    assert_accessible(page, "empty screen")
    run_plan_to_approval(page, server.url)
    assert_accessible(page, "waiting approval card")
    approve_and_finish(page)
    assert_accessible(page, "finished run with tool blocks")
    say(page, "revenue by region last quarter")
    page.locator("#banner", has_text="DATA_ACTIONS_REJECTED_BY_PROTOCOL").wait_for()
    say(page, "try again")
    page.locator('.data-result[data-chart="ready"]').wait_for()
    page.locator("#send:not([disabled])").wait_for()
    assert_accessible(page, "query result with a chart")
    for width, height in VIEWPORTS[:2]:
        page.set_viewport_size({"width": width, "height": height})
        assert_accessible(page, f"phone/tablet {width}")


def focusable_names(page: Any, scope: str) -> list[str]:
    return page.evaluate(
        """scope => [...document.querySelector(scope).querySelectorAll(
             'a[href], button, summary, input, textarea, select, [tabindex]:not([tabindex="-1"])')]
           .filter(e => !e.disabled && e.getClientRects().length)
           .map(e => (e.getAttribute('aria-label') || e.textContent).replace(/\\s+/g, ' ').trim())""",
        scope,
    )


def test_each_tab_stop_in_the_chat_says_what_it_opens(page: Any, server: Any) -> None:
    run_plan_to_approval(page, server.url)
    approve_and_finish(page)
    names = focusable_names(page, "#messages")
    assert len([n for n in names if n.startswith("raw call")]) >= 8
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert "raw call #1 of enter_plan_mode" in names or any(
        re.match(r"raw call #\d+ of Edit inventory/stock\.py", n) for n in names
    )


def focused(page: Any) -> str:
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return e ? `${e.id || ''}|${(e.textContent || '').trim().slice(0, 200)}` : ''; }"
    )


def tab_to(page: Any, want: str, *, back: bool = False, limit: int = 60) -> None:
    """Press Tab (or Shift+Tab) until the focused element's id or text is ``want``."""
    seen = []
    for _ in range(limit):
        seen.append(focused(page))
        ident, text = focused(page).split("|", 1)
        if want == ident or text.startswith(want):
            return
        page.keyboard.press("Shift+Tab" if back else "Tab")
    raise AssertionError(f"{want!r} is not reachable with the keyboard; went {seen}")


def test_the_whole_demo_with_the_keyboard_only(page: Any, server: Any) -> None:
    open_page(page, server.url)
    page.keyboard.press("Tab")
    tab_to(page, "new-thread")
    page.keyboard.press("Enter")
    assert focused(page).startswith("input|")  # a new thread puts the cursor in the composer
    tab_to(page, "mode-plan", back=True)
    page.keyboard.press("Space")
    assert page.locator("#mode-plan").get_attribute("aria-pressed") == "true"
    tab_to(page, "input")
    page.keyboard.type(TASK)
    page.keyboard.press("Enter")
    question = page.locator(".card.question")
    question.wait_for()
    page.locator(".card.question button:not([disabled])").first.wait_for()
    option = question.locator("button.option").first.inner_text()
    tab_to(page, option)
    page.keyboard.press("Enter")
    page.locator(".card.approval button.primary:not([disabled])").wait_for()
    tab_to(page, "Approve")
    shot(page, "40-keyboard-approve-focused")
    page.keyboard.press("Enter")
    page.locator("#todo-count", has_text=ALL_DONE).wait_for()
    page.locator('.tool[data-tool="Bash"] .term-exit', has_text="exit 0").last.wait_for()
    assert "if quantity > on_hand:\n" in (server.workspace / "inventory/stock.py").read_text()
    # The result is readable by keyboard too: the raw call of the edit opens with Enter.
    tab_to(page, "input")
    tab_to(page, "raw call", back=True)  # the nearest tool block above the composer
    page.keyboard.press("Enter")
    assert page.locator("details[open]").count() == 1
    shot(page, "41-keyboard-finished")
