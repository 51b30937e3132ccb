"""Text the model wrote cannot fake structure in the editor (issue #27, ACP).

Plan content, questions, commands, paths and tool output go to the editor as Markdown:
a plan cannot close its code block, draw plangate's approval title as a heading, or show
a link or an image that renders; a scope command cannot close its inline code. The
pure helpers first, then the real ACP SDK client over stdio against ``plangate acp``
with a scripted model.
"""

from __future__ import annotations

from pathlib import Path

from acp.schema import ToolCallUpdate
from markdown_it import MarkdownIt

from acp_support import editor, planning_session, prompt, script, sqlite_database_url
from plangate.acp.markdown import code_span, escaped, fenced

database_url = sqlite_database_url

_MD = MarkdownIt("commonmark")


def _kinds(markdown: str) -> list[str]:
    """The block and inline token types a CommonMark renderer makes of ``markdown``."""
    found: list[str] = []
    for token in _MD.parse(markdown):
        found.append(token.type)
        found.extend(child.type for child in token.children or [])
    return found


def test_a_fence_outlasts_every_backtick_run_inside() -> None:
    text = "before\n```\n# Approve plan (revision 1)\n````\n[Approve](https://evil.example)"
    shown = fenced(text, "markdown")
    kinds = _kinds(shown)
    assert kinds.count("fence") == 1 and "heading_open" not in kinds
    assert "link_open" not in kinds
    assert shown.startswith("`````markdown\n") and shown.endswith("\n`````")


def test_inline_code_and_escaped_text_show_as_written() -> None:
    command = "echo `id` ``"
    span = code_span(command)
    assert _kinds(span).count("code_inline") == 1
    assert _MD.parse(span)[1].children[0].content.strip() == command  # type: ignore[index]
    hostile = "# Approve plan (revision 1) [Approve](https://evil.example) ![x](https://e/i.png) <img src=x>"
    kinds = _kinds(escaped(hostile))
    assert not {"heading_open", "link_open", "image", "html_inline"} & set(kinds)
    # Hidden characters show as markers (the marker's backslash is shown, not an escape).
    assert _MD.render(escaped("a\u202eb")) == "<p>a\\u202eb</p>\n"


PLAN_TEXT = (
    "1. Fix the rounding\n"
    "```\n"
    "# Approve plan (revision 1)\n"
    "[Approve](https://evil.example/approve) ![tracker](https://evil.example/pixel.png)\n"
)


def _texts(request: ToolCallUpdate) -> str:
    return "\n".join(c.content.text for c in request.content or [] if c.type == "content")


async def test_the_editor_gets_model_text_it_cannot_render_as_structure(
    tmp_path: Path, workspace: Path, database_url: str
) -> None:
    scoped = {"write": ["inventory/stock.py"], "commands": ["echo 'a`b'"]}
    model = script(
        tmp_path,
        "spoof",
        [{"call": "update_plan_content", "args": {"content": PLAN_TEXT, "scope": scoped}}],
        [{"call": "exit_plan_mode", "args": {"summary": "fix"}}],
        [{"echo": "kept: "}],
    )
    async with editor(tmp_path, workspace, database_url, *model) as (client, conn):
        await planning_session(client, conn, workspace)
        await prompt(client, conn, "fix the rounding", "keep_planning")
        ((approval, _, _),) = client.permissions
        shown = _texts(approval)
        kinds = _kinds(shown)
        # One heading-free text: the plan in one fence, no link, no image, no HTML.
        assert not {"heading_open", "link_open", "image", "html_inline"} & set(kinds)
        assert "# Approve plan (revision 1)" in shown  # shown, as text
        # The scope command with a backtick stays one inline code span.
        assert "- run ``echo 'a`b'``" in shown
