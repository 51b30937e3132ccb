"""What the reviewer sees is what is approved: hidden characters made visible, and scope
entries that could hide anything refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import Harness, tool_results
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.workspace import copy_sample_workspace
from plangate.models.scripted import ScriptedLlm, call, text
from plangate.plan.scope import ScopeError, parse_scope
from plangate.plan.visible import hidden_characters, visible_text

HIDDEN_ECHO = "python -m pytest" + "\u00a0" * 150 + ";echo${IFS}pwned"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("clear\x1b[2J", "clear\\x1b[2J"),
        ("bell\x07 cr\r", "bell\\x07 cr\\x0d"),
        ("c1 \x9b31m", "c1 \\x9b31m"),
        ("no network \u202ekrowten", "no network \\u202ekrowten"),
        ("isolate \u2066x\u2069", "isolate \\u2066x\\u2069"),
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("nbsp\u00a0thin\u2009", "nbsp\\u00a0thin\\u2009"),
        ("tag \U000e0041", "tag \\U000e0041"),
        ("line\u2028sep", "line\\u2028sep"),
    ],
)
def test_hidden_characters_become_markers(raw: str, shown: str) -> None:
    assert visible_text(raw) == shown


def test_ordinary_text_is_unchanged() -> None:
    plain = "# Plan\n\n1. Fix\tthe `stock` 修复　库存 — café ✔\n"
    assert visible_text(plain) == plain
    assert visible_text("a\r\nb") == "a\nb"
    assert visible_text("a\nb\tc", keep_layout=False) == "a\\x0ab\\x09c"
    assert hidden_characters("a\u00a0\u00a0b\u202e") == ("\\u00a0", "\\u202e")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (HIDDEN_ECHO, "cannot see"),
        ("python -m pytest\x1b[8m; rm -rf .", "cannot see"),
        ("pytest \u202e", "cannot see"),
        ("pytest\u200b", "cannot see"),
        ("python -m pytest; echo hi", "operator ';'"),
        ("python -m pytest && ruff check", "operator '&'"),
        ("python -m pytest || true", "operator '|'"),
        ("git log | sh", "operator '|'"),
        ("pytest > out.txt", "operator '>'"),
        ("pytest < in.txt", "operator '<'"),
        ("echo $(id)", "substitution"),
        ("echo `id`", "substitution"),
        ('echo "$(id)"', "substitution"),
        ("echo${IFS}x", "substitution"),
        ("pytest\\;echo", "backslash"),
    ],
)
def test_a_command_entry_that_hides_or_chains_is_refused_naming_it(entry: str, says: str) -> None:
    with pytest.raises(ScopeError, match="command entry `") as raised:
        parse_scope({"commands": [entry]})
    assert says in str(raised.value)


def test_one_simple_command_with_quoted_arguments_is_an_entry() -> None:
    entries = ["python -m pytest", "grep -E 'a|b;c' src", 'pytest -k "a and b"', "ruff check ."]
    scope = parse_scope({"commands": entries})
    assert scope is not None and scope.commands == tuple(entries)


def test_a_path_entry_with_hidden_characters_is_refused() -> None:
    for entry in ("src/a\u202etxt.py", "docs\u00a0/x.md", "a\u200b.py"):
        with pytest.raises(ScopeError, match="write entry `"):
            parse_scope({"write": [entry]})


async def test_the_model_cannot_put_a_hidden_command_into_its_scope(tmp_path: Path) -> None:
    workspace = copy_sample_workspace(tmp_path / "ws")
    model = ScriptedLlm()
    harness = Harness(build_coding_agent(workspace, model), f"sqlite:///{tmp_path / 'p.db'}")
    await harness.start({"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. Run the tests")],
        [call("update_plan_content", content="", scope={"commands": [HIDDEN_ECHO]})],
        [call("update_plan_content", content="", scope={"commands": ["pytest; echo x"]})],
        [text("done")],
    )
    results = tool_results(await harness.send("plan"), "update_plan_content")
    assert [r.get("code") for r in results[1:]] == ["INVALID_ARGS", "INVALID_ARGS"]
    assert "\\u00a0" in results[1]["message"] and "operator ';'" in results[2]["message"]
    record = await harness.record()
    assert record is not None and record.scope is None
