"""The data tools as Google ADK ``FunctionTool`` objects, each declared read-only."""

from __future__ import annotations

from google.adk.tools import FunctionTool

from plangate.policy.effects import Effect, declare_effect

from .tools import TOOL_NAMES, DataTools

__all__ = ["data_adk_tools"]


def data_adk_tools(data_tools: DataTools) -> list[FunctionTool]:
    """One ``FunctionTool`` per data tool, named after the protocol's action names.

    ADK names a ``FunctionTool`` after its function's ``__name__`` and describes it
    with the docstring, so the bound methods of ``data_tools`` give the tools their
    names (``list_data_sources``, ``run_sql_readonly``, ...) and descriptions.
    """
    tools = []
    for name in TOOL_NAMES:
        tool = FunctionTool(getattr(data_tools, name))
        declare_effect(tool, Effect.READ)
        tools.append(tool)
    return tools
