"""Default instructions: the full plan prompt while planning, a short awareness note otherwise."""

from __future__ import annotations

from typing import Literal

from plangate.plan.record import PlanRecord, PlanStatus

__all__ = [
    "DEFAULT_PLAN_AWARENESS_PROMPT",
    "DEFAULT_PLAN_MODE_PROMPT",
    "HOST_NOTE_PREFIX",
    "MODE_SWITCH_MARKER",
    "PLAN_AWARENESS_MARKER",
    "PLAN_MODE_MARKER",
    "mode_switch_note",
    "render_plan_prompt",
]

PLAN_MODE_MARKER = "You are in **Plan Mode**"
PLAN_AWARENESS_MARKER = "## Plan Mode (available)"

DEFAULT_PLAN_MODE_PROMPT = f"""{PLAN_MODE_MARKER}.

The user wants a plan before any change is made. This is enforced in code: every tool
with side effects (writing or editing files, shell commands that are not provably
read-only, todo lists, anything not declared read-only) is refused with a
PLAN_MODE_GATE error until the user approves your plan. Do not try to work around it.

Work in phases:
1. Explore: read the relevant code and data with read-only tools (Read, Grep, Glob,
   read-only shell commands, Explore/Plan sub-agents). Launch only as many as you need.
2. Clarify: when a choice belongs to the user, call ask_user_question (with options when
   there are natural choices). Never ask for approval in prose.
3. Draft: write the plan with update_plan_content. A good plan has a short Context
   section, the recommended approach only, the files to change, existing code to reuse,
   numbered implementation steps, and a Verification section. No large code blocks.
4. Submit: call exit_plan_mode with a one-line summary. The plan is locked while it waits
   for approval. If the user rejects it, revise it using their note and submit again.

A turn in Plan Mode ends only with ask_user_question or exit_plan_mode.
"""

DEFAULT_PLAN_AWARENESS_PROMPT = f"""{PLAN_AWARENESS_MARKER}

For non-trivial work, plan before you change anything: call enter_plan_mode with the
objective. Prefer it for a new feature, a change with several possible approaches, work
touching more than two or three files, unclear requirements, or when the user asks for a
plan. While planning, only read-only tools run; update_plan_content writes the plan,
ask_user_question clarifies, exit_plan_mode submits the plan for the user's approval.
You may skip planning for trivial work (a one-line fix, a question), saying why.
"""


def render_plan_prompt(template: str, record: PlanRecord) -> str:
    """The plan prompt plus the plan's current state, so a truncated history loses nothing."""
    lines = [
        template.rstrip(),
        "",
        "## Current plan",
        f"- objective: {record.objective}",
        f"- status: {record.status.value}",
        f"- revision: {record.content_revisions}",
    ]
    if record.status is PlanStatus.PENDING_ENTER:
        lines.append("- waiting for the user to confirm Plan Mode; do not act yet")
    if record.reviewer_note:
        lines.append(f"- reviewer note: {record.reviewer_note}")
    answered = [q for q in record.asked_questions if q.answer]
    for question in answered:
        lines.append(f"- answered question {question.id}: {question.question} -> {question.answer}")
    if record.suggested_content:
        lines += ["", "### Reviewer's suggested draft", record.suggested_content]
    lines += [
        "",
        "### Plan content",
        record.content or "(empty: write it with update_plan_content)",
    ]
    return "\n".join(lines)


HOST_NOTE_PREFIX = "[plangate]"
"""How a note plangate adds to a request as a user turn begins: not the user's words."""
MODE_SWITCH_MARKER = f"{HOST_NOTE_PREFIX} The user"

_SWITCH_NOTES = {
    "entered": f"{MODE_SWITCH_MARKER} switched this session to Plan Mode. Only read-only "
    "tools run now: explore, ask with ask_user_question, write the plan with "
    "update_plan_content and submit it with exit_plan_mode.",
    "left": f"{MODE_SWITCH_MARKER} left Plan Mode: the plan was cancelled and the gate is "
    "lifted. Do not act on that plan unless the user asks; carry on with their request.",
}


def mode_switch_note(switch: Literal["entered", "left"]) -> str:
    """What the model is told at its next step when the user switched Plan Mode on or off."""
    return _SWITCH_NOTES[switch]
