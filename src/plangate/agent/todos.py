"""``todo_write``: step tracking for the implementation phase (refused while planning)."""

from __future__ import annotations

from typing import Any

from google.adk.tools import FunctionTool, ToolContext

from plangate.policy.effects import Effect, declare_effect

__all__ = ["TODO_STATUSES", "todo_write_tool", "todos_state_key"]

TODO_STATUSES = ("pending", "in_progress", "completed")


def todos_state_key(branch: str) -> str:
    return f"todos:{branch}"


def todo_write_tool(branch: str) -> FunctionTool:
    """A ``todo_write`` tool storing the list in session state under ``todos:<branch>``."""

    async def todo_write(todos: list[dict[str, Any]], tool_context: ToolContext) -> dict[str, Any]:
        """Replace the task list that tracks the implementation of an approved plan.

        Args:
            todos: The whole list, each item {"content": str, "status": "pending" |
                "in_progress" | "completed"}. Keep exactly one item in_progress while working.
        """
        if not isinstance(todos, list):
            return {"error": "INVALID_ARGS: 'todos' must be a list of {content, status} objects"}
        cleaned: list[dict[str, str]] = []
        for index, item in enumerate(todos, start=1):
            if not isinstance(item, dict):
                return {"error": f"INVALID_ARGS: todo #{index} must be an object"}
            content, status = item.get("content"), item.get("status", "pending")
            if not isinstance(content, str) or not content.strip():
                return {"error": f"INVALID_ARGS: todo #{index} needs a non-empty 'content'"}
            if status not in TODO_STATUSES:
                return {
                    "error": f"INVALID_ARGS: todo #{index} has status {status!r}; use one of "
                    + ", ".join(TODO_STATUSES)
                }
            cleaned.append({"content": content.strip(), "status": status})
        tool_context.state[todos_state_key(branch)] = cleaned
        done = sum(1 for t in cleaned if t["status"] == "completed")
        return {"todos": cleaned, "message": f"{done}/{len(cleaned)} completed"}

    return declare_effect(FunctionTool(todo_write), Effect.WRITE)
