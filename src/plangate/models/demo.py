"""The offline demo model: a deterministic script over the sample workspace.

It is not a language model. It reads the conversation (tool results, the plan prompt)
and plays the next step of one scripted task -- fixing the sample project's failing
test -- so the whole Plan Mode flow can be shown with no API key. Every text it writes
starts with ``[demo]`` so nobody mistakes it for an LLM.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from plangate.models.demo_data import next_data_step
from plangate.plan.prompts import PLAN_MODE_MARKER

__all__ = ["DEMO_LABEL", "DemoModel"]

DEMO_LABEL = "[demo]"

FIX = {
    "path": "inventory/stock.py",
    "old_string": "        if quantity > on_hand + 1:\n",
    "new_string": "        if quantity > on_hand:\n",
}
QUESTION = "When a reservation asks for more than is on hand, what should reserve() do?"
OPTIONS = ["Raise an error and leave the stock unchanged", "Allow backorders (negative stock)"]


def _plan(answer: str) -> str:
    return f"""# Fix over-reservation in `Stock.reserve`

## Context
`tests/test_stock.py::test_cannot_reserve_more_than_on_hand` fails: `reserve()` checks
`quantity > on_hand + 1`, so one unit more than is on hand can be reserved and the
stock goes negative. Decision from the user: {answer}.

## Steps
1. Change the guard in `inventory/stock.py` to `quantity > on_hand`
2. Run the test suite with `python -m pytest -q`

## Verification
All tests in `tests/` pass; no other file changes.
"""


class DemoModel(BaseLlm):
    model: str = "plangate-demo"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = _next_step(llm_request)
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


def _next_step(request: LlmRequest) -> list[types.Part]:
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
            return [_say("The approved plan is implemented and the tests pass. Anything else?")]
        return [
            _say("This touches code and tests, so I will plan first."),
            _call("enter_plan_mode", objective=(user_text or "Fix the failing test")[:200]),
        ]
    name, _args, result = done[-1]
    status = result.get("status")
    error = str(result.get("error", ""))
    if name == "enter_plan_mode":
        if status == "approved":
            return [_call("Glob", pattern="**/*.py")]
        return [
            _say(
                "Understood, no plan. This demo only shows the planned path; type /plan to try again."
            )
        ]
    if name == "Glob":
        return [_call("Read", path="inventory/stock.py")]
    if name == "Read":
        return [_call("Bash", command="grep -n 'on_hand' inventory/stock.py")]
    if name == "Bash" and planning:
        return [
            _say("Found it: the guard is off by one. Trying the fix right away to show the gate:"),
            _call("Edit", **FIX),
        ]
    if name == "Edit" and error.startswith("PLAN_MODE_GATE"):
        return [
            _say("Refused by the plan gate, as it should be. One question before I plan:"),
            _call("ask_user_question", question=QUESTION, options=OPTIONS),
        ]
    if name == "ask_user_question":
        answer = result.get("answer") or OPTIONS[0]
        return [_call("update_plan_content", content=_plan(str(answer)), mode="replace")]
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
            note = result.get("reviewer_note") or "no note"
            addition = f"\n## Reviewer feedback\n- Addressed: {note}\n"
            return [_call("update_plan_content", content=addition, mode="append")]
        if error:
            return [_say(f"The plan was not submitted: {error}")]
        return [_say("The plan request was withdrawn; I will not act on it.")]
    if name == "todo_write":
        todos = result.get("todos") or []
        if todos and all(t.get("status") == "completed" for t in todos):
            test_line = next(
                (
                    r.get("stdout", "").strip().splitlines()[-1]
                    for n, _, r in reversed(done)
                    if n == "Bash" and r.get("stdout")
                ),
                "",
            )
            return [_say(f"Done. Plan implemented; tests: {test_line or 'see above'}.")]
        return [_call("Edit", **FIX)]
    if name == "Edit":
        return [_call("Bash", command="python -m pytest -q")]
    if name == "Bash":
        if result.get("exit_code") == 0:
            todos = [{"content": c, "status": "completed"} for c in _todo_contents(done)]
            return [_call("todo_write", todos=todos)]
        return [_say("The tests still fail; stopping here so you can look.")]
    return [_say(f"Nothing scripted after {name}; stopping.")]


def _todo_contents(done: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[str]:
    for name, args, _ in reversed(done):
        if name == "todo_write":
            return [t["content"] for t in args.get("todos", [])]
    return ["Apply the fix", "Run the tests"]
