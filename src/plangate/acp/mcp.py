"""MCP servers the editor passes in ``session/new`` / ``session/load``, as agent tools.

Stdio servers become ADK ``McpToolset`` objects, one per server, started when the
session is opened (a server that does not start is an error for that request) and
attached to that session only: :class:`SessionToolsets` sits in the shared agent's
tools and hands each invocation the toolsets of its own session. Their tools declare no
effect, so while a plan is being made the plan gate's default deny refuses them (an MCP
server's own ``readOnlyHint`` is a claim, not a proof); with no plan or after approval
they run. A server whose tool would carry the name of one of plangate's tools (server
``spawn``, tool ``subagent``: ``spawn_subagent``) is refused (``TOOL_NAME_RESERVED``). HTTP, SSE and ACP-transport servers are refused with a JSON-RPC error: this
agent advertises no ``mcpCapabilities`` for them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import McpServerStdio
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset

from plangate.adk.own_tools import RESERVED_TOOL_NAMES, reserved_name_error

__all__ = ["SessionToolsets", "check_servers", "start_servers"]

logger = logging.getLogger("plangate.acp")

CONNECT_TIMEOUT = 30.0
"""Seconds an MCP server gets to start and answer ``initialize``."""


def check_servers(servers: Sequence[Any] | None) -> list[McpServerStdio]:
    """The stdio servers; raises invalid params for a transport this agent lacks."""
    stdio: list[McpServerStdio] = []
    for server in servers or ():
        if isinstance(server, McpServerStdio):
            stdio.append(server)
            continue
        transport = getattr(server, "type", None) or type(server).__name__
        raise RequestError(
            -32602,
            f"MCP server '{getattr(server, 'name', '?')}' uses the {transport} transport, "
            "which plangate acp does not support (agentCapabilities.mcpCapabilities): "
            "configure it as a stdio server (command, args, env)",
            {"mcpServer": getattr(server, "name", None), "transport": transport},
        )
    return stdio


async def start_servers(servers: Sequence[McpServerStdio], workspace: Path) -> list[BaseToolset]:
    """One started toolset per server (its tools named ``<server>_<tool>``), run in the
    workspace. A server that does not start is an error for the editor, not a silent
    loss of tools: the ones already started are stopped again."""
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp import StdioServerParameters

    started: list[BaseToolset] = []
    for server in servers:
        toolset = McpToolset(
            connection_params=StdioConnectionParams(
                server_params=StdioServerParameters(
                    command=server.command,
                    args=list(server.args),
                    env={v.name: v.value for v in server.env} or None,
                    cwd=str(workspace),
                ),
                timeout=CONNECT_TIMEOUT,
            ),
            tool_name_prefix=_tool_prefix(server.name),
        )
        started.append(toolset)
        try:
            tools = await toolset.get_tools()
        except Exception as exc:
            for toolset in started:
                await _close(toolset)
            raise RequestError(
                -32602,
                f"MCP server '{server.name}' did not start: {exc}",
                {"mcpServer": server.name, "command": server.command},
            ) from None
        refusal = _namesake(server.name, toolset.tool_name_prefix, tools)
        if refusal is not None:
            for toolset in started:
                await _close(toolset)
            raise refusal
    return started


def _namesake(server: str, prefix: str | None, tools: list[BaseTool]) -> RequestError | None:
    """The refusal of a server whose tool, once prefixed, carries a name of plangate's:
    ADK would let it replace plangate's tool (server ``spawn``, tool ``subagent``)."""
    for tool in tools:
        exposed = f"{prefix}_{tool.name}" if prefix else tool.name
        if exposed in RESERVED_TOOL_NAMES:
            error = reserved_name_error(exposed, f"MCP tool '{tool.name}' of server '{server}'")
            return RequestError(
                -32602,
                f"{error.code.value}: {error.message}",
                {
                    "code": error.code.value,
                    "hint": f"{error.hint}, or rename the server",
                    "mcpServer": server,
                    "tool": tool.name,
                    "reserved": exposed,
                },
            )
    return None


def _tool_prefix(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "mcp"


class SessionToolsets(BaseToolset):
    """The per-session toolsets of a shared agent, keyed by ADK session id."""

    def __init__(self) -> None:
        super().__init__()
        self._by_session: dict[str, list[BaseToolset]] = {}

    async def attach(self, session_id: str, toolsets: list[BaseToolset]) -> None:
        """Give the session these toolsets, closing the ones it had."""
        previous = self._by_session.pop(session_id, [])
        if toolsets:
            self._by_session[session_id] = toolsets
        for toolset in previous:
            await _close(toolset)

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        if readonly_context is None:
            return []
        tools: list[BaseTool] = []
        for toolset in self._by_session.get(readonly_context.session.id, []):
            try:
                tools.extend(await toolset.get_tools_with_prefix(readonly_context))
            except Exception:  # one broken server must not take the others down
                logger.exception("an MCP server of session %s failed", readonly_context.session.id)
        # A server may rename its tools after it was attached: a namesake of one of
        # plangate's tools is left out, so it cannot take that tool's place (the gate
        # refuses it too, should it get through another way).
        kept = [t for t in tools if t.name not in RESERVED_TOOL_NAMES]
        if len(kept) != len(tools):
            logger.warning("left out MCP tools named like plangate's tools")
        return kept

    async def close(self) -> None:
        sessions, self._by_session = self._by_session, {}
        for toolsets in sessions.values():
            for toolset in toolsets:
                await _close(toolset)


async def _close(toolset: BaseToolset) -> None:
    try:
        await toolset.close()
    except Exception:
        logger.exception("closing an MCP toolset failed")
