"""The data tools as Google ADK ``FunctionTool`` objects, each declared read-only.

Each asks the call's authority before it queries: under protocol governance the
authority carries the phase in force, and a data action that phase does not allow does
nothing, even when the tool is called around the boundary (the boundary's check and
this one read the same phase)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.tools import FunctionTool

from plangate.adk.contract import DeclaredOnceFunctionTool
from plangate.errors import error_result
from plangate.policy.authority import current_authority
from plangate.policy.effects import Effect, declare_effect
from plangate.protocol.actions import action_for_tool
from plangate.protocol.definitions import Rejected

from .tools import TOOL_NAMES, DataTools

__all__ = ["data_adk_tools"]


def _off_the_loop(method: Callable[..., dict[str, Any]]) -> Callable[..., Awaitable[dict]]:
    """An async twin of ``method`` that runs it on a worker thread.

    ADK calls a synchronous tool function on the event loop, and a DuckDB query
    blocks its thread until it ends. If the awaiting task is cancelled, the thread
    runs on until the query ends or the catalog's time limit interrupts it.
    """

    action = action_for_tool(method.__name__)

    @functools.wraps(method)
    async def run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        authority = current_authority()
        decision = authority.decide_action(action) if authority is not None else None
        if isinstance(decision, Rejected):
            return error_result(
                decision.code,
                decision.message,
                decision.recovery_hint,
                execution_status="not_started",
                phase=decision.phase,
            )
        return await asyncio.to_thread(method, *args, **kwargs)

    return run


def data_adk_tools(data_tools: DataTools) -> list[FunctionTool]:
    """One ``FunctionTool`` per data tool, named after the protocol's action names.

    ADK names a ``FunctionTool`` after its function's ``__name__`` and describes it
    with the docstring, so the bound methods of ``data_tools`` give the tools their
    names (``list_data_sources``, ``run_sql_readonly``, ...), descriptions and
    parameters; each runs on a worker thread, off the event loop.
    """
    tools = []
    for name in TOOL_NAMES:
        tool = DeclaredOnceFunctionTool(_off_the_loop(getattr(data_tools, name)))
        declare_effect(tool, Effect.READ)
        tools.append(tool)
    return tools
