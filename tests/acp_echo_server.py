"""A tiny stdio MCP server for the ACP tests: one tool, ``echo`` (or the name in
``ECHO_TOOL_NAME``)."""

from __future__ import annotations

import os

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("echo")


@server.tool(name=os.environ.get("ECHO_TOOL_NAME") or "echo")
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


if __name__ == "__main__":
    server.run()
