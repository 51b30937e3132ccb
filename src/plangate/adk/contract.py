"""Everything plangate relies on in Google ADK that ADK does not document as public API.

Kept in one module so an ADK upgrade has one place to look, and pinned by
``tests/test_adk_contract.py``, which fails loudly when ADK renames or changes any of it:

- ``InvocationContext._get_events``: ADK's own filter of the events of the current
  invocation and branch (its branch rules include replies to the branch's calls, which a
  plain filter on ``session.events`` would get wrong).
- ``BaseToolset._use_invocation_cache``: a toolset whose tool list follows the plan state
  must be asked again at every step, not once per invocation.
- ``BaseTool._get_declaration``: ADK asks every tool for its declaration at every model
  step and builds it from the function's signature each time; the plan tools' never
  changes, so it is built once.
- Callbacks: ADK calls ``inspect.signature`` on every agent, model and tool callback at
  every call (to pass its keyword arguments positionally when the names differ); a
  signature computed once and kept in ``__signature__`` makes that a lookup.
- ``StreamingMode``: used by every runner, but exported from ``run_config`` only as a
  re-import of a private module.
- Call ids: a function call the model sent without an id gets one from ADK starting with
  ``adk-``, and ADK removes those ids again from the request it sends to the model. Ids a
  model sent itself reach the model unchanged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from google.adk.agents import run_config as _run_config
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.tools import FunctionTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types

__all__ = [
    "ADK_CALL_ID_PREFIX",
    "DeclaredOnceFunctionTool",
    "DeclaredOnceLongRunningTool",
    "StreamingMode",
    "current_branch_events",
    "is_adk_call_id",
    "refresh_tools_every_step",
    "signed_once",
]

C = TypeVar("C", bound=Callable[..., Any])
StreamingMode = _run_config.StreamingMode  # pyright: ignore[reportPrivateImportUsage]

ADK_CALL_ID_PREFIX = "adk-"
"""ADK's prefix for the call ids it generates (``AF_FUNCTION_CALL_ID_PREFIX``)."""


def current_branch_events(ctx: InvocationContext) -> list[Event]:
    """The events of the current invocation on the current branch, as ADK filters them."""
    return ctx._get_events(current_invocation=True, current_branch=True)


def refresh_tools_every_step(toolset: BaseToolset) -> None:
    """Make ADK ask ``toolset.get_tools`` at every model step of an invocation."""
    toolset._use_invocation_cache = False


def signed_once(callback: C) -> C:
    """``callback`` with its signature computed now, so ADK does not compute it per call."""
    callback.__signature__ = inspect.signature(callback)  # type: ignore[attr-defined]
    return callback


def is_adk_call_id(call_id: str | None) -> bool:
    """True for an id ADK generated, which it strips before calling the model."""
    return bool(call_id) and str(call_id).startswith(ADK_CALL_ID_PREFIX)


class DeclaredOnceFunctionTool(FunctionTool):
    """A ``FunctionTool`` whose declaration is built on first use and then reused."""

    _declaration: types.FunctionDeclaration | None = None

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        if self._declaration is None:
            self._declaration = super()._get_declaration()
        return self._declaration


class DeclaredOnceLongRunningTool(LongRunningFunctionTool):
    """A ``LongRunningFunctionTool`` whose declaration is built on first use and then
    reused (ADK's long-running note included)."""

    _declaration: types.FunctionDeclaration | None = None

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        if self._declaration is None:
            self._declaration = super()._get_declaration()
        return self._declaration
