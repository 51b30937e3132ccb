"""The reference agent as an ACP agent: editors drive it over stdio and switch its mode.

One ACP session is one :class:`PlanSession` (same id). A prompt runs the turn through the
session and streams it as session updates. When the run pauses on a human request (plan
entry, a question, plan approval), the editor is asked inline with
``session/request_permission`` -- ACP blocks mid-turn where ADK ends the run -- and the
run continues with the bound reply, all within the same ``session/prompt``.

Mode changes are announced only once committed and only when they change what the
editor shows: a ``set_mode`` that changes nothing sends nothing, and the agent's own
changes (a confirmed entry, an approval) are sent when the run applies them.

Before any model call a prompt is checked, in this order: a slash command (``/plan``,
``/status``, ``/journal``) runs instead of a turn; a request waiting for the user's own
words (an answer, a rejection note) takes the text as that reply; a request still pending
(after a cancel or a ``session/load``) is asked again first, and the text follows once
the run stops with nothing left open.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_agent_message_text
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    CloseSessionResponse,
    DeniedOutcome,
    ForkSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PlanEntry,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionForkCapabilities,
    SessionListCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    StopReason,
)
from google.adk.agents.run_config import RunConfig
from google.adk.models.base_llm import BaseLlm
from google.adk.runners import Runner
from google.genai import types

import plangate
from plangate.acp import commands, mapping, requests
from plangate.acp.listing import CWD_KEY, TITLE_KEY, session_page, title_for, with_titles
from plangate.acp.mcp import SessionToolsets, check_servers, start_servers
from plangate.acp.plan_file import PlanFile
from plangate.adk.branches import BranchError, fork_session
from plangate.adk.contract import StreamingMode
from plangate.adk.database import failure_text
from plangate.adk.session import PlanSession
from plangate.adk.thread_runs import LeaseHeld, ThreadRuns
from plangate.adk.thread_titles import intent_titles
from plangate.agent.todos import todos_state_key
from plangate.plan.record import PendingRequest, PlanStatus
from plangate.plan.replies import ReplyError

__all__ = ["PlangateAgent"]

logger = logging.getLogger("plangate.acp")

USER_ID = "user"
BUSY_ELSEWHERE = (
    "This session has a run in progress elsewhere (a plangate server or a terminal on the "
    "same database); nothing was sent. Wait for it to end, then send again."
)


@dataclass
class LiveSession:
    """One open ACP session: its plan session, workspace and what the editor was last told."""

    id: str
    session: PlanSession
    workspace: Path
    mode: str
    entries: list[PlanEntry]
    approved: str | None = None
    """The id of the approved plan the editor's plan view was last built from."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    turn: asyncio.Task[StopReason] | None = None
    awaiting: Awaiting | None = None
    """The request the user's next message answers in their own words."""
    plan_file_for: str | None = None
    """The approval request whose plan the plan file holds."""
    spoke: bool = False
    """Whether agent text went out in this turn (our own notes then start a paragraph)."""
    threads: ThreadRuns | None = None
    """The session's run lease: one run per thread with servers and terminals."""

    @property
    def plan_file(self) -> PlanFile:
        return PlanFile(self.workspace, self.id)


@dataclass(frozen=True)
class Awaiting:
    """A request bound to the next prompt, and the plan text it showed (for approvals)."""

    request: PendingRequest
    shown: str | None


class PlangateAgent:
    """``acp.interfaces.Agent`` for the reference coding agent (plan mode, data tools).

    ``workspace``: the folder every session works in; None means each session's ``cwd``
    when it is a folder, else a copy of the sample project. ``data_dir``: where the sample
    database is built (default ``.plangate/data``).
    """

    def __init__(
        self,
        model: BaseLlm | str,
        *,
        database_url: str | None = None,
        workspace: Path | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self.model = model
        self.database_url = database_url
        self.workspace = workspace
        self.data_dir = data_dir or Path.cwd() / ".plangate" / "data"
        self._conn: Client | None = None
        self._runners: dict[Path, Runner] = {}
        self._mcp: dict[Path, SessionToolsets] = {}
        self._sessions: dict[str, LiveSession] = {}
        self._catalog: Any = None
        self._sample: Path | None = None
        self._elicitation = False
        self._background: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    # -- setup --------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        elicitation = getattr(client_capabilities, "elicitation", None)
        self._elicitation = getattr(elicitation, "form", None) is not None
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    fork=SessionForkCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
            ),
            agent_info=_agent_info(),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        servers = check_servers(mcp_servers)
        workspace = self._workspace_for(cwd)
        runner = self._runner(workspace)
        toolsets = await start_servers(servers, workspace)
        session = await PlanSession.open(
            runner,
            user_id=USER_ID,
            session_id=uuid.uuid4().hex,
            state={CWD_KEY: _folder(cwd, workspace)},
        )
        await self._attach(session.session_id, workspace, toolsets)
        live = await self._track(session, workspace)
        self._after_response(self._send(live, commands.available_commands()))
        return NewSessionResponse(
            session_id=live.id,
            modes=mapping.session_modes(live.mode),
            config_options=mapping.config_options(live.mode),
        )

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        running = self._sessions.get(session_id)
        if running is not None and running.turn is not None and not running.turn.done():
            raise RequestError(-32602, f"session '{session_id}' is running a prompt")
        servers = check_servers(mcp_servers)
        workspace = self._workspace_for(cwd)
        session = PlanSession(self._runner(workspace), user_id=USER_ID, session_id=session_id)
        stored = await session.session()
        if stored is None:
            raise RequestError(-32602, f"unknown session '{session_id}'", {"sessionId": session_id})
        await self._attach(session_id, workspace, await start_servers(servers, workspace))
        live = await self._track(session, workspace)
        await self._replay(live, stored.events)
        self._after_response(self._send(live, commands.available_commands()))
        return LoadSessionResponse(
            modes=mapping.session_modes(live.mode),
            config_options=mapping.config_options(live.mode),
        )

    async def fork_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ForkSessionResponse:
        """A new session that starts where ``session_id`` is now (history, plan state,
        pending requests, protocol state, task) and goes its own way from here."""
        running = self._sessions.get(session_id)
        if running is not None and running.turn is not None and not running.turn.done():
            raise RequestError(
                -32602,
                f"session '{session_id}' is running a prompt; fork it when the turn ends",
                {"sessionId": session_id, "code": "RUN_IN_PROGRESS"},
            )
        servers = check_servers(mcp_servers)
        workspace = self._workspace_for(cwd)
        source = PlanSession(self._runner(workspace), user_id=USER_ID, session_id=session_id)
        try:
            session = await fork_session(source)
        except BranchError as exc:
            raise RequestError(
                -32602, exc.message, {"sessionId": session_id, "code": exc.code.value}
            ) from None
        await self._attach(session.session_id, workspace, await start_servers(servers, workspace))
        live = await self._track(session, workspace)
        self._after_response(self._send(live, commands.available_commands()))
        return ForkSessionResponse(
            session_id=live.id,
            modes=mapping.session_modes(live.mode),
            config_options=mapping.config_options(live.mode),
        )

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Stop serving ``session_id``: its turn is cancelled and its MCP servers are
        stopped. What it stored stays (``session/load`` opens it again)."""
        live = self._live(session_id)
        if live.turn is not None and not live.turn.done():
            live.turn.cancel()
            await asyncio.wait({live.turn})
        await self._attach(session_id, live.workspace, [])
        del self._sessions[session_id]
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        runner = next(iter(self._runners.values()), None) or self._runner(
            self._workspace_for(cwd or "")
        )
        listed = await runner.session_service.list_sessions(
            app_name=runner.app_name, user_id=USER_ID
        )
        page = session_page(
            listed.sessions,
            cwd=cwd,
            cursor=cursor,
            default_cwd=str(self.workspace) if self.workspace is not None else None,
        )
        # The task each session works on names it, once there is one (the first message
        # named it when it was sent): one read for the page.
        titles = await intent_titles(runner, USER_ID, [s.session_id for s in page.sessions])
        return with_titles(page, titles)

    async def aclose(self) -> None:
        """Stop the sessions' MCP servers and lease keepers (the connection is gone)."""
        for toolsets in self._mcp.values():
            await toolsets.close()
        for live in self._sessions.values():
            if live.threads is not None:
                live.threads.close()

    async def _attach(self, session_id: str, workspace: Path, toolsets: list[Any]) -> None:
        """Give the session its MCP toolsets, in its workspace's agent only."""
        for folder, attached in self._mcp.items():
            await attached.attach(session_id, toolsets if folder == workspace else [])

    async def _track(self, session: PlanSession, workspace: Path) -> LiveSession:
        live = LiveSession(
            id=session.session_id,
            session=session,
            workspace=workspace,
            mode=mapping.mode_id(await session.mode()),
            entries=[],
            threads=ThreadRuns(session.runner, USER_ID),
        )
        live.entries, live.approved = await self._plan_view(live)
        self._sessions[live.id] = live
        return live

    async def _replay(self, live: LiveSession, events: list[Any]) -> None:
        """The stored conversation as session updates: messages, tool calls and results
        (a human reply shows as the canonical result the plan runtime gave it)."""
        resolutions = (await live.session.plan_state()).resolutions
        mapper = mapping.EventMapper(live.workspace)
        for event in events:
            if event.author == "user" and event.content is not None:
                for part in event.content.parts or []:
                    reply = part.function_response
                    if reply is not None and reply.id in resolutions:
                        await self._send(
                            live,
                            mapping.resolution_update(
                                reply.id,
                                reply.name or mapper.started.get(reply.id, ""),
                                resolutions[reply.id].result,
                            ),
                        )
            for update in mapper.updates(event):
                await self._send(live, update)
        for update in mapper.interrupted("No result was recorded: the run was interrupted."):
            await self._send(live, update)
        if live.entries:
            await self._send(live, mapping.plan_update(live.entries))
        pending = await live.session.pending()
        if pending:
            await self._say(live, requests.reask_notice(pending))

    def _workspace_for(self, cwd: str) -> Path:
        if self.workspace is not None:
            return self.workspace
        folder = Path(cwd).expanduser() if cwd else None
        if folder is not None and folder.is_absolute() and folder.is_dir():
            return folder.resolve()
        if self._sample is None:
            from plangate.agent.workspace import copy_sample_workspace

            self._sample = copy_sample_workspace(Path.cwd() / ".plangate" / "workspace")
        return self._sample

    def _runner(self, workspace: Path) -> Runner:
        runner = self._runners.get(workspace)
        if runner is None:
            from plangate.adk.runner import build_runner
            from plangate.agent.coding_agent import build_coding_agent
            from plangate.data import DataCatalog

            if self._catalog is None:
                self._catalog = DataCatalog(cache_dir=self.data_dir)
            agent = build_coding_agent(workspace, self.model, data=self._catalog)
            # The MCP servers each session brought: undeclared tools, gated like any other.
            self._mcp[workspace] = SessionToolsets()
            agent.tools = [*agent.tools, self._mcp[workspace]]
            runner = build_runner(agent, database_url=self.database_url)
            self._runners[workspace] = runner
        return runner

    def _live(self, session_id: str) -> LiveSession:
        live = self._sessions.get(session_id)
        if live is None:
            raise RequestError(
                -32602,
                f"unknown session '{session_id}': create it with session/new or session/load",
                {"sessionId": session_id},
            )
        return live

    # -- modes --------------------------------------------------------------------------

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        await self._switch(self._live(session_id), mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        live = self._live(session_id)
        if config_id != mapping.MODE_CONFIG_ID:
            raise RequestError(
                -32602,
                f"unknown config option '{config_id}' — available options: "
                f"{mapping.MODE_CONFIG_ID}",
                {"configId": config_id},
            )
        if not isinstance(value, str):
            raise RequestError(-32602, mapping.unknown_mode_message(str(value)))
        await self._switch(live, value)
        return SetSessionConfigOptionResponse(config_options=mapping.config_options(live.mode))

    async def _switch(self, live: LiveSession, value: str) -> None:
        """Select plan mode or leave it; the editor hears of it only once it is committed,
        and only if it changed something."""
        if value not in mapping.MODE_IDS:
            raise RequestError(
                -32602,
                mapping.unknown_mode_message(value),
                {"modeId": value, "availableModes": list(mapping.MODE_IDS)},
            )
        # A corrupt plan state shows as the default mode, yet gates writes: switching to
        # the default mode is its way out, so it resets it.
        corrupt = value == mapping.DEFAULT_MODE and await live.session.corrupt_state() is not None
        if corrupt or mapping.mode_id(await live.session.mode()) != value:
            if value == mapping.PLAN_MODE:
                # Applies at the next step boundary: the next prompt, or mid-run.
                await live.session.select_plan()
            else:
                # Cancels an active plan (a journaled user exit) or withdraws an entry.
                await live.session.leave_plan()
        await self._sync(live)

    async def _sync(self, live: LiveSession, *, plan: bool = True) -> None:
        """Tell the editor what changed since it was last told: the mode, the plan view.
        A request the next message was to answer is forgotten once it is withdrawn."""
        if live.awaiting is not None and live.awaiting.request.approval_id not in {
            p.approval_id for p in await live.session.pending()
        }:
            live.awaiting = None
        async with live.lock:
            current = mapping.mode_id(await live.session.mode())
            if current != live.mode:
                live.mode = current
                for update in mapping.mode_changed(current):
                    await self._send(live, update)
            if plan:
                entries, approved = await self._plan_view(live)
                # An approval is announced even when the steps stay the same.
                if entries != live.entries or approved not in (None, live.approved):
                    await self._send(live, mapping.plan_update(entries))
                live.entries, live.approved = entries, approved

    async def _plan_view(self, live: LiveSession) -> tuple[list[PlanEntry], str | None]:
        """The editor's plan entries, and the id of the plan if it is approved."""
        record = await live.session.record()
        stored = await live.session.session()
        todos = stored.state.get(todos_state_key(live.session.runtime.branch)) if stored else None
        approved = record.id if record and record.status is PlanStatus.APPROVED else None
        return mapping.plan_entries(record, todos), approved

    # -- turns --------------------------------------------------------------------------

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        live = self._live(session_id)
        if live.turn is not None and not live.turn.done():
            raise RequestError(-32600, "a prompt is already running in this session")
        mapper = mapping.EventMapper(live.workspace)
        live.spoke = False
        turn = asyncio.create_task(self._turn(live, mapper, mapping.prompt_text(prompt)))
        live.turn = turn
        try:
            await asyncio.wait({turn})
        except asyncio.CancelledError:  # the connection is going away
            turn.cancel()
            raise
        if turn.cancelled():
            # Journaled like Stop on the web; calls the cancel cut off get a result, so the
            # next model request stays valid. Open requests are asked again next turn.
            await live.session.note_stopped(surface="acp")
            for update in mapper.interrupted("Cancelled by the user."):
                await self._send(live, update)
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason=turn.result())

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        live = self._sessions.get(session_id)
        if live is not None and live.turn is not None and not live.turn.done():
            live.turn.cancel()

    async def _turn(self, live: LiveSession, mapper: mapping.EventMapper, text: str) -> StopReason:
        if not text:
            await self._say(live, "There is nothing to do: the prompt has no text.")
            return "end_turn"
        try:
            command = commands.parse_command(text)
            if command is not None:
                text = await self._command(live, command)
                if not text:
                    return "end_turn"
            await self._entitle(live, text)
            before = await self._protocol(live)
            stop = await self._run_turn(live, mapper, text)
            refusal = mapping.protocol_refusal(before, await self._protocol(live))
        except asyncio.CancelledError:
            raise
        except LeaseHeld:
            await self._say(live, BUSY_ELSEWHERE)
            return "end_turn"
        except Exception as exc:  # a model or tool failure must not take the connection down
            logger.exception("the turn of session %s failed", live.id)
            reason = f"The run failed: {failure_text(exc)[1]}"
            for update in mapper.interrupted(reason):
                await self._send(live, update)
            await self._say(live, f"{reason}\nThe session is saved; send a message to retry.")
            return "end_turn"
        if refusal is not None:
            await self._say(live, refusal)
            return "refusal"
        return stop

    async def _run_turn(
        self, live: LiveSession, mapper: mapping.EventMapper, text: str
    ) -> StopReason:
        """Run the prompt and every request it raises. Requests left open (after a cancel
        or a load) are asked again before any model call; the text follows once nothing
        is open."""
        queued: str | None = None if await self._take_words(live, text) else text
        while True:
            answer = await self._ask_pending(live, mapper)
            if answer is None:  # nothing open, nothing paused
                if queued is None:
                    return "end_turn"
                message: str | types.Content = queued
                queued = None
            elif isinstance(answer, str):
                if queued is not None:
                    await self._say(live, requests.not_sent_notice(queued))
                return answer  # type: ignore[return-value]
            else:
                message = answer
            await self._run(live, mapper, message)

    async def _take_words(self, live: LiveSession, text: str) -> bool:
        """Record this prompt as the user's own words for the request bound to it; False
        when no request is bound (or it is no longer open) and the text is a new message."""
        awaiting, live.awaiting = live.awaiting, None
        if awaiting is None:
            return False
        request = awaiting.request
        if request.approval_id not in {p.approval_id for p in await live.session.pending()}:
            await self._say(
                live,
                "The request this message was to answer is no longer open; "
                "it goes to the agent as a new message.",
            )
            return False
        shown = awaiting.shown
        edited = live.plan_file.edited(shown) if shown is not None else None
        await self._submit(live, request, requests.reply_with_words(request, text, edited), shown)
        return True

    async def _command(self, live: LiveSession, command: commands.Command) -> str:
        """Run a slash command; the message it leaves to send (``/plan <message>``)."""
        session = live.session
        if command.name == "status":
            stored = await session.session()
            todos = stored.state.get(todos_state_key(session.runtime.branch)) if stored else None
            await self._say(
                live,
                commands.status_markdown(
                    session_id=live.id,
                    workspace=live.workspace,
                    mode=await session.mode(),
                    record=await session.record(),
                    pending=await session.pending(),
                    todos=todos or [],
                    protocol=await self._protocol(live),
                ),
            )
            return ""
        if command.name == "journal":
            await self._say(live, commands.journal_markdown(await session.journal()))
            return ""
        if command.argument in ("off", "done"):
            said = await (
                session.leave_plan() if command.argument == "off" else session.accept_plan()
            )
            await self._say(live, said)
            await self._sync(live)
            return ""
        await self._say(live, await session.select_plan())
        await self._sync(live)
        return command.argument

    async def _entitle(self, live: LiveSession, text: str) -> None:
        """Name the session after its first message (for ``session/list``); not while a
        run is paused on a request (its resume comes first)."""
        stored = await live.session.session()
        if stored is None or stored.state.get(TITLE_KEY) or await live.session.pending():
            return
        await live.session.set_state({TITLE_KEY: title_for(text)})

    async def _protocol(self, live: LiveSession) -> dict[str, Any] | None:
        from plangate.adk.protocols import get_protocol_state

        stored = await live.session.session()
        return get_protocol_state(stored, live.session.agent.name) if stored else None

    async def _run(
        self, live: LiveSession, mapper: mapping.EventMapper, message: str | types.Content
    ) -> None:
        runtime = live.session.runtime
        mode_keys = {runtime.state_key, runtime.options.force_enter_plan_state_key} - {None}
        plan_keys = {runtime.state_key, todos_state_key(runtime.branch)}
        run_config = RunConfig(streaming_mode=StreamingMode.SSE)
        assert live.threads is not None
        async with (
            live.threads.hold(live.id),
            aclosing(live.session.run(message, run_config=run_config)) as events,
        ):
            async for event in events:
                delta = set(event.actions.state_delta) if event.actions else set()
                # A mode change applies at the step boundary, before what the step says.
                if delta & mode_keys:
                    await self._sync(live, plan=False)
                for update in mapper.updates(event):
                    await self._send(live, update)
                if delta & plan_keys:
                    await self._sync(live)
        await self._sync(live)

    async def _ask_pending(
        self, live: LiveSession, mapper: mapping.EventMapper
    ) -> types.Content | StopReason | None:
        """Ask the editor about every open request in the order the model asked them,
        recording each answer as it is given: the message that resumes the run once all
        are answered, why the turn stops with requests still open, or None when nothing
        is open or paused."""
        while True:
            # An answer can settle others (an approval withdraws open questions), so the
            # open requests are read again after each one.
            waiting = await live.session.awaiting()
            if waiting.ready:
                return waiting.message
            if not waiting.open:
                return None
            request = waiting.open[0]
            record = await live.session.record()
            shown = requests.plan_file_text(request, record) if request.kind == "exit" else None
            plan_file = live.plan_file
            if shown is not None:
                # Asked again (after a cancel or a load), the file keeps the user's edits.
                kept = plan_file.belongs_to(request.approval_id)
                written = kept or plan_file.write(shown, request.approval_id)
                live.plan_file_for = request.approval_id if written else None
            fields = requests.request_tool_call(
                request, record, plan_file.path if live.plan_file_for else None, live.workspace
            )
            await self._send(live, fields.card(started=request.call_id in mapper.started))
            mapper.started.setdefault(request.call_id, request.tool_name)
            response = await self._client().request_permission(
                session_id=live.id,
                tool_call=fields.subject(),
                options=requests.permission_options(request),
            )
            outcome = response.outcome
            if isinstance(outcome, DeniedOutcome) or outcome.outcome == "cancelled":
                return "cancelled"  # the turn was cancelled: the request stays open
            edited = plan_file.edited(shown) if shown is not None else None
            if requests.wants_words(outcome):
                words = await self._elicit_words(live, request)
                if words is None:
                    live.awaiting = Awaiting(request, shown)
                    await self._say(live, requests.next_message_notice(request))
                    return "end_turn"
                reply = requests.reply_with_words(request, words, edited)
            else:
                try:
                    reply = requests.reply_for(request, outcome, edited)
                except ValueError as exc:
                    await self._say(live, f"{exc}; the request stays open.")
                    return "end_turn"
            if reply is None:
                return "cancelled"
            recorded = await self._submit(live, request, reply, shown)
            if not recorded and request.call_id in {
                p.call_id for p in await live.session.pending()
            }:
                return "end_turn"  # refused and still open: said why; asked again next time

    async def _submit(
        self,
        live: LiveSession,
        request: PendingRequest,
        reply: types.Content,
        shown: str | None,
    ) -> bool:
        """Record one answer now (it survives a cancel or a restart) and show the result
        of every request it settled; False, with the reason said, when it was refused."""
        before = await live.session.pending()
        try:
            await live.session.submit(reply)
        except ReplyError as exc:
            if request.approval_id in {p.approval_id for p in await live.session.pending()}:
                await self._say(
                    live,
                    f"The answer was not recorded: {exc.message} ({exc.code.value}); "
                    f"{exc.hint}. The request stays open.",
                )
            else:
                # Withdrawn (the user left plan mode) or answered elsewhere meanwhile.
                await self._send(live, requests.withdrawn(request.call_id))
            return False
        self._done_with_plan_file(live, shown)
        state = await live.session.plan_state()
        still = {p.call_id for p in await live.session.pending()}
        for settled in before:
            if settled.call_id in still:
                continue
            resolution = state.resolutions.get(settled.call_id)
            if resolution is None:
                await self._send(live, requests.withdrawn(settled.call_id))
            elif resolution.decides_call and resolution.result.get("status") == "approved":
                # An allowed amendment, edit or call: the call itself runs now, and its
                # own result finishes the card.
                await self._send(live, requests.allowed(settled.call_id, resolution.result))
            else:
                await self._send(
                    live,
                    mapping.resolution_update(
                        settled.call_id, settled.tool_name, resolution.result
                    ),
                )
        await self._sync(live)
        return True

    async def _elicit_words(self, live: LiveSession, request: PendingRequest) -> str | None:
        """The user's own words through a form, where the editor has forms; None when it
        has none or the user closed it (the next message is then the reply)."""
        if not self._elicitation:
            return None
        try:
            response = await self._client().create_elicitation(
                message=requests.words_prompt(request), mode=requests.words_form(request, live.id)
            )
        except Exception as exc:  # an editor that advertised forms but cannot show one
            logger.warning("the form elicitation failed: %s", exc)
            return None
        return requests.elicited_words(response)

    @staticmethod
    def _done_with_plan_file(live: LiveSession, shown: str | None) -> None:
        """An approval was answered: its plan file has served."""
        if shown is not None:
            live.plan_file.remove()
            live.plan_file_for = None

    # -- sending ------------------------------------------------------------------------

    def _client(self) -> Client:
        if self._conn is None:
            raise RuntimeError("no client connection")
        return self._conn

    async def _send(self, live: LiveSession, update: Any) -> None:
        if isinstance(update, AgentMessageChunk):
            live.spoke = True
        await self._client().session_update(session_id=live.id, update=update)

    async def _say(self, live: LiveSession, text: str) -> None:
        await self._send(live, update_agent_message_text(f"\n\n{text}" if live.spoke else text))

    def _after_response(self, send: Any) -> None:
        """Send once the current request's response is out (it is written before this
        task first runs, and the transport keeps the order)."""
        task = asyncio.get_running_loop().create_task(send)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _folder(cwd: str, workspace: Path) -> str:
    """The session's folder as the editor named it (absolute), else its workspace."""
    return cwd if cwd and Path(cwd).is_absolute() else str(workspace)


def _agent_info() -> Implementation:
    """Who we are, and what contains the agent's commands on this machine: the title says
    plainly when there is no sandbox, the meta carries the details."""
    from plangate.sandbox import sandbox_status

    status = sandbox_status()
    title = "plangate" if status.available else "plangate (no sandbox: parser-only)"
    sandbox = {"available": status.available, "detail": status.detail, "fix": status.fix}
    return Implementation(
        name="plangate",
        title=title,
        version=plangate.__version__,
        field_meta={"plangate": {"sandbox": sandbox}},
    )
