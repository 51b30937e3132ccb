"""The editor surface: the reference agent as an Agent Client Protocol agent over stdio.

:class:`PlangateAgent` implements ``acp.interfaces.Agent``; :func:`run_stdio` serves it.
:mod:`plangate.acp.mapping` holds the pure mapping to ACP updates.
"""

from plangate.acp.agent import PlangateAgent, run_stdio

__all__ = ["PlangateAgent", "run_stdio"]
