"""The editor surface: the reference agent as an Agent Client Protocol agent over stdio.

:class:`PlangateAgent` implements ``acp.interfaces.Agent``; :func:`run_stdio` serves it.
The pure parts: :mod:`~plangate.acp.mapping` (ACP updates), :mod:`~plangate.acp.requests`
(permission requests and bound replies), :mod:`~plangate.acp.commands` (slash commands),
:mod:`~plangate.acp.listing` (``session/list``). Around them: :mod:`~plangate.acp.stdio`
(the guarded transport), :mod:`~plangate.acp.mcp` (the editor's MCP servers) and
:mod:`~plangate.acp.plan_file` (the plan as an editable file).
"""

from plangate.acp.agent import PlangateAgent
from plangate.acp.stdio import run_stdio

__all__ = ["PlangateAgent", "run_stdio"]
