"""``plangate chat``: the terminal front end of the coding agent.

Reads through :mod:`plangate.cli.line_input` (prompt_toolkit on a terminal, plain lines on
a pipe), shows runs through :mod:`plangate.cli.render`, and drives the session only
through the host API (``PlanSession``): ``pending()``, ``submit()``, ``awaiting()``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

from google.adk.agents.run_config import RunConfig
from google.genai import types
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from plangate.adk.contract import StreamingMode
from plangate.adk.database import failure_text
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.adk.thread_runs import LeaseHeld, ThreadRuns
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.todos import todos_state_key
from plangate.agent.workspace import copy_sample_workspace
from plangate.cli.editor import diff_text, edit_text
from plangate.cli.line_input import Interrupt, LineReader, PipeReader, TtyReader
from plangate.cli.options import (
    add_data_option,
    add_database_option,
    add_model_option,
    add_network_option,
    data_sources,
)
from plangate.cli.render import (
    protocol_line,
    render_pending,
    render_plan,
    render_protocol,
    render_reply_error,
    render_transcript,
)
from plangate.cli.run_display import WORKING, RunDisplay
from plangate.cli.run_keys import RunKeys
from plangate.cli.tables import journal_table
from plangate.cli.visible_console import visible_console
from plangate.models.config import describe_model, resolve_model
from plangate.models.demo import DemoModel
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.plan.scope import Permission
from plangate.plan.scope_text import ScopeTextError, split_scope_block, with_scope_block
from plangate.sandbox.probe import sandbox_summary

__all__ = ["add_chat_parser", "resume_command", "run_chat"]

# The answers to "keep editing / discard" after an edit, wherever it is asked.
_KEEP_EDITING = frozenset({"k", "keep", "keep editing", "e", "edit"})
_DISCARD_EDITS = frozenset({"d", "discard"})

HELP = """Commands:
  /plan             select Plan Mode (applies from the next step)
  /plan <message>   select Plan Mode, then send the message
  /plan off         leave Plan Mode (cancels an active plan) or cancel a pending entry
                    (/plan and /plan off also work while the agent is running: they
                    apply from its next step)
  /plan done        close the approved plan (accept the work): its scope and "ask for
                    each edit" stay in force until you do, even once its todos are done
  /status           mode, plan status and pending requests
  /journal          the session's governance journal
  /help             this help
  /quit             leave (the session is saved; resume with --session); works at
                    every prompt, approvals and questions included
Keys: Esc or Ctrl-C cancels a running turn; Ctrl-C again (or Ctrl-D) leaves.
Up/Down recall earlier messages; a paste keeps all its lines in one message."""

PERMISSIONS = ("amendment", "edit", "tool")
"""Requests answered by allow or refuse (the approved plan's scope, an edit, a tool)."""

APPROVE_PROMPT = (
    "Approve this plan? [a]uto within scope / a[s]k for each edit / [e]dit / [r]eject: "
)
APPROVE_CHOICES = """  a  approve; what the scope names runs without asking (anything else asks you)
  s  approve, and ask for each edit: every file write shows its diff and waits for you
  e  edit the plan first      r  reject, with a note for the agent"""
"""How an approved plan acts, chosen as it is approved (the mode that follows planning)."""


def _permission_choice(answer: str) -> Permission | None:
    """The permission an approval answer picks; None when the answer is no approval."""
    if answer in ("a", "approve", "auto"):
        return "auto"
    if answer in ("s", "ask", "ask for each edit"):
        return "ask_each_edit"
    return None


class Quit(Exception):
    """The user leaves: /quit, Ctrl-D, or a second Ctrl-C."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


def add_chat_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("chat", help="talk to the coding agent in the terminal")
    parser.add_argument(
        "--workspace", help="project folder (default: a copy of the sample project)"
    )
    parser.add_argument(
        "--session", help="resume this existing session id (default: a new session)"
    )
    add_model_option(parser)
    add_database_option(parser, "--database")
    add_data_option(parser)
    add_network_option(parser)
    parser.set_defaults(func=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    starter = _Starter(args)
    try:
        return asyncio.run(starter.run())
    except KeyboardInterrupt:
        if starter.session_id:
            print(f"\nInterrupted. Resume with: {resume_command(args, starter.session_id)}")
        return 130


def resume_command(args: argparse.Namespace, session_id: str) -> str:
    """The command that reopens this session as it was started (run from the same folder)."""
    argv = ["plangate", "chat", "--session", session_id]
    if args.workspace:
        argv += ["--workspace", str(Path(args.workspace).expanduser().resolve())]
    if args.database_url:
        argv += ["--database-url", args.database_url]
    if args.model:
        argv += ["--model", args.model]
    for spec in args.data or []:
        argv += ["--data", spec]
    if args.allow_network:
        argv.append("--allow-network")
    return shlex.join(argv)


def default_workspace(*, reset: bool) -> Path:
    """The demo workspace. A new session gets the sample as shipped; a resumed one keeps
    the folder as it is (approved edits included)."""
    path = Path.cwd() / ".plangate" / "workspace"
    if not reset and path.is_dir() and any(path.iterdir()):
        return path
    return copy_sample_workspace(path)


class Chat:
    def __init__(
        self,
        console: Console,
        session: PlanSession,
        workspace: Path,
        model: Any,
        *,
        reader: LineReader,
        resume: str,
        resumed: bool = False,
        allow_network: bool = False,
    ) -> None:
        self.console = console
        self.session = session
        self.workspace = workspace
        self.model = model
        self.reader = reader
        self.resume = resume
        self.resumed = resumed
        self.allow_network = allow_network
        self.streaming = not isinstance(model, DemoModel)
        self.threads = ThreadRuns(session.runner, session.user_id)
        """The session's run lease: one run per thread with servers and other terminals."""
        # A Ctrl-C right after another one (or after a cancelled turn) leaves.
        self.interrupted = False

    # -- the loop -----------------------------------------------------------------------

    async def run(self) -> int:
        self._header()
        try:
            if self.resumed:
                session = await self.session.session()
                render_transcript(self.console, list(session.events))
            await self._resolve_pending()
            while True:
                line = (await self._read("you> ")).strip()
                if not line:
                    continue
                if line.startswith("/"):
                    await self._command(line)
                    continue
                await self._turn(line)
        except Quit as leaving:
            # soft_wrap: the command stays one line, to copy and paste as it is.
            self.console.print(Text(f"Bye. Resume with: {self.resume}"), soft_wrap=True)
            return leaving.code
        finally:
            self.threads.close()

    async def _read(self, prompt: str, *, decision: bool = False) -> str:
        """One line from the user; raises Quit on Ctrl-D or a repeated Ctrl-C."""
        while True:
            toolbar = await self._toolbar() if self.reader.interactive else None
            got = await self.reader.read(prompt, decision=decision, toolbar=toolbar)
            if got.interrupt is Interrupt.EOF:
                raise Quit(0)
            if got.interrupt is Interrupt.CTRL_C:
                if self.interrupted:
                    raise Quit(0)
                self.interrupted = True
                self._warn("(Ctrl-C again, Ctrl-D or /quit leaves; the session is saved.)")
                continue
            self.interrupted = False
            if got.undecodable:
                self._warn(
                    "That input is not valid UTF-8 text, so nothing was sent. Type it again."
                )
                continue
            return got.text

    async def _command(self, line: str) -> None:
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            raise Quit(0)
        if name == "/help":
            self.console.print(Text(HELP))
        elif name == "/status":
            await self._status()
        elif name == "/journal":
            self.console.print(journal_table(await self.session.journal()))
        elif name == "/plan":
            if rest == "off":
                self.console.print(Text(await self.session.leave_plan(), "magenta"))
            elif rest == "done":
                self.console.print(Text(await self.session.accept_plan(), "magenta"))
            else:
                self.console.print(Text(await self.session.select_plan(), "magenta"))
                if rest:
                    await self._turn(rest)
        else:
            self._warn(f"Unknown command {name}. Type /help.")

    # -- one turn -------------------------------------------------------------------------

    async def _turn(
        self, message: str | types.Content, *, before: PlanRecord | None = None
    ) -> None:
        """Run one turn; ``before`` is the plan as the user last saw it (the answers that
        resume a run are recorded before it starts), to show the plan if it changed."""
        before = before or await self.session.record()
        before_key = (before.id, before.status, before.content_revisions) if before else None
        protocol_before = await self._protocol()
        with RunDisplay(self.console, Text(WORKING, "cyan")) as display:
            run = _RunView(self, display)
            task = asyncio.create_task(run.stream(message))
            keys = (
                RunKeys(
                    on_cancel=task.cancel,
                    on_quit=run.quit,
                    on_line=run.typed_line,
                    on_typing=run.typing,
                )
                if self.reader.interactive
                else contextlib.nullcontext()
            )
            cancelled = False
            with keys:
                try:
                    await task
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # the program is going away, not just this turn
                    cancelled = True
                await run.settle()
        if cancelled:
            await self._cancelled()
        after = await self.session.record()
        after_key = (after.id, after.status, after.content_revisions) if after else None
        if after is not None and after_key != before_key and not after.pending:
            render_plan(self.console, after)
        protocol = await self._protocol()
        if protocol:
            render_protocol(self.console, protocol, protocol_before)
        if run.quitting:
            raise Quit(130)
        if cancelled:
            if await self.session.pending():
                await self._resolve_pending()  # a request raised before the cancel
            return
        await self._resolve_pending()

    async def _cancelled(self) -> None:
        try:
            await self.session.note_stopped(surface="terminal")
            note = "Cancelled: the turn was stopped (journaled); the session is saved."
        except Exception as exc:  # the cancel stands even if the journal write fails
            note = f"Cancelled; the cancel could not be journaled ({type(exc).__name__}: {exc})."
        self.console.print(Text(note, "yellow"))
        self.console.print(Text(f"Resume later with: {self.resume}"), soft_wrap=True)
        self.console.print(Text("Type a new message, or Ctrl-C again to leave.", "dim"))
        self.interrupted = True

    # -- human-in-the-loop ----------------------------------------------------------------

    async def _resolve_pending(self) -> None:
        """Ask about each request the run paused on, one after another, recording each
        answer as it is given; then resume the run once, with every answer."""
        asked, total = 0, 0
        shown = await self.session.record()
        while True:
            waiting = await self.session.awaiting()
            if waiting.ready:
                assert waiting.message is not None
                await self._turn(waiting.message, before=shown)
                return
            if not waiting.open:
                return
            # An answer can settle others (an approval withdraws open questions), so the
            # open requests are read again after each one.
            request = waiting.open[0]
            total = total or len(waiting.open)
            asked += 1
            record = await self.session.record()
            position = (min(asked, total), total) if total > 1 else None
            render_pending(self.console, request, record, position=position)
            while True:
                reply = await self._ask(request, record)
                if reply is None:  # the request is gone (the user left plan mode)
                    return
                try:
                    await self.session.submit(reply)
                except ReplyError as exc:
                    render_reply_error(self.console, exc)
                    if exc.code in (ReplyErrorCode.STALE_REPLY, ReplyErrorCode.INVALID_REPLY):
                        continue  # ask again
                break

    async def _ask(
        self, request: PendingRequest, record: PlanRecord | None
    ) -> types.Content | None:
        """The user's reply to ``request``; None once it is no longer open."""
        if request.kind in ("exit", *PERMISSIONS) and not self.reader.interactive:
            self._warn(
                "Approving a plan needs a keypress on a prompt in a terminal, and this chat "
                "does not run in one (stdin or stdout is redirected): nothing was approved. "
                "Open the session in a terminal to review the plan."
            )
            raise Quit(1)
        prompts = {
            "enter": "Enter Plan Mode? (y)es / (n)o: ",
            "question": "Your answer (option number or text): ",
            "amendment": "Approve the amendment (the scope grows by this)? [a]pprove / [r]efuse: ",
            "edit": "Apply this edit? [a]pply / [r]efuse: ",
            "tool": "Allow this call? [a]llow / [r]efuse: ",
        }
        prompt = prompts.get(request.kind, APPROVE_PROMPT)
        if request.kind == "exit":
            self.console.print(Text(APPROVE_CHOICES))
        while True:
            answer = (await self._read(prompt, decision=True)).strip()
            if answer.startswith("/"):
                await self._command(answer)
            else:
                reply = await self._reply(request, record, answer)
                if reply is not None:
                    return reply
            if request.call_id not in {r.call_id for r in await self.session.pending()}:
                return None

    async def _reply(
        self, request: PendingRequest, record: PlanRecord | None, answer: str
    ) -> types.Content | None:
        """The reply ``answer`` gives, or None (with a message) to ask again."""
        lowered = answer.lower()
        if request.kind == "enter":
            if lowered in ("y", "yes"):
                return PlanSession.confirm_enter(request, True)
            if lowered in ("n", "no"):
                note = await self._note("Note for the agent (optional): ")
                if note is None:
                    return None
                return PlanSession.confirm_enter(request, False, note or None)
            self._warn("Please answer y or n.")
            return None
        if request.kind == "question":
            options = [str(o) for o in request.payload.get("options") or []]
            if answer.isdigit() and options:
                number = int(answer)
                if 1 <= number <= len(options):
                    return PlanSession.answer(request, options[number - 1])
                self._warn(
                    f"There is no option {number}: choose 1 to {len(options)}, "
                    "or type your answer in words."
                )
                return None
            if answer:
                return PlanSession.answer(request, answer)
            self._warn("Type an answer, or /quit to leave.")
            return None
        if request.kind in PERMISSIONS:  # an amendment, an edit review, a tool call
            if lowered in ("a", "allow", "approve", "apply", "y", "yes"):
                return PlanSession.approve(request)
            if lowered in ("r", "refuse", "n", "no"):
                note = await self._note("Why not? (optional, Enter to skip) ")
                return None if note is None else PlanSession.reject(request, note=note)
            self._warn("Please choose a or r.")
            return None
        if record is None:
            self._warn("The plan to approve could not be read; try /status.")
            return None
        permission = _permission_choice(lowered)
        if permission is not None:
            return PlanSession.approve(request, permission=permission)
        if lowered in ("e", "edit"):
            return await self._edit(request, record)
        if lowered in ("r", "reject"):
            note = await self._note("What should change? ")
            if note:
                return PlanSession.reject(request, note=note)
            if note is not None:
                self._warn("A rejection needs a note for the agent; nothing was sent.")
            return None
        self._warn("Please choose a, s, e or r.")
        return None

    async def _note(self, prompt: str) -> str | None:
        """A note for the agent; a /command typed there runs (/quit leaves) and gives
        None, so the request is asked again."""
        note = (await self._read(prompt, decision=True)).strip()
        if note.startswith("/"):
            await self._command(note)
            return None
        return note

    async def _edit(self, request: PendingRequest, record: PlanRecord) -> types.Content | None:
        """Edit the plan in $EDITOR, show the diff, then approve / keep editing / discard.
        Never approves the moment the editor closes; None goes back to the first choice."""
        # A scoped plan is edited with its scope above it, so the reviewer can narrow or
        # widen what approval grants in the same place (see plan/scope_text.py).
        shown = with_scope_block(record.content, record.scope)
        text = shown
        while True:
            edited = await asyncio.to_thread(edit_text, text)
            if edited.text is None:
                self._warn(f"Editing failed: {edited.error}. Nothing was approved; choose again.")
                return None
            text = edited.text
            try:
                content, scope = split_scope_block(text, content=record.content, scope=record.scope)
            except ScopeTextError as exc:
                self._warn(f"The plan was not approved: {exc}.")
                if await self._keep_editing():
                    continue
                return None
            content_changed = content.strip() != record.content.strip()
            scope_changed = scope is not None and scope != record.scope
            if not content_changed and not scope_changed:
                self._warn("The plan is unchanged; nothing was approved. Choose again.")
                return None
            self.console.print(
                Panel(
                    diff_text(shown, text),
                    title="Your edits",
                    border_style="green",
                    title_align="left",
                )
            )
            while True:
                choice = (
                    await self._read(
                        "Approve the edited plan? [a]uto within scope / a[s]k for each edit / "
                        "[k]eep editing / [d]iscard edits: ",
                        decision=True,
                    )
                ).strip()
                lowered = choice.lower()
                if choice.startswith("/"):
                    await self._command(choice)
                    if request.call_id not in {r.call_id for r in await self.session.pending()}:
                        return None
                elif (permission := _permission_choice(lowered)) is not None:
                    return PlanSession.approve(
                        request,
                        content=content if content_changed else None,
                        scope=scope if scope_changed else None,
                        permission=permission,
                    )
                elif lowered in _KEEP_EDITING:
                    break
                elif lowered in _DISCARD_EDITS:
                    self._warn("Edits discarded; the plan is as shown.")
                    return None
                else:
                    self._warn("Please choose a, s, k or d.")

    async def _keep_editing(self) -> bool:
        """After an edit that cannot be approved: back to the editor (nothing typed is
        lost), or drop the edits."""
        while True:
            choice = (await self._read("[k]eep editing / [d]iscard edits: ", decision=True)).strip()
            lowered = choice.lower()
            if lowered in _KEEP_EDITING:
                return True
            if lowered in _DISCARD_EDITS:
                self._warn("Edits discarded; the plan is as shown.")
                return False
            self._warn("Please choose k or d.")

    def _warn(self, message: str) -> None:
        self.console.print(Text(message, "yellow"))

    # -- status -------------------------------------------------------------------------

    async def _protocol(self) -> dict[str, Any] | None:
        from plangate.adk.protocols import get_protocol_state

        return get_protocol_state(await self.session.session(), self.session.agent.name)

    async def _toolbar(self) -> str:
        """The bottom toolbar: mode, plan status, protocol (plain text, never markup)."""
        try:
            mode = await self.session.mode()
            record = await self.session.record()
            protocol = await self._protocol()
        except Exception:  # the toolbar is a view; a read failure must not block input
            return " plangate chat · /help"
        parts = ["mode " + ("plan" if mode.active else "agent")]
        if mode.pending is not None:
            parts[0] += f" (→ {'plan' if mode.pending else 'agent'} at the next step)"
        parts.append(
            f"plan {record.status.value} rev {record.content_revisions}" if record else "no plan"
        )
        if protocol:
            parts.append(
                f"protocol {protocol.get('protocol')}@{protocol.get('version')}"
                f" · {protocol.get('phase')}"
            )
        parts.append("Esc cancels a run · /help")
        return " " + " │ ".join(parts)

    async def _status(self) -> None:
        mode = await self.session.mode()
        record = await self.session.record()
        pending = await self.session.pending()
        state = (await self.session.session()).state
        todos = state.get(todos_state_key(self.session.runtime.branch)) or []
        lines = [
            f"session   {self.session.session_id}",
            f"workspace {self.workspace}",
            f"model     {describe_model(self.model)}",
            sandbox_summary(self.allow_network),
            "mode      "
            + ("plan" if mode.active else "agent")
            + (
                f" (pending: {'plan' if mode.pending else 'agent'} at the next step)"
                if mode.pending is not None
                else ""
            ),
        ]
        if record is not None:
            lines.append(
                f"plan      {record.status.value} · revision {record.content_revisions} · {record.objective}"
            )
            if record.scope is not None:
                lines.append(f"scope     {record.scope.summary()}")
            if record.is_being_implemented():
                how = "ask for each edit" if record.permission == "ask_each_edit" else "auto"
                lines.append(f"acting    {how} within the approved scope")
        for request in pending:
            lines.append(f"waiting   {request.kind} request ({request.tool_name})")
        if todos:
            done = sum(1 for t in todos if t.get("status") == "completed")
            lines.append(f"todos     {done}/{len(todos)} completed")
        protocol = await self._protocol()
        if protocol:
            lines.append(f"protocol  {protocol_line(protocol)}")
            if protocol.get("run_status"):
                lines.append(
                    f"last run  {protocol['run_status']} {protocol.get('run_outcome_code') or ''}"
                )
        self.console.print(Panel(Text("\n".join(lines)), title="Status", title_align="left"))

    def _header(self) -> None:
        model = describe_model(self.model)
        label = " [bold black on yellow] DEMO [/]" if isinstance(self.model, DemoModel) else ""
        self.console.print(
            Panel(
                f"workspace {escape(str(self.workspace))}\nmodel     {escape(model)}{label}\n"
                f"session   {escape(self.session.session_id)}\n"
                f"{escape(sandbox_summary(self.allow_network))}\n"
                "Type a task, or /help. /plan selects Plan Mode. Esc cancels a run.",
                title="plangate chat",
                border_style="cyan",
                title_align="left",
            )
        )


BUSY_ELSEWHERE = (
    "This session has a run in progress elsewhere (a plangate server or another terminal "
    "on the same database); nothing was sent. Wait for it to end, then send again."
)


class _RunView:
    """One run on screen: streams its events, shows the line typed meanwhile, and hands
    typed lines over (``/plan`` and ``/plan off`` apply at the run's next step)."""

    def __init__(self, chat: Chat, display: RunDisplay) -> None:
        self.chat = chat
        self.display = display
        self.activity = WORKING
        self.line = ""
        self.quitting = False
        self.handlers: list[asyncio.Task[None]] = []

    async def stream(self, message: str | types.Content) -> None:
        chat = self.chat
        run_config = RunConfig(streaming_mode=StreamingMode.SSE) if chat.streaming else None
        try:
            async with chat.threads.hold(chat.session.session_id):
                async for event in chat.session.run(message, run_config=run_config):
                    self._show(event)
        except asyncio.CancelledError:
            raise
        except LeaseHeld:
            chat.console.print(Text(BUSY_ELSEWHERE, "yellow"))
        except Exception as exc:  # a model or network failure must not lose the session
            chat.console.print(
                Text(f"The run failed: {failure_text(exc)[1]}", "bold red"),
            )
            chat.console.print(Text("The session is saved; you can retry or /quit."))

    def _show(self, event: Any) -> None:
        activity = self.display.show(event)
        if activity is not None:
            self._activity(activity)

    def _activity(self, text: str) -> None:
        self.activity = text
        self._redraw()

    def _redraw(self) -> None:
        shown = Text(self.activity, "cyan")
        if self.line:
            shown.append(f"  · typed: {self.line}", "dim")
        self.display.status(shown)

    def typing(self, line: str) -> None:
        self.line = line
        self._redraw()

    def typed_line(self, line: str) -> None:
        self.handlers.append(asyncio.create_task(self._handle(line.strip())))

    def quit(self) -> None:
        self.quitting = True

    async def settle(self) -> None:
        """Wait for the typed lines still being applied (a mode switch in flight)."""
        for task in self.handlers:
            await task

    async def _handle(self, line: str) -> None:
        console, session = self.chat.console, self.chat.session
        try:
            if not line:
                return
            if line == "/plan off":
                console.print(Text(await session.leave_plan(), "magenta"))
            elif line == "/plan":
                console.print(Text(await session.select_plan(), "magenta"))
            elif line in ("/quit", "/exit"):
                console.print(Text("Leaving after this turn is cancelled.", "yellow"))
                self.quitting = True
            else:
                console.print(
                    Text(
                        f"(running: {line!r} was not sent; only /plan and /plan off apply "
                        "while the agent works. Esc cancels the run.)",
                        "yellow",
                    )
                )
        except Exception as exc:  # a failed switch is shown, never ends the run
            console.print(Text(f"{type(exc).__name__}: {exc}", "red"))


class _Starter:
    """Builds the chat inside the event loop (the store and sessions are loop-bound)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.session_id: str | None = None

    async def run(self) -> int:
        args = self.args
        from plangate.cli.database import prepare_or_report

        failed = await prepare_or_report("chat", args.database_url)
        if failed is not None:
            return failed
        console = visible_console()
        try:
            model = resolve_model(args.model, surface="terminal")
        except ValueError as exc:
            console.print(Text(str(exc), "red"))
            return 2
        if args.workspace:
            workspace = Path(args.workspace).expanduser().resolve()
            if not workspace.is_dir():
                console.print(Text(f"workspace {workspace} is not a folder", "red"))
                return 2
        else:
            workspace = default_workspace(reset=not args.session)
        from plangate.data import DataCatalog, DataError

        catalog = DataCatalog(cache_dir=Path.cwd() / ".plangate" / "data")
        try:
            for name, path in data_sources(args.data):
                catalog.register(name, Path(path).expanduser())
        except (ValueError, DataError) as exc:
            console.print(Text(f"--data: {exc}", "red"))
            return 2
        agent = build_coding_agent(workspace, model, data=catalog, allow_network=args.allow_network)
        runner = build_runner(agent, database_url=args.database_url)
        if args.session:
            session = await PlanSession.find(runner, session_id=args.session)
            if session is None:
                print(
                    f"plangate chat: no session {args.session!r} in this database "
                    "(check the id, or leave out --session to start a new one)",
                    file=sys.stderr,
                )
                return 2
        else:
            session = await PlanSession.open(runner, session_id=uuid.uuid4().hex[:12])
        self.session_id = session.session_id
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
        reader: LineReader = (
            TtyReader(Path.cwd() / ".plangate" / "chat-history") if interactive else PipeReader()
        )
        chat = Chat(
            console,
            session,
            workspace,
            model,
            reader=reader,
            resume=resume_command(args, session.session_id),
            resumed=bool(args.session),
            allow_network=args.allow_network,
        )
        return await chat.run()
