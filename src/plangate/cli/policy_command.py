"""``plangate policy check [PATH]``: validate a policy file and show what it resolves to.

Prints, per tool name the file names, the effect and the decision while planning and
while acting after every matching rule is taken into account (the strictest wins), so a
reader sees what ``mcp_github_*`` next to ``*`` comes to. A bad file exits 2 with one
line that names the file and the place, the same error the agent would refuse to start
with.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from plangate.policy.policy_file import (
    Decision,
    PolicyFile,
    PolicyFileError,
    ToolRule,
    parse_policy,
)

__all__ = ["ResolvedTool", "add_policy_parser", "resolve_rules", "run_policy"]

DEFAULT_PATH = Path(".plangate") / "policy.toml"
_STRICTNESS = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


def add_policy_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("policy", help="check a tool policy file")
    actions = parser.add_subparsers(dest="policy_command", required=True)
    check = actions.add_parser(
        "check",
        help="validate a policy file and print what it decides per tool and mode",
        description="Validate a policy file (default: .plangate/policy.toml) and print, "
        "per tool name, the effect and the decision while planning and while acting once "
        "every matching rule is applied (the strictest wins). Exit 2 on a bad file.",
    )
    check.add_argument("path", nargs="?", help=f"the policy file (default: {DEFAULT_PATH})")
    check.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME",
        help="also resolve this tool name (repeatable), e.g. an MCP tool's full name",
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run_policy)
    return parser


@dataclass(frozen=True)
class ResolvedTool:
    """What the file decides for one tool name, every matching rule applied."""

    tool: str
    effect: str | None
    planning: str | None
    acting: str | None
    rules: tuple[str, ...]
    paths: str = ""
    """The path rules of the matching rules, for a human ("path: allow reports/**")."""


def resolve_rules(policy: PolicyFile, names: list[str]) -> list[ResolvedTool]:
    """Each name the file's rules name (in file order), then ``names``."""
    seen: list[str] = []
    for name in [*(r.name for r in policy.tool), *names]:
        if name not in seen:
            seen.append(name)
    return [_resolve(policy, name) for name in seen]


def _resolve(policy: PolicyFile, name: str) -> ResolvedTool:
    rules = policy.rules_for(name)
    effect = policy.effect_of(name)
    return ResolvedTool(
        tool=name,
        effect=effect.value if effect is not None else None,
        planning=_strictest(r.planning for r in rules),
        acting=_strictest(r.acting for r in rules),
        rules=tuple(r.name for r in rules),
        paths="; ".join(p for r in rules if (p := _paths(r))),
    )


def _strictest(decisions: Any) -> str | None:
    ordered = sorted(decisions, key=lambda d: _STRICTNESS[d])
    return ordered[-1].value if ordered else None


def _paths(rule: ToolRule) -> str:
    paths = rule.paths
    if paths is None:
        return ""
    parts = [
        *(["allow " + ", ".join(paths.allow)] if paths.allow else []),
        *(["deny " + ", ".join(paths.deny)] if paths.deny else []),
    ]
    return f"{paths.arg}: " + ("; ".join(parts) or "any")


def run_policy(args: argparse.Namespace) -> int:
    path = Path(args.path) if args.path else DEFAULT_PATH
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"error {path}: cannot be read: {reason}", file=sys.stderr)
        return 2
    try:
        policy = parse_policy(text, str(path))
    except PolicyFileError as exc:
        print(f"error {exc}", file=sys.stderr)
        return 2
    resolved = resolve_rules(policy, [n.strip() for n in args.tool if n.strip()])
    if args.json:
        print(json.dumps({"file": str(path), "tools": [asdict(r) for r in resolved]}, indent=2))
        return 0
    print(
        f"ok {path}: {len(policy.tool)} rule(s). Per tool, the strictest matching rule wins; "
        "the plan gate's own deny outranks them all."
    )
    _table(resolved)
    return 0


def _table(resolved: list[ResolvedTool]) -> None:
    header = ("tool", "effect", "planning", "acting", "rules", "paths")
    rows = [
        (
            r.tool,
            r.effect or "-",
            r.planning or "-",
            r.acting or "-",
            ", ".join(r.rules) or "(none: undeclared)",
            r.paths,
        )
        for r in resolved
    ]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
