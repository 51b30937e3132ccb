"""``todo_write``: step tracking for the implementation phase (refused while planning)."""

from __future__ import annotations

from typing import Any, Literal

from google.adk.tools import FunctionTool, ToolContext
from pydantic import BaseModel, ValidationError

from plangate.adk.contract import DeclaredOnceFunctionTool
from plangate.errors import ErrorCode, error_result
from plangate.policy.effects import Effect, declare_effect, declare_write_paths

__all__ = ["TODO_STATUSES", "TodoItem", "todo_write_tool", "todos_state_key"]

TODO_STATUSES = ("pending", "in_progress", "completed")


def todos_state_key(branch: str) -> str:
    return f"todos:{branch}"


class TodoItem(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"


def _invalid(message: str) -> dict[str, Any]:
    return error_result(
        ErrorCode.INVALID_ARGS, message, "send the whole list again, each item {content, status}"
    )


def todo_write_tool(branch: str) -> FunctionTool:
    """A ``todo_write`` tool storing the list in session state under ``todos:<branch>``."""

    async def todo_write(todos: list[TodoItem], tool_context: ToolContext) -> dict[str, Any]:
        """Replace the task list that tracks the implementation of an approved plan.

        Args:
            todos: The whole list. Keep exactly one item in_progress while working and mark
                items completed as they are done.
        """
        if not isinstance(todos, list):
            return _invalid("'todos' must be a list of {content, status} objects")
        cleaned: list[dict[str, str]] = []
        for index, item in enumerate(todos, start=1):
            # ADK converts valid items to TodoItem and leaves invalid ones as they came.
            if not isinstance(item, TodoItem):
                try:
                    item = TodoItem.model_validate(item)
                except ValidationError as exc:
                    problem = exc.errors()[0]
                    where = ".".join(str(p) for p in problem["loc"]) or "item"
                    return _invalid(
                        f"todo #{index} {where}: {problem['msg']} "
                        f"(statuses: {', '.join(TODO_STATUSES)})"
                    )
            if not item.content.strip():
                return _invalid(f"todo #{index} needs a non-empty 'content'")
            cleaned.append({"content": item.content.strip(), "status": item.status})
        tool_context.state[todos_state_key(branch)] = cleaned
        done = sum(1 for t in cleaned if t["status"] == "completed")
        return {"todos": cleaned, "message": f"{done}/{len(cleaned)} completed"}

    # It changes the conversation's todo list and no file: declared with no path, so a
    # scoped plan does not refuse it as a write that names none.
    return declare_write_paths(
        declare_effect(DeclaredOnceFunctionTool(todo_write), Effect.WRITE), ()
    )
