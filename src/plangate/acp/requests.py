"""Human-in-the-loop requests in the editor: a pending plan entry, question or approval
shown as a tool call, asked with ``session/request_permission``, and the user's pick (or
own words) turned into the reply bound to that request.

Pure, like :mod:`plangate.acp.mapping`: the agent asks and sends what these build.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acp.helpers import start_tool_call, tool_diff_content, update_tool_call
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    DeniedOutcome,
    ElicitationFormSessionMode,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    PermissionOption,
    PermissionOptionKind,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
)
from google.genai import types

from plangate.acp.mapping import clip, text_content
from plangate.acp.markdown import code_span, escaped, fenced
from plangate.adk.session import PlanSession
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.replies import KEEP_PLANNING_NOTE
from plangate.plan.scope import Scope, scope_or_none
from plangate.plan.scope_text import ScopeTextError, split_scope_block, with_scope_block
from plangate.plan.visible import visible_text

__all__ = [
    "APPROVE_ASK_EACH_EDIT",
    "IN_WORDS",
    "NO_ANSWER",
    "ToolCallFields",
    "allowed",
    "elicited_words",
    "next_message_notice",
    "not_sent_notice",
    "permission_options",
    "reask_notice",
    "reply_for",
    "reply_with_words",
    "request_tool_call",
    "scope_text",
    "shown_plan",
    "wants_words",
    "withdrawn",
    "words_form",
    "words_prompt",
]

NO_ANSWER = "(no answer)"


class ToolCallFields:
    """A pending request shown as a tool call: the card update and the permission subject."""

    def __init__(
        self,
        request: PendingRequest,
        record: PlanRecord | None,
        plan_file: Path | None = None,
        workspace: Path | None = None,
    ) -> None:
        payload = request.payload
        self.call_id = request.call_id
        self.kind: ToolKind = "switch_mode" if request.kind in ("enter", "exit") else "think"
        self.content: list[Any] | None = None
        self.locations: list[ToolCallLocation] | None = None
        if request.kind == "exit":
            content = shown_plan(request, record)
            self.title = f"Approve plan (revision {request.revision})"
            self.raw_input: dict[str, Any] = {
                "plan": content,
                "revision": request.revision,
                "sha256": request.sha256,
                "summary": payload.get("message"),
                "scope_summary": payload.get("scope_summary"),
                "scope": payload.get("scope"),
                "permission_options": payload.get("permission_options"),
                "objective": payload.get("objective"),
                "approval_id": request.approval_id,
            }
            # The plan as the model wrote it, as source: no heading, link or fence in it
            # can look like plangate's own card.
            self.content = [text_content(fenced(content, "markdown"))] if content else []
            self.content.append(text_content(scope_text(payload.get("scope"))))
            if plan_file is not None:
                self.raw_input["plan_file"] = str(plan_file)
                self.locations = [ToolCallLocation(path=str(plan_file))]
                self.content.append(
                    text_content(
                        f"The plan is also in {plan_file}: edit it there and save before "
                        "you answer, and the saved text is what you approve."
                    )
                )
            self.content = self.content or None
        elif request.kind == "enter":
            objective = str(payload.get("objective") or "")
            self.title = (
                f"Enter Plan Mode: {escaped(clip(objective, 80))}"
                if objective
                else "Enter Plan Mode"
            )
            self.raw_input = {"objective": objective, "approval_id": request.approval_id}
            self.content = [
                text_content(f"The agent asks to plan before acting: {escaped(objective)}")
            ]
        elif request.kind in ("amendment", "edit", "tool"):
            message = str(payload.get("message") or "")
            self.title = escaped(clip(f"{payload.get('title') or 'Allow?'} {message}", 120))
            self.raw_input = {
                "message": message,
                "wants": payload.get("wants"),
                "scope_summary": payload.get("scope_summary"),
                "revision": request.revision,
                "sha256": request.sha256,
                "approval_id": request.approval_id,
            }
            shown = [escaped(message)]
            wants = scope_or_none(payload.get("wants"))
            if request.kind == "amendment" and wants is not None:
                shown.append("Outside the approved scope:\n" + _scope_lines(wants, wanted=True))
            if payload.get("scope_summary"):
                shown.append(f"Approved scope: {visible_text(str(payload['scope_summary']))}")
            self.content = [text_content("\n\n".join(shown))]
            change = payload.get("change")
            if isinstance(change, dict) and workspace is not None:
                # The editor's own diff view: the file before and after, by absolute path.
                path = str(workspace / str(change.get("path")))
                self.kind = "edit"
                self.locations = [ToolCallLocation(path=path)]
                self.content.append(
                    tool_diff_content(path, str(change.get("new_text")), change.get("old_text"))
                )
            elif payload.get("diff"):
                self.kind = "edit"
                self.content.append(text_content(fenced(str(payload["diff"]), "diff")))
        else:
            question = str(payload.get("message") or "")
            self.title = escaped(clip(question, 120)) or "Question"
            self.raw_input = {
                "question": question,
                "options": list(payload.get("options") or []),
                "question_id": request.question_id,
                "approval_id": request.approval_id,
            }

    def _shown(self) -> dict[str, Any]:
        """What every form of the request shows (card, update, permission subject)."""
        return {
            "title": self.title,
            "kind": self.kind,
            "status": "pending",
            "content": self.content,
            "locations": self.locations,
            "raw_input": self.raw_input,
        }

    def card(self, *, started: bool) -> ToolCallStart | ToolCallProgress:
        """The session update that shows the request: a new tool call, or an update of the
        call already on screen."""
        shown = self._shown()
        if started:
            return update_tool_call(self.call_id, **shown)
        return start_tool_call(self.call_id, shown.pop("title"), **shown)

    def subject(self) -> ToolCallUpdate:
        return ToolCallUpdate(tool_call_id=self.call_id, **self._shown())


def request_tool_call(
    request: PendingRequest,
    record: PlanRecord | None,
    plan_file: Path | None = None,
    workspace: Path | None = None,
) -> ToolCallFields:
    return ToolCallFields(request, record, plan_file, workspace)


def scope_text(value: Any) -> str:
    """The scope an approval grants, for the editor: a summary line, then each entry."""
    scope = scope_or_none(value)
    if scope is None:
        return (
            "Scope: none named. Approving lets the agent write anywhere in the workspace "
            "and run any command (in the sandbox)."
        )
    # The summary names each entry as inline code no entry can close.
    return f"Scope: {visible_text(scope.summary())}\n{_scope_lines(scope)}"


def _scope_lines(scope: Scope, *, wanted: bool = False) -> str:
    """Each entry of a scope, or (``wanted``) of what a call asks for beyond one."""
    lines = [f"- write {code_span(path)}" for path in scope.write]
    lines += [f"- run {code_span(command)}" for command in scope.commands]
    lines += [f"- run exactly {code_span(command)}" for command in scope.exact_commands]
    lines += [f"- network for {code_span(command)}" for command in scope.network_commands]
    if scope.network or not wanted:
        lines.append(f"- network: {'yes' if scope.network else 'no'}")
    return "\n".join(lines)


def shown_plan(request: PendingRequest, record: PlanRecord | None) -> str:
    """The plan text an approval request shows (the revision it is bound to)."""
    return str(request.payload.get("content") or (record.content if record else ""))


def plan_file_text(request: PendingRequest, record: PlanRecord | None) -> str:
    """What the plan file holds for an approval: the plan, with its scope above it as an
    editable block when it has one (``plan/scope_text.py``)."""
    return with_scope_block(
        shown_plan(request, record), scope_or_none(request.payload.get("scope"))
    )


def _edits(saved: str | None, request: PendingRequest) -> tuple[str | None, Scope | None]:
    """The plan text and scope of a saved plan file (None for what it does not hold).
    Only the block plangate wrote is read as the scope (see :func:`split_scope_block`).
    Raises ScopeTextError (a ValueError) when the scope block was broken."""
    if saved is None:
        return None, None
    return split_scope_block(
        saved,
        content=shown_plan(request, None),
        scope=scope_or_none(request.payload.get("scope")),
    )


APPROVE_ASK_EACH_EDIT = "approve_ask_each_edit"
IN_WORDS = "in_words"
WORDS_FIELD = "text"
"""The option that asks for free text (an answer, a rejection note) instead of a choice."""


_DECISIONS: dict[str, list[tuple[str, str, PermissionOptionKind]]] = {
    "exit": [
        # How the approved plan acts is chosen with the approval (the mode after planning).
        ("approve", "Approve, auto within scope", "allow_once"),
        (APPROVE_ASK_EACH_EDIT, "Approve, ask for each edit", "allow_once"),
        ("keep_planning", "Keep planning", "reject_once"),
        (IN_WORDS, "Reject with a note", "reject_once"),
    ],
    "enter": [
        ("enter", "Enter Plan Mode", "allow_once"),
        ("no", "No", "reject_once"),
        (IN_WORDS, "No, with a note", "reject_once"),
    ],
}
# A scope amendment, an edit review and a tool call are allowed or refused alike.
_DECISIONS["amendment"] = _DECISIONS["edit"] = _DECISIONS["tool"] = [
    ("approve", "Allow", "allow_once"),
    ("refuse", "Refuse", "reject_once"),
    (IN_WORDS, "Refuse with a note", "reject_once"),
]
"""The options of a decision request: (option id, name, kind)."""


def permission_options(request: PendingRequest) -> list[PermissionOption]:
    """The choices offered for a request: a decision, or a question's options (or Skip),
    each with a way to answer in the user's own words."""
    decisions = _DECISIONS.get(request.kind)
    if decisions is not None:
        choices = decisions
    else:
        offered = [str(text) for text in request.payload.get("options") or []]
        choices: list[tuple[str, str, PermissionOptionKind]] = [
            (str(index), text, "allow_once") for index, text in enumerate(offered)
        ]
        choices = choices or [("skip", "Skip", "reject_once")]
        choices = [*choices, (IN_WORDS, "Answer in my own words", "allow_once")]
    return [
        PermissionOption(option_id=option_id, name=name, kind=kind)
        for option_id, name, kind in choices
    ]


def wants_words(outcome: AllowedOutcome | DeniedOutcome) -> bool:
    """Whether the user picked the free-text option."""
    return isinstance(outcome, AllowedOutcome) and outcome.option_id == IN_WORDS


def reply_for(
    request: PendingRequest, outcome: AllowedOutcome | DeniedOutcome, content: str | None = None
) -> types.Content | None:
    """The bound reply for the option the user picked; None when the prompt was cancelled.
    ``content`` is the plan as the user edited it (an approval request only).

    Raises ValueError for an option that was not offered, or for the free-text option
    (its reply needs the text: :func:`reply_with_words`).
    """
    if isinstance(outcome, DeniedOutcome) or outcome.outcome == "cancelled":
        return None
    choice = outcome.option_id
    if request.kind == "exit":
        content, scope = _edits(content, request)
        if choice == "approve":
            return PlanSession.approve(request, content=content, scope=scope, permission="auto")
        if choice == APPROVE_ASK_EACH_EDIT:
            return PlanSession.approve(
                request, content=content, scope=scope, permission="ask_each_edit"
            )
        if choice == "keep_planning":
            # The user named no change: the standard note says what they chose.
            return PlanSession.reject(request, note=KEEP_PLANNING_NOTE, content=content)
    elif request.kind in ("amendment", "edit", "tool"):
        if choice == "approve":
            return PlanSession.approve(request)
        if choice == "refuse":
            return PlanSession.reject(request, note="")
    elif request.kind == "enter":
        if choice in ("enter", "no"):
            return PlanSession.confirm_enter(request, choice == "enter")
    else:
        options = [str(o) for o in request.payload.get("options") or []]
        if not options and choice == "skip":
            return PlanSession.answer(request, NO_ANSWER)
        if choice.isdigit() and int(choice) < len(options):
            return PlanSession.answer(request, options[int(choice)])
    raise ValueError(f"option {choice!r} was not offered for this {request.kind} request")


def reply_with_words(
    request: PendingRequest, text: str, content: str | None = None
) -> types.Content:
    """The bound reply carrying the user's own words: the answer to a question, the note
    that rejects a plan (with the edited plan, if any) or declines Plan Mode."""
    if request.kind == "exit":
        try:
            content, _ = _edits(content, request)
        except ScopeTextError:
            # A rejection grants nothing: a broken scope block does not stop the note,
            # and the plan text cannot be told apart from the block, so it is left out.
            content = None
        return PlanSession.reject(request, note=text, content=content)
    if request.kind in ("amendment", "edit", "tool"):
        return PlanSession.reject(request, note=text)
    if request.kind == "enter":
        return PlanSession.confirm_enter(request, False, text)
    return PlanSession.answer(request, text)


def words_prompt(request: PendingRequest) -> str:
    """What the user is asked to type for the free-text option."""
    if request.kind == "exit":
        return f"What should change in plan revision {request.revision}?"
    if request.kind == "enter":
        return "Why not plan first? Your note goes to the agent."
    return str(request.payload.get("message") or "Your answer")


def next_message_notice(request: PendingRequest) -> str:
    """The agent message binding the user's next prompt to an open request."""
    if request.kind == "exit":
        what = f"the note that rejects plan revision {request.revision}"
    elif request.kind == "enter":
        what = "your note declining Plan Mode"
    elif request.kind in ("amendment", "edit", "tool"):
        message = clip(str(request.payload.get("message") or ""), 120)
        what = f"the note that refuses “{message}”"
    else:
        what = f"your answer to “{clip(str(request.payload.get('message') or ''), 120)}”"
    return (
        f"Type {what} as your next message: it is sent to this request, not as a new task. "
        "(/plan off leaves Plan Mode instead.)"
    )


def reask_notice(pending: Sequence[PendingRequest]) -> str:
    """After a load: the requests still open, asked again (in turn) at the next message."""
    described = [_described(request) for request in pending]
    if len(described) == 1:
        return (
            f"{described[0][0].upper()}{described[0][1:]} is still open: it is asked again "
            "when you send your next message."
        )
    return (
        f"{len(described)} requests are still open ({'; '.join(described)}): they are asked "
        "again, in turn, when you send your next message."
    )


def _described(request: PendingRequest) -> str:
    if request.kind == "exit":
        return f"the approval of plan revision {request.revision}"
    if request.kind == "enter":
        return "the agent's request to enter Plan Mode"
    if request.kind in ("amendment", "edit", "tool"):
        return f"the request “{clip(str(request.payload.get('message') or ''), 120)}”"
    return f"the question “{clip(str(request.payload.get('message') or ''), 120)}”"


def not_sent_notice(text: str) -> str:
    return (
        f"Your message “{clip(text, 120)}” was not sent to the agent while a request is "
        "open; send it again once the request is answered."
    )


def words_form(request: PendingRequest, session_id: str) -> ElicitationFormSessionMode:
    """The form elicitation asking for the free-text reply (one required text field)."""
    return ElicitationFormSessionMode(
        session_id=session_id,
        tool_call_id=request.call_id,
        requested_schema=ElicitationSchema(
            properties={
                WORDS_FIELD: ElicitationStringPropertySchema(
                    type="string", title=words_prompt(request), min_length=1
                )
            },
            required=[WORDS_FIELD],
        ),
    )


def elicited_words(response: Any) -> str | None:
    """The text an accepted form elicitation returned; None when declined or empty."""
    if not isinstance(response, AcceptElicitationResponse):
        return None
    text = str((response.content or {}).get(WORDS_FIELD) or "").strip()
    return text or None


def allowed(call_id: str, result: dict[str, Any]) -> ToolCallProgress:
    """A paused call the user allowed: it runs now (its own result follows)."""
    return update_tool_call(
        call_id,
        status="in_progress",
        content=[text_content(str(result.get("message") or "Allowed; the call runs."))],
    )


def withdrawn(call_id: str) -> ToolCallProgress:
    """A request that stopped being pending while the editor asked about it."""
    return update_tool_call(
        call_id,
        status="failed",
        content=[
            text_content(
                "No longer pending: the request was withdrawn (the user left plan mode) "
                "or answered elsewhere; nothing was changed."
            )
        ],
    )
