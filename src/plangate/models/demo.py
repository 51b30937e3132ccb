"""The offline demo model: a deterministic script over the sample workspace.

It is not a language model. It reads the conversation (tool results, the plan prompt)
and plays the next step of one scripted task -- fixing the sample project's failing
test -- so the whole Plan Mode flow can be shown with no API key. Every text it writes
starts with ``[demo]`` so nobody mistakes it for an LLM.

It tells the truth about what it did: it ticks only the todos it carried out (a step a
reviewer added stays open, and the report says so), a rejection note becomes a step of
the revised plan, a failed edit stops the run, and its hints name what the surface it
runs on offers (``surface``: ``terminal``, ``web`` or ``editor``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Any, Literal

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from plangate.errors import ErrorCode, error_code, is_error
from plangate.models.demo_data import failure_text, next_data_step
from plangate.plan.prompts import HOST_NOTE_PREFIX, PLAN_MODE_MARKER
from plangate.plan.replies import KEEP_PLANNING_NOTE

__all__ = ["DEMO_LABEL", "SURFACES", "DemoModel"]

DEMO_LABEL = "[demo]"

FIX = {
    "path": "inventory/stock.py",
    "old_string": "        if quantity > on_hand + 1:\n",
    "new_string": "        if quantity > on_hand:\n",
}
QUESTION = "When a reservation asks for more than is on hand, what should reserve() do?"
OPTIONS = ["Raise an error and leave the stock unchanged", "Allow backorders (negative stock)"]
NO_ANSWER = "(no answer)"
"""What a surface sends for a question the user skipped."""
REVISE_QUESTION = "What should change in the plan before I submit it again?"
TEST_COMMAND = "python -m pytest -q"
FIX_STEP = "Change the guard in `inventory/stock.py` to `quantity > on_hand`"
TEST_STEP = f"Run the test suite with `{TEST_COMMAND}`"
SCOPE = {"write": [FIX["path"]], "commands": ["python -m pytest"]}
"""What the plan may do once approved: the one file it fixes and the test run."""

SURFACES = ("terminal", "web", "editor")
_RETRY_HINTS = {
    "terminal": "type /plan and the task to try again",
    "web": "switch Plan mode on and send the task again",
    "editor": "switch the mode to Plan (or type /plan and the task) to try again",
}
_RETRY_HINT = "turn Plan Mode on and send the task again"


def _plan(answer: str) -> str:
    return f"""# Fix over-reservation in `Stock.reserve`

## Context
`tests/test_stock.py::test_cannot_reserve_more_than_on_hand` fails: `reserve()` checks
`quantity > on_hand + 1`, so one unit more than is on hand can be reserved and the
stock goes negative. Decision from the user: {answer}.

## Steps
1. {FIX_STEP}
2. {TEST_STEP}

## Verification
All tests in `tests/` pass; no other file changes.
"""


class DemoModel(BaseLlm):
    model: str = "plangate-demo"
    surface: Literal["terminal", "web", "editor"] | None = None
    """Where the demo runs (``terminal``, ``web``, ``editor``): its hints name what that
    surface offers. None gives hints that fit any surface."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = _next_step(llm_request, _RETRY_HINTS.get(self.surface or "", _RETRY_HINT))
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def _say(text: str) -> types.Part:
    return types.Part(text=f"{DEMO_LABEL} {text}")


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def _history(request: LlmRequest) -> tuple[str, list[tuple[str, dict[str, Any], dict[str, Any]]]]:
    """The latest user text, and the tool calls since then with their results."""
    user_text = ""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    done: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for content in request.contents:
        for part in content.parts or []:
            if part.text and part.text.startswith(HOST_NOTE_PREFIX):
                continue  # plangate's note to the model, not the user's message
            if part.text and content.role == "user":
                user_text, done = part.text, []
            elif part.function_call is not None:
                calls[part.function_call.id or ""] = (
                    part.function_call.name or "",
                    dict(part.function_call.args or {}),
                )
            elif part.function_response is not None:
                name, args = calls.get(
                    part.function_response.id or "", (part.function_response.name or "", {})
                )
                done.append((name, args, dict(part.function_response.response or {})))
    return user_text, done


def _system(request: LlmRequest) -> str:
    instruction = request.config.system_instruction if request.config else None
    return instruction if isinstance(instruction, str) else str(instruction or "")


def _next_step(request: LlmRequest, retry_hint: str = _RETRY_HINT) -> list[types.Part]:
    if (parts := next_data_step(request)) is not None:
        return parts
    user_text, done = _history(request)
    planning = PLAN_MODE_MARKER in _system(request)
    if not done:
        if planning:
            return [
                _say("Plan Mode is on. Exploring the project first."),
                _call("Glob", pattern="**/*.py"),
            ]
        if "approved plan" in _system(request).lower():
            return [
                _say(
                    "The approved plan is still open: its todos show what is done and what "
                    "is left (this demo scripts only the fix and the test run). Anything else?"
                )
            ]
        return [
            _say("This touches code and tests, so I will plan first."),
            _call("enter_plan_mode", objective=(user_text or "Fix the failing test")[:200]),
        ]
    name, args, result = done[-1]
    status = result.get("status")
    code = error_code(result)
    error = failure_text(result) if is_error(result) else ""
    if name == "enter_plan_mode":
        if status == "approved":
            return [_call("Glob", pattern="**/*.py")]
        return [_say(f"Understood, no plan. This demo only shows the planned path; {retry_hint}.")]
    if name == "Glob":
        return [_call("Read", path="inventory/stock.py")]
    if name == "Read":
        grep = _call("Bash", command="grep -n 'on_hand' inventory/stock.py")
        if FIX["old_string"].strip() in str(result.get("content", "")):
            return [grep]
        # Said up front: the walk-through goes on to show the gate, but the fix will find
        # nothing to change (a workspace shared with an earlier conversation, say).
        return [
            _say(
                "The guard in `inventory/stock.py` is already fixed in this workspace (it may "
                "be shared with an earlier conversation). I will still walk through the "
                "planned path to show the gate, but the fix will have nothing to change."
            ),
            grep,
        ]
    if name == "Bash" and planning:
        return [
            _say("Found it: the guard is off by one. Trying the fix right away to show the gate:"),
            _call("Edit", **FIX),
        ]
    if name == "Edit" and code is ErrorCode.PLAN_MODE_GATE:
        return [
            _say("Refused by the plan gate, as it should be. One question before I plan:"),
            _call("ask_user_question", question=QUESTION, options=OPTIONS),
        ]
    if name == "ask_user_question":
        answer = str(result.get("answer") or "")
        if args.get("question") == REVISE_QUESTION:
            return _revise(done, answer)
        return [
            _call(
                "update_plan_content",
                content=_plan(answer or OPTIONS[0]),
                mode="replace",
                scope=SCOPE,
            )
        ]
    if name == "update_plan_content":
        if error:
            return [_say(f"Could not write the plan: {error}")]
        return [_call("exit_plan_mode", summary="Fix the off-by-one guard in Stock.reserve")]
    if name == "exit_plan_mode":
        if status == "approved":
            todos = result.get("suggested_todos") or [{"content": "Apply the fix"}]
            items = [
                {"content": t["content"], "status": "in_progress" if i == 0 else "pending"}
                for i, t in enumerate(todos)
            ]
            return [_say("Approved. Implementing."), _call("todo_write", todos=items)]
        if status == "rejected":
            note = str(result.get("reviewer_note") or "").strip()
            if not note or note == KEEP_PLANNING_NOTE:
                return [_call("ask_user_question", question=REVISE_QUESTION)]
            return _revise(done, note)
        if error:
            return [_say(f"The plan was not submitted: {error}")]
        return [_say("The plan request was withdrawn; I will not act on it.")]
    if name == "todo_write":
        if any(n == "Bash" and a.get("command") == TEST_COMMAND for n, a, _ in done):
            return [_say(_report(result.get("todos") or [], done))]
        return [_call("Edit", **FIX)]
    if name == "Edit":
        if result.get("code") in _REFUSED_BY_USER:
            # The reviewer said no to this write (an edit review, or a scope that does not
            # name the file): say so, rather than blame the file.
            return [
                _say(
                    f"You refused the edit of `{FIX['path']}`, so the fix is not applied: "
                    "nothing was changed and nothing was marked done."
                )
            ]
        if error:
            # Never "Done" after a failed edit: the file is not what the plan was made on.
            return [
                _say(
                    f"The fix could not be applied: {error}. `inventory/stock.py` is not what "
                    "the plan was made on (was the fix applied already?); stopping so you can "
                    "look. Nothing was marked done."
                )
            ]
        return [_call("Bash", command=TEST_COMMAND)]
    if name == "Bash":
        if result.get("exit_code") == 0:
            return [_call("todo_write", todos=_ticked(done))]
        return [_say("The tests still fail; stopping here so you can look.")]
    return [_say(f"Nothing scripted after {name}; stopping.")]


Done = list[tuple[str, dict[str, Any], dict[str, Any]]]

_REFUSED_BY_USER = ("SCOPE_AMENDMENT_REFUSED", "EDIT_REFUSED")


def _ticked(done: Done) -> list[dict[str, str]]:
    """The todos with only what this turn did marked completed: the fix (an edit that
    succeeded) and the test run (it passed). Any other step stays as it was."""
    did = set()
    for name, args, result in done:
        if name == "Edit" and args.get("path") == FIX["path"] and not is_error(result):
            did.add(FIX_STEP)
        if name == "Bash" and args.get("command") == TEST_COMMAND and result.get("exit_code") == 0:
            did.add(TEST_STEP)
    todos: list[dict[str, str]] = []
    for name, args, _ in reversed(done):
        if name == "todo_write":
            todos = [dict(t) for t in args.get("todos", [])]
            break
    for todo in todos:
        if todo.get("content") in did:
            todo["status"] = "completed"
        elif todo.get("status") == "in_progress":
            todo["status"] = "pending"
    return todos


def _report(todos: list[dict[str, Any]], done: Done) -> str:
    tests = next(
        (
            r.get("stdout", "").strip().splitlines()[-1]
            for n, a, r in reversed(done)
            if n == "Bash" and a.get("command") == TEST_COMMAND and r.get("stdout")
        ),
        "see above",
    )
    left = [str(t.get("content")) for t in todos if t.get("status") != "completed"]
    if not left:
        return f"Done. Plan implemented; tests: {tests}."
    steps = "; ".join(f"“{step}”" for step in left)
    return (
        f"Applied the fix and ran the tests ({tests}). Not done: {steps}. This demo scripts "
        "only the fix and the test run, so those steps are still open for you (or a real model)."
    )


def _revise(done: Done, note: str) -> list[types.Part]:
    """The plan as it stands with the reviewer's request added as a step."""
    current = ""
    for name, args, result in reversed(done):
        plan = result.get("plan")
        if isinstance(plan, dict) and plan.get("content"):
            current = str(result.get("suggested_content") or plan["content"])
            break
        if name == "update_plan_content" and args.get("mode") == "replace":
            current = str(args.get("content") or "")
            break
    if note in ("", NO_ANSWER):
        return [
            _say("No change was named, so the plan stays as it is; submitting it again."),
            _call("exit_plan_mode", summary="Resubmitted unchanged"),
        ]
    return [
        _say("Revising the plan: your request becomes a step of it."),
        _call(
            "update_plan_content", content=_with_step(current, note), mode="replace", scope=SCOPE
        ),
    ]


def _with_step(content: str, step: str) -> str:
    """``content`` with ``step`` numbered after its last numbered step (or appended)."""
    lines = content.splitlines()
    step = " ".join(step.split())
    numbered = [i for i, line in enumerate(lines) if re.match(r"^\s{0,3}\d+[.)]\s", line)]
    if not numbered:
        return content.rstrip("\n") + f"\n\n## Steps\n1. {step}\n"
    last = numbered[-1]
    number = int(re.match(r"^\s*(\d+)", lines[last]).group(1)) + 1  # type: ignore[union-attr]
    lines.insert(last + 1, f"{number}. {step}")
    return "\n".join(lines) + "\n"
