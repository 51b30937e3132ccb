"""The editor surface: the reference agent as an Agent Client Protocol agent over stdio.

:class:`PlangateAgent` implements ``acp.interfaces.Agent``; :func:`run_stdio` serves it.
:mod:`plangate.acp.mapping` holds the pure mapping to ACP updates;
:mod:`plangate.acp.stdio` the guarded stdio transport.
"""

from plangate.acp.agent import PlangateAgent
from plangate.acp.stdio import run_stdio

__all__ = ["PlangateAgent", "run_stdio"]
