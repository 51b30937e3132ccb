"""ADK's optional A2A agent, when its SDK is not installed.

ADK looks for ``RemoteA2aAgent`` each time it builds a workflow node, which is every run.
Without the ``a2a`` SDK that import fails, and Python retries a failed import from
scratch: about 0.7 ms of CPU per run, for an answer that cannot change while the process
runs. A ``None`` in ``sys.modules`` is Python's documented way to make an import fail at
once (``ImportError``), which is exactly what ADK already expects and handles.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["remember_missing_a2a"]

REMOTE_A2A_MODULE = "google.adk.agents.remote_a2a_agent"


def remember_missing_a2a() -> None:
    """Import ADK's A2A agent once; if it cannot be imported, make later tries fail fast."""
    if REMOTE_A2A_MODULE in sys.modules:
        return
    try:
        importlib.import_module(REMOTE_A2A_MODULE)
    except ImportError:
        sys.modules[REMOTE_A2A_MODULE] = None  # pyright: ignore[reportArgumentType]
