"""The operating-system sandbox every command the agent starts runs in.

:mod:`~plangate.sandbox.policy` says what a command may touch (pure),
:mod:`~plangate.sandbox.probe` whether this machine can enforce it,
:mod:`~plangate.sandbox.process` runs a command under it, and
:mod:`~plangate.sandbox.context` the paths no command may read. The profile of a
command follows the call's authority (:mod:`plangate.policy.authority`).
"""

from plangate.sandbox.context import hidden_paths, hide_path
from plangate.sandbox.policy import MAX_TIMEOUT_S, Limits, Profile, SandboxSpec
from plangate.sandbox.probe import SandboxStatus, sandbox_status

__all__ = [
    "MAX_TIMEOUT_S",
    "Limits",
    "Profile",
    "SandboxSpec",
    "SandboxStatus",
    "hidden_paths",
    "hide_path",
    "sandbox_status",
]
