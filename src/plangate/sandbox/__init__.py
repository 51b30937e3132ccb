"""The operating-system sandbox every command the agent starts runs in.

:mod:`~plangate.sandbox.policy` says what a command may touch (pure),
:mod:`~plangate.sandbox.probe` whether this machine can enforce it,
:mod:`~plangate.sandbox.process` runs a command under it, and
:mod:`~plangate.sandbox.context` carries the profile the plan gate chose for the call.
"""

from plangate.sandbox.context import (
    current_profile,
    current_scope,
    hidden_paths,
    hide_path,
    set_profile,
    set_scope,
)
from plangate.sandbox.policy import MAX_TIMEOUT_S, Limits, Profile, SandboxSpec
from plangate.sandbox.probe import SandboxStatus, sandbox_status

__all__ = [
    "MAX_TIMEOUT_S",
    "Limits",
    "Profile",
    "SandboxSpec",
    "SandboxStatus",
    "current_profile",
    "current_scope",
    "hidden_paths",
    "hide_path",
    "sandbox_status",
    "set_profile",
    "set_scope",
]
