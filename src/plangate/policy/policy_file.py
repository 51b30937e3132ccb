"""The policy file (``.plangate/policy.toml``): rules for tools that are not plangate's.

MCP tools and custom tools declare nothing plangate can trust. The file says, per tool
name (``*`` globs allowed), what the tool does (``read``, ``write``, ``shell``,
``network``), whether it is allowed, asked for or denied while planning and while
acting, and which paths its path argument may touch::

    version = 1

    [[tool]]
    name = "mcp_github_*"
    effect = "network"
    planning = "deny"
    acting = "ask"
    justification = "talks to GitHub"

    [[tool]]
    name = "save_report"
    effect = "write"
    acting = "allow"
    paths = { arg = "path", allow = ["reports/**"], deny = ["**/.env"] }

Across the rules that match a call the strictest decision wins (deny, then ask, then
allow), and the plan gate's own deny outranks them all. A server's ``readOnlyHint`` is
shown to the user but never trusted alone: only a rule here makes such a tool read-only.
Pure: parsing text and deciding; the host reads the file.
"""

from __future__ import annotations

import fnmatch
import posixpath
import tomllib
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from plangate.plan.scope import glob_matches
from plangate.policy.effects import Effect

__all__ = [
    "Decision",
    "PathRules",
    "PolicyFile",
    "PolicyFileError",
    "PolicyVerdict",
    "ToolRule",
    "parse_policy",
]


class Decision(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


_STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


class PolicyFileError(ValueError):
    """A policy file that cannot be used; raised at start, naming the file and the place."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PathRules(_Strict):
    arg: str
    """The tool argument that holds a workspace-relative path."""
    allow: tuple[str, ...] = ()
    """When given, a path outside these globs is asked for."""
    deny: tuple[str, ...] = ()
    """A path matching one of these globs is denied."""


class ToolRule(_Strict):
    name: str
    """A tool name, or a glob such as ``mcp_github_*``."""
    effect: Effect
    planning: Decision = Decision.DENY
    acting: Decision = Decision.ASK
    paths: PathRules | None = None
    justification: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a tool rule needs a non-empty name")
        return value.strip()

    @field_validator("effect")
    @classmethod
    def _effect(cls, value: Effect) -> Effect:
        if value is Effect.SPAWN:
            raise ValueError("effect must be read, write, shell or network")
        return value


class PolicyFile(_Strict):
    version: Literal[1] = 1
    tool: tuple[ToolRule, ...] = ()

    def rules_for(self, tool_name: str) -> list[ToolRule]:
        return [r for r in self.tool if fnmatch.fnmatchcase(tool_name, r.name)]

    def effect_of(self, tool_name: str) -> Effect | None:
        """The effect the file declares for ``tool_name``: the widest of its rules."""
        effects = {r.effect for r in self.rules_for(tool_name)}
        for effect in (Effect.SHELL, Effect.NETWORK, Effect.WRITE, Effect.READ):
            if effect in effects:
                return effect
        return None

    def decide(
        self, tool_name: str, args: dict[str, object], *, planning: bool
    ) -> PolicyVerdict | None:
        """The strictest verdict of the rules matching this call; None when none match."""
        verdicts = [_verdict(rule, args, planning) for rule in self.rules_for(tool_name)]
        if not verdicts:
            return None
        return max(verdicts, key=lambda v: _STRICTNESS[v.decision])


@dataclass(frozen=True)
class PolicyVerdict:
    decision: Decision
    reason: str
    rule: str


def _verdict(rule: ToolRule, args: dict[str, object], planning: bool) -> PolicyVerdict:
    mode = "planning" if planning else "acting"
    decision = rule.planning if planning else rule.acting
    why = f"policy rule '{rule.name}' says {decision.value} while {mode}"
    if rule.justification:
        why += f" ({rule.justification})"
    paths = rule.paths
    if paths is not None and decision is not Decision.DENY:
        value = args.get(paths.arg)
        if not isinstance(value, str) or not value.strip():
            return PolicyVerdict(Decision.ASK, f"{why}; its '{paths.arg}' is missing", rule.name)
        rel = posixpath.normpath(value.strip()).removeprefix("./")
        if rel.startswith("/") or rel == ".." or rel.startswith("../"):
            return PolicyVerdict(
                Decision.DENY, f"{why}; '{value}' is outside the workspace", rule.name
            )
        if any(glob_matches(g, rel) for g in paths.deny):
            return PolicyVerdict(Decision.DENY, f"{why}; '{rel}' matches a denied path", rule.name)
        if paths.allow and not any(glob_matches(g, rel) for g in paths.allow):
            return PolicyVerdict(
                _stricter(decision, Decision.ASK),
                f"{why}; '{rel}' is not an allowed path",
                rule.name,
            )
    return PolicyVerdict(decision, why, rule.name)


def _stricter(a: Decision, b: Decision) -> Decision:
    return a if _STRICTNESS[a] >= _STRICTNESS[b] else b


def parse_policy(text: str, source: str = "policy.toml") -> PolicyFile:
    """Parse and validate a policy file; raises PolicyFileError naming what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyFileError(f"{source}: not valid TOML: {exc}") from None
    try:
        return PolicyFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        raise PolicyFileError(f"{source}: invalid {where}: {message}") from None
