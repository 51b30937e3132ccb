"""A thread as the page sees it after a reload, rebuilt from the stored ADK session.

Message ids match the live stream: an assistant message is its ADK event's id, a tool
result is ``<event id>:<call id>`` and a human reply to a paused call is
``reply:<call id>`` (shown with its canonical result, as the model saw it).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ag_ui.core import AssistantMessage, FunctionCall, Message, ToolCall, ToolMessage, UserMessage
from google.adk.agents import LlmAgent
from google.adk.runners import Runner

from plangate.adk.branches import BRANCH_OF_KEY
from plangate.adk.protocols import protocol_runtime
from plangate.adk.scope import PlanScope
from plangate.adk.session import SYSTEM_AUTHOR, PlanSession
from plangate.adk.session_choice import FirstUseSessionService
from plangate.adk.session_service import StoreSessionService
from plangate.adk.thread_titles import clip_title, intent_titles
from plangate.plan.session_state import PlanSessionState
from plangate.store.store import JournalEntry
from plangate.web.agui import StateKeys, interrupt_for, is_confirmation, reply_id, shared_state

__all__ = ["journal_json", "thread_journal", "thread_json", "thread_list", "thread_messages"]

THREAD_LIST_LIMIT = 50
"""The newest threads listed; older ones open by their id (``#thread=<id>``)."""


def thread_messages(events: list[Any], plan_state: PlanSessionState) -> list[Message]:
    """User text, assistant text with tool calls, and tool results, in order.

    A paused call that was withdrawn rather than answered (the user left Plan Mode) has no
    reply in the session; its canonical result is shown where the withdrawal happened.
    """
    answered = {
        part.function_response.id
        for event in events
        for part in (event.content.parts if event.content else None) or []
        if part.function_response is not None
    }
    # A call paused by the scope (an amendment, an edit review) is answered through ADK's
    # confirmation, so the human's decision has no reply of its own in the session either.
    confirmed = _confirmed_calls(events)
    withdrawn = {
        k: v for k, v in plan_state.resolutions.items() if k not in answered or k in confirmed
    }
    waiting: list[str] = []
    messages: list[Message] = []

    def flush() -> None:
        for call_id in waiting:
            content = _dumps(withdrawn[call_id].result)
            messages.append(
                ToolMessage(id=reply_id(call_id), tool_call_id=call_id, content=content)
            )
        waiting.clear()

    for event in events:
        if event.partial:
            continue
        if waiting and event.author in ("user", SYSTEM_AUTHOR):
            flush()
        if event.content is None:
            continue
        # ADK's confirmation of a paused call is plumbing: its request shows as the
        # call's interrupt and the decision as the call's reply (a resolution).
        parts = [p for p in event.content.parts or [] if not is_confirmation(p)]
        for part in parts:
            if part.function_call is not None and part.function_call.id in withdrawn:
                waiting.append(part.function_call.id)
        if event.author == "user":
            text = "\n".join(p.text for p in parts if p.text)
            if text:
                messages.append(UserMessage(id=event.id, content=text))
            for part in parts:
                response = part.function_response
                if response is not None and response.id:
                    content = _reply_content(plan_state, response.id, response.response)
                    messages.append(
                        ToolMessage(
                            id=reply_id(response.id),
                            tool_call_id=response.id,
                            content=_dumps(content),
                        )
                    )
            continue
        text = "".join(p.text for p in parts if p.text and not p.thought)
        calls = [
            ToolCall(
                id=p.function_call.id,
                function=FunctionCall(
                    name=p.function_call.name or "", arguments=_dumps(p.function_call.args or {})
                ),
            )
            for p in parts
            if p.function_call is not None and p.function_call.id
        ]
        if text or calls:
            messages.append(
                AssistantMessage(id=event.id, content=text or None, tool_calls=calls or None)
            )
        for part in parts:
            response = part.function_response
            if response is not None and response.id:
                messages.append(
                    ToolMessage(
                        id=f"{event.id}:{response.id}",
                        tool_call_id=response.id,
                        content=_dumps(response.response or {}),
                    )
                )
    flush()
    return messages


def _confirmed_calls(events: list[Any]) -> set[str]:
    """The ids of the calls ADK's confirmation paused (see :func:`is_confirmation`)."""
    ids: set[str] = set()
    for event in events:
        for part in (event.content.parts if event.content else None) or []:
            call = part.function_call
            if call is None or not is_confirmation(part):
                continue
            original = (call.args or {}).get("originalFunctionCall")
            if isinstance(original, dict) and isinstance(original.get("id"), str):
                ids.add(original["id"])
    return ids


def _reply_content(state: PlanSessionState, call_id: str, raw: Any) -> Any:
    result = state.reply_result(call_id)
    return result if result is not None else raw or {}


async def thread_journal(session: PlanSession) -> list[JournalEntry]:
    """The thread's governance journal: plan events and protocol events, in sequence order.

    The protocol runtime journals under ``app/user/session/<agent name>``; Plan Mode under
    ``app/user/session/<plan branch>``. They are one scope unless the plan has a branch of
    its own, so the protocol scope is read separately only then.
    """
    entries = await session.journal()
    agent = session.runner.agent
    protocols = protocol_runtime(agent) if isinstance(agent, LlmAgent) else None
    if protocols is None:
        return entries
    plan_scope = session.scope
    scope = PlanScope(
        plan_scope.app_name, plan_scope.user_id, plan_scope.session_id, protocols.branch
    )
    plan_store = await session.runtime.store()
    protocol_store = await protocols.store()
    if scope.key == plan_scope.key and protocol_store is plan_store:
        return entries
    seen = {e.seq for e in entries} if protocol_store is plan_store else set()
    more = [e for e in await protocol_store.journal(scope.key) if e.seq not in seen]
    return sorted([*entries, *more], key=lambda e: e.seq)


def journal_json(entries: list[JournalEntry]) -> list[dict[str, Any]]:
    return [
        {
            "seq": entry.seq,
            "kind": entry.event.kind,
            "subject": entry.event.subject,
            "fromState": entry.event.from_state,
            "toState": entry.event.to_state,
            "actor": entry.event.actor,
            "at": entry.event.at,
            "revision": entry.event.revision,
            "sha256": entry.event.sha256,
            "detail": entry.event.detail,
        }
        for entry in entries
    ]


async def thread_json(session: PlanSession, *, running: bool) -> dict[str, Any]:
    """Everything a page needs to restore a thread: messages, state, interrupts, journal."""
    keys = StateKeys.of(session)
    adk_session = await session.session()
    plan_state = await session.plan_state()
    record = plan_state.record
    mode = await session.mode()
    archived = await session.archived()
    return {
        "threadId": session.session_id,
        "running": running,
        "messages": [
            m.model_dump(mode="json", by_alias=True)
            for m in thread_messages(list(adk_session.events), plan_state)
        ],
        "state": shared_state(adk_session.state, keys),
        "stateKeys": keys.as_json(),
        "mode": {"active": mode.active, "pending": mode.pending, "planStatus": mode.plan_status},
        "interrupts": [
            interrupt_for(p).model_dump(mode="json", by_alias=True)
            # The open requests in the order the model asked (the tools of one step run
            # concurrently, so the order they were recorded in can differ).
            for p in (record.open_requests() if record else [])
        ],
        "journal": journal_json(await thread_journal(session)),
        "archivedPlans": [
            {
                "id": r.id,
                "status": r.status.value,
                "objective": r.objective,
                "contentRevisions": r.content_revisions,
            }
            for r in archived
        ],
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def encode_cursor(updated_at: float, thread_id: str) -> str:
    """An opaque cursor: the listing resumes after this thread (newest first)."""
    raw = json.dumps([updated_at, thread_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The position a cursor names; ``ValueError`` for anything ``encode_cursor`` did not
    produce."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, thread_id = json.loads(raw)
    except (ValueError, TypeError) as exc:  # binascii.Error and JSONDecodeError are both
        raise ValueError("not a cursor this server gave") from exc
    if not isinstance(updated_at, int | float) or not isinstance(thread_id, str):
        raise ValueError("not a cursor this server gave")
    return float(updated_at), thread_id


async def thread_list(
    runner: Runner,
    user_id: str,
    *,
    running: set[str],
    limit: int = THREAD_LIST_LIMIT,
    after: tuple[float, str] | None = None,
) -> list[dict[str, Any]]:
    """The user's threads in the database, newest first (``limit`` of them, after the
    position ``after``), each with a title, its plan status and whether a run is in
    progress.

    A thread's title is the task it works on (its active intent) when the protocol
    runtime recorded one, else its first message. The intents of the listed page come in
    one read; on plangate's session service a thread then costs one more bounded read
    (its state comes with the listing, its first message from its first events) --
    only when it has no intent -- however long it is. ADK's service reads each thread
    whole."""
    service = runner.session_service
    if isinstance(service, FirstUseSessionService):
        service = await service.resolved()
    listed = await service.list_sessions(app_name=runner.app_name, user_id=user_id)
    # Ties in time are ordered by id, so a cursor names one position.
    newest = sorted(listed.sessions, key=lambda s: (s.last_update_time, s.id), reverse=True)
    if after is not None:
        newest = [s for s in newest if (s.last_update_time, s.id) < after]
    page = newest[:limit]
    intents = await intent_titles(runner, user_id, [s.id for s in page])
    out: list[dict[str, Any]] = []
    for summary in page:
        title = intents.get(summary.id)
        if isinstance(service, StoreSessionService):
            session = summary
            if title is None:
                title = await service.first_user_text(
                    app_name=runner.app_name, user_id=user_id, session_id=summary.id
                )
        else:
            found = await service.get_session(
                app_name=runner.app_name, user_id=user_id, session_id=summary.id
            )
            if found is None:
                continue
            session = found
            if title is None:
                title = _first_user_text(found.events)
        out.append(
            {
                "threadId": session.id,
                "updatedAt": session.last_update_time,
                "title": clip_title(title),
                "planStatus": _plan_status(session.state),
                "branchOf": session.state.get(BRANCH_OF_KEY),
                "running": session.id in running,
            }
        )
    return out


def _first_user_text(events: list[Any]) -> str:
    for event in events:
        if event.author != "user" or event.content is None:
            continue
        text = " ".join(p.text for p in event.content.parts or [] if p.text).strip()
        if text:
            return text
    return ""


def _plan_status(state: dict[str, Any]) -> str | None:
    for key, value in state.items():
        if key.startswith("plan:") and isinstance(value, dict):
            status = value.get("status")
            return str(status) if status else None
    return None
