"""The files a tool call writes, read from the tool's declaration, for the authority.

Plangate's own ``Write`` and ``Edit`` resolve their path and ask the authority
themselves. Every other tool that changes something -- a host tool declared
``Effect.WRITE``, a policy-file or MCP tool the policy file calls ``write`` -- cannot be
trusted to, so the gate resolves the paths it names and asks the authority before the
call runs: protected paths are refused, paths outside the workspace are refused, and
the approved scope (with its amendments) judges the rest.

A tool declares which of its arguments are paths in code
(:func:`plangate.policy.effects.declare_write_paths`) or in the policy file
(``paths = { arg = "path" }``). A write tool that declares none cannot be judged, so
under a scoped plan it is refused (:func:`undeclared_refusal`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plangate.adk.options import PlanOptions
from plangate.errors import CodedError, ErrorCode
from plangate.policy.effects import write_paths_of
from plangate.policy.policy_file import PolicyFile

__all__ = ["ToolPath", "declared_path_args", "tool_paths", "tool_workspace"]


@dataclass(frozen=True)
class ToolPath:
    """One path a call writes: relative to the workspace, and resolved (no symlinks)."""

    rel: str
    resolved: Path


def tool_workspace(options: PlanOptions) -> Path:
    """The folder tool paths are relative to: the option, else the project of the policy
    file (the folder that holds its ``.plangate``), else the current directory."""
    if options.workspace is not None:
        return Path(options.workspace)
    if options.policy_file is not None:
        folder = Path(options.policy_file).absolute().parent
        return folder.parent if folder.name == ".plangate" else folder
    return Path.cwd()


def declared_path_args(
    tool: Any, rules: PolicyFile | None, workspace: Path
) -> tuple[tuple[str, ...], Path] | None:
    """The arguments of ``tool`` that name files it writes and the folder they are
    relative to; None when neither the tool nor the policy file declares any."""
    declared = write_paths_of(tool)
    if declared is not None:
        args, root = declared
        return args, root if root is not None else workspace
    if rules is None:
        return None
    args = tuple(
        dict.fromkeys(r.paths.arg for r in rules.rules_for(tool.name) if r.paths is not None)
    )
    return (args, workspace) if args else None


def tool_paths(
    tool: Any, args: dict[str, Any], rules: PolicyFile | None, workspace: Path
) -> tuple[ToolPath, ...] | None:
    """The files this call writes, resolved; None when nothing declares them. Raises
    :class:`CodedError` for a declared path argument that is missing, not a path, or
    that leads out of the workspace (also through a symlink): such a call cannot run."""
    declared = declared_path_args(tool, rules, workspace)
    if declared is None:
        return None
    names, root = declared
    real_root = Path(os.path.realpath(root))
    found: list[ToolPath] = []
    for name in names:
        value = args.get(name)
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise CodedError(
                ErrorCode.INVALID_ARGS,
                f"{tool.name} needs a path in its argument '{name}'; it did not run",
                f"pass '{name}' as a workspace-relative path",
            )
        resolved = Path(os.path.realpath(real_root / value.strip()))
        if resolved != real_root and real_root not in resolved.parents:
            raise CodedError(
                ErrorCode.PATH_OUTSIDE_WORKSPACE,
                f"{tool.name}'s '{name}' ({value.strip()[:200]}) leads out of the workspace; "
                "it did not run",
                "write inside the workspace",
            )
        found.append(ToolPath(resolved.relative_to(real_root).as_posix() or ".", resolved))
    return tuple(found)
