"""``plangate chat``: the terminal front end of the coding agent."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from google.adk.agents.run_config import RunConfig, StreamingMode
from google.genai import types
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from plangate.adk.database import failure_text
from plangate.adk.runner import build_runner
from plangate.adk.session import PlanSession
from plangate.agent.coding_agent import build_coding_agent
from plangate.agent.todos import todos_state_key
from plangate.agent.workspace import copy_sample_workspace
from plangate.cli.options import (
    add_data_option,
    add_database_option,
    add_model_option,
    add_network_option,
    data_sources,
)
from plangate.cli.render import (
    protocol_line,
    render_call,
    render_pending,
    render_plan,
    render_protocol,
    render_reply_error,
    render_result,
    render_todos,
)
from plangate.models.config import describe_model, resolve_model
from plangate.models.demo import DemoModel
from plangate.plan.record import PendingRequest, PlanRecord
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.sandbox.probe import sandbox_summary

__all__ = ["add_chat_parser", "run_chat"]

HELP = """Commands:
  /plan             select Plan Mode (applies from the next step)
  /plan <message>   select Plan Mode, then send the message
  /plan off         leave Plan Mode (cancels an active plan) or cancel a pending entry
                    (/plan and /plan off also work while the agent is running: they
                    apply from its next step)
  /status           mode, plan status and pending requests
  /journal          the session's governance journal
  /help             this help
  /quit             leave (the session is saved; resume with --session)"""


def add_chat_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("chat", help="talk to the coding agent in the terminal")
    parser.add_argument(
        "--workspace", help="project folder (default: a copy of the sample project)"
    )
    parser.add_argument("--session", help="resume this session id (default: a new session)")
    add_model_option(parser)
    add_database_option(parser, "--database")
    add_data_option(parser)
    add_network_option(parser)
    parser.set_defaults(func=run_chat)


def run_chat(args: argparse.Namespace) -> int:
    import asyncio

    try:
        return asyncio.run(Chat.create(args).run())
    except KeyboardInterrupt:
        return 130


def default_workspace() -> Path:
    return copy_sample_workspace(Path.cwd() / ".plangate" / "workspace")


class Chat:
    def __init__(
        self,
        console: Console,
        session: PlanSession,
        workspace: Path,
        model: Any,
        *,
        allow_network: bool = False,
    ) -> None:
        self.console = console
        self.session = session
        self.workspace = workspace
        self.model = model
        self.allow_network = allow_network
        self.streaming = not isinstance(model, DemoModel)

    @classmethod
    def create(cls, args: argparse.Namespace) -> _Starter:
        return _Starter(args)

    # -- the loop -----------------------------------------------------------------------

    async def run(self) -> int:
        self._header()
        await self._resolve_pending()
        while True:
            line = self._input("you> ")
            if line is None:
                self.console.print(
                    f"\nBye. Resume with: plangate chat --session {self.session.session_id}"
                )
                return 0
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if await self._command(line) == "quit":
                    self.console.print(
                        f"Bye. Resume with: plangate chat --session {self.session.session_id}"
                    )
                    return 0
                continue
            await self._turn(line)

    async def _command(self, line: str) -> str | None:
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return "quit"
        if name == "/help":
            self.console.print(HELP)
        elif name == "/status":
            await self._status()
        elif name == "/journal":
            await self._journal()
        elif name == "/plan":
            if rest == "off":
                self.console.print(Text(await self.session.leave_plan(), "magenta"))
            else:
                self.console.print(Text(await self.session.select_plan(), "magenta"))
                if rest:
                    await self._turn(rest)
        else:
            self._warn(f"Unknown command {name}. Type /help.")
        return None

    async def _turn(
        self, message: str | types.Content, *, before: PlanRecord | None = None
    ) -> None:
        """Run one turn; ``before`` is the plan as the user last saw it (the answers that
        resume a run are recorded before it starts), to show the plan if it changed."""
        before = before or await self.session.record()
        before_key = (before.id, before.status, before.content_revisions) if before else None
        protocol_before = await self._protocol()
        streamed = False
        run_config = RunConfig(streaming_mode=StreamingMode.SSE) if self.streaming else None
        with self.console.status("[cyan]working…", spinner="dots") as status:
            typed = _TypedDuringRun(self)
            typed.start()
            try:
                async for event in self.session.run(message, run_config=run_config):
                    streamed = self._show(event, streamed, status)
            except Exception as exc:  # a model or network failure must not lose the session
                self.console.print(
                    Text(f"The run failed: {failure_text(exc)[1]}", style="bold red")
                )
                self.console.print("The session is saved; you can retry or /quit.")
            finally:
                await typed.stop()
        after = await self.session.record()
        after_key = (after.id, after.status, after.content_revisions) if after else None
        if after is not None and after_key != before_key and not after.pending:
            render_plan(self.console, after)
        protocol = await self._protocol()
        if protocol:
            render_protocol(self.console, protocol, protocol_before)
        await self._resolve_pending()

    def _show(self, event: Any, streamed: bool, status: Any) -> bool:
        parts = (event.content.parts if event.content else []) or []
        for part in parts:
            if part.text and not getattr(part, "thought", False):
                # Model text is never Rich markup: "[demo]" or "[a]" must print as typed.
                if event.partial:
                    self.console.print(Text(part.text), end="")
                    streamed = True
                elif streamed:
                    self.console.print()
                    streamed = False
                else:
                    self.console.print(Text.assemble(("● ", "bold"), part.text))
            elif part.function_call is not None:
                render_call(
                    self.console, part.function_call.name or "", dict(part.function_call.args or {})
                )
                status.update(f"[cyan]running {part.function_call.name}…")
            elif part.function_response is not None:
                name = part.function_response.name or ""
                result = dict(part.function_response.response or {})
                render_result(self.console, name, result)
                if name == "todo_write" and "todos" in result:
                    render_todos(self.console, result["todos"])
                status.update("[cyan]working…")
        return streamed

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
                if reply is None:  # the user left plan mode or quit the prompt
                    return
                try:
                    await self.session.submit(reply)
                except ReplyError as exc:
                    render_reply_error(self.console, exc)
                    if exc.code in (ReplyErrorCode.STALE_REPLY, ReplyErrorCode.INVALID_REPLY):
                        continue  # ask again
                break

    async def _ask(self, request: PendingRequest, record: Any) -> types.Content | None:
        while True:
            if request.kind == "enter":
                answer = self._input("Enter Plan Mode? (y)es / (n)o: ")
            elif request.kind == "question":
                answer = self._input("Your answer (option number or text): ")
            else:
                answer = self._input(
                    "Approve this plan? [a]pprove / [e]dit then approve / [r]eject: "
                )
            if answer is None:
                return None
            answer = answer.strip()
            if answer.startswith("/"):
                await self._command(answer)
                if not await self.session.pending():
                    return None
                continue
            reply = self._reply(request, record, answer)
            if reply is not None:
                return reply

    def _reply(self, request: PendingRequest, record: Any, answer: str) -> types.Content | None:
        lowered = answer.lower()
        if request.kind == "enter":
            if lowered in ("y", "yes"):
                return PlanSession.confirm_enter(request, True)
            if lowered in ("n", "no"):
                note = self._input("Note for the agent (optional): ") or None
                return PlanSession.confirm_enter(request, False, note)
        elif request.kind == "question":
            options = request.payload.get("options") or []
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return PlanSession.answer(request, options[int(answer) - 1])
            if answer:
                return PlanSession.answer(request, answer)
        else:
            if lowered in ("a", "approve"):
                return PlanSession.approve(request)
            if lowered in ("e", "edit"):
                edited = self._edit(record.content)
                if edited is None:
                    self._warn("The editor failed; nothing was approved.")
                    return None
                if edited.strip() == record.content.strip():
                    self.console.print("[dim]No changes; approving as shown.[/]")
                    return PlanSession.approve(request)
                self._diff(record.content, edited)
                return PlanSession.approve(request, content=edited)
            if lowered in ("r", "reject"):
                note = self._input("What should change? ")
                if note and note.strip():
                    return PlanSession.reject(request, note=note.strip())
                self._warn("A rejection needs a note for the agent.")
                return None
        self._warn("Please choose one of the options shown.")
        return None

    def _warn(self, message: str) -> None:
        self.console.print(Text(message, "yellow"))

    def _edit(self, content: str) -> str | None:
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as handle:
            handle.write(content)
            path = handle.name
        try:
            result = subprocess.run([*shlex.split(editor), path], check=False)
            if result.returncode != 0:
                return None
            return Path(path).read_text()
        except OSError as exc:
            self.console.print(f"[red]Could not start the editor {editor!r}: {exc}[/]")
            return None
        finally:
            Path(path).unlink(missing_ok=True)

    def _diff(self, old: str, new: str) -> None:
        diff = difflib.unified_diff(
            old.splitlines(), new.splitlines(), "shown", "edited", lineterm=""
        )
        lines = list(diff)[2:]
        text = "\n".join(
            f"[green]{line}[/]"
            if line.startswith("+")
            else f"[red]{line}[/]"
            if line.startswith("-")
            else line
            for line in lines
        )
        self.console.print(
            Panel(
                text or "(no changes)", title="Your edits", border_style="green", title_align="left"
            )
        )

    # -- status -------------------------------------------------------------------------

    async def _protocol(self) -> dict[str, Any] | None:
        from plangate.adk.protocols import get_protocol_state

        return get_protocol_state(await self.session.session(), self.session.agent.name)

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
        self.console.print(Panel(escape("\n".join(lines)), title="Status", title_align="left"))

    async def _journal(self) -> None:
        for entry in await self.session.journal():
            event = entry.event
            change = (
                f"{event.from_state or '-'} → {event.to_state or '-'}" if event.to_state else ""
            )
            detail = (
                event.detail.get("tool")
                or event.detail.get("reason")
                or event.detail.get("note")
                or ""
            )
            self.console.print(
                f"{entry.seq:>4} {event.kind:<18} {event.actor:<8} {change:<28} rev {event.revision} {detail}"
            )

    def _header(self) -> None:
        model = describe_model(self.model)
        label = " [bold black on yellow] DEMO [/]" if isinstance(self.model, DemoModel) else ""
        self.console.print(
            Panel(
                f"workspace {escape(str(self.workspace))}\nmodel     {escape(model)}{label}\n"
                f"session   {escape(self.session.session_id)}\n"
                f"{escape(sandbox_summary(self.allow_network))}\n"
                "Type a task, or /help. /plan selects Plan Mode.",
                title="plangate chat",
                border_style="cyan",
                title_align="left",
            )
        )

    def _input(self, prompt: str) -> str | None:
        try:
            return self.console.input(Text(prompt, style="bold"))
        except EOFError:
            return None


class _TypedDuringRun:
    """Lines typed while the agent runs. ``/plan`` and ``/plan off`` apply through the
    safe path (recorded now, applied at the run's next step); anything else is set
    aside with a note, because the prompt is not open."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self.buffer = b""
        self.fd: int | None = None
        self.worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        try:
            fd = sys.stdin.fileno()
            asyncio.get_running_loop().add_reader(fd, self._readable)
        except (AttributeError, OSError, ValueError, NotImplementedError):
            return  # no readable terminal (or an event loop without fd readers)
        self.fd = fd
        self.worker = asyncio.create_task(self._work())

    async def stop(self) -> None:
        if self.fd is not None:
            asyncio.get_running_loop().remove_reader(self.fd)
            self.fd = None
        if self.worker is not None:
            await self.lines.join()
            self.worker.cancel()
            self.worker = None

    def _readable(self) -> None:
        assert self.fd is not None
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.fd)
            self.fd = None
            return
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self.lines.put_nowait(line.decode("utf-8", "replace").strip())

    async def _work(self) -> None:
        while True:
            line = await self.lines.get()
            try:
                await self._handle(line)
            except Exception as exc:  # a failed switch is shown, never ends the run
                self.chat.console.print(Text(f"{type(exc).__name__}: {exc}", "red"))
            finally:
                self.lines.task_done()

    async def _handle(self, line: str) -> None:
        console, session = self.chat.console, self.chat.session
        if not line:
            return
        if line == "/plan off":
            console.print(Text(await session.leave_plan(), "magenta"))
        elif line == "/plan":
            console.print(Text(await session.select_plan(), "magenta"))
        else:
            console.print(
                Text(
                    f"(running: {line!r} was not sent; only /plan and /plan off apply while "
                    "the agent works)",
                    "yellow",
                )
            )


class _Starter:
    """Builds the chat inside the event loop (the store and sessions are loop-bound)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    async def run(self) -> int:
        args = self.args
        from plangate.cli.database import prepare_or_report

        failed = await prepare_or_report("chat", args.database_url)
        if failed is not None:
            return failed
        console = Console()
        try:
            model = resolve_model(args.model)
        except ValueError as exc:
            console.print(f"[red]{exc}[/]")
            return 2
        if args.workspace:
            workspace = Path(args.workspace).expanduser().resolve()
            if not workspace.is_dir():
                console.print(f"[red]workspace {workspace} is not a folder[/]")
                return 2
        else:
            workspace = default_workspace()
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
        session_id = args.session or uuid.uuid4().hex[:12]
        session = await PlanSession.open(runner, session_id=session_id)
        chat = Chat(console, session, workspace, model, allow_network=args.allow_network)
        return await chat.run()
