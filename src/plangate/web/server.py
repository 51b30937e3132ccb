"""The web surface: an AG-UI endpoint, thread read-back, and the page, on Starlette.

Endpoints
    GET  /                          the page (static HTML, JS, CSS; no build step)
    GET  /health                    liveness
    GET  /api/info                  agent and model
    POST /api/agent                 an AG-UI run (RunAgentInput in, SSE events out)
    GET  /api/threads                the threads in the database, newest first
    GET  /api/threads/{id}          messages, state, pending interrupts, journal
    GET  /api/threads/{id}/journal  the governance journal (plan and protocol events)
    GET  /api/threads/{id}/live     the thread's live events (SSE), from whichever server
                                    runs it (several servers on PostgreSQL: LISTEN/NOTIFY)
    GET  /api/live                  every thread's live events (SSE), as {threadId, event}
    POST /api/threads/{id}/mode     the Plan/Agent toggle (applies at the next step of a run)
    POST /api/threads/{id}/leave-plan  the user's exit from Plan Mode (cancels the plan)
    POST /api/threads/{id}/close-plan  the user closes the approved plan (ends its grant)
    POST /api/threads/{id}/stop     stop the run in progress (journaled)

Safe to expose: loopback without a token by default (Host checked against loopback
names, so DNS rebinding cannot reach it), a bearer token everywhere else; no CORS;
JSON-only POSTs from the same origin; a body size limit; one run at a time per thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import json
import logging
import re
import secrets
import socket
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from ag_ui.core import PROTOCOL_VERSION, BaseEvent, RunAgentInput, RunErrorEvent
from google.adk.agents import LlmAgent
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.runners import Runner
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plangate.adk.branches import BranchError, delete_session, fork_session
from plangate.adk.database import (
    DatabaseError,
    database_error,
    database_health,
)
from plangate.adk.session import PlanSession
from plangate.adk.setup import plan_runtime
from plangate.adk.thread_events import READY, Subscription, ThreadEvents, change_note
from plangate.adk.thread_runs import Lease, LeaseHeld, ThreadRuns
from plangate.errors import ErrorCode
from plangate.store.fence import LeaseLost
from plangate.store.leases import new_holder
from plangate.store.storable import clean_parameters
from plangate.store.urls import resolve_database_url, sqlite_path
from plangate.web.agui import (
    BadRunInput,
    StateKeys,
    event_text,
    lease_lost_event,
    prepare_run,
    run_events,
    send_failed_event,
    sse_frame,
    stopped_event,
)
from plangate.web.health import HealthProbe
from plangate.web.threads import (
    THREAD_LIST_LIMIT,
    decode_cursor,
    encode_cursor,
    journal_json,
    thread_journal,
    thread_json,
    thread_list,
)

__all__ = ["LOOPBACK_HOSTS", "create_app", "is_loopback", "serve"]

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
PUBLIC_PATHS = ("/", "/health")
PUBLIC_PREFIXES = ("/static/",)

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def _error(status: int, code: ErrorCode, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(
        {"error": message, "code": str(code)}, status_code=status, headers=headers or None
    )


T = TypeVar("T")


class Guard:
    """Host, origin and token checks in front of every request, and security headers."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        require_token: bool,
        token: str | None,
        allowed_hosts: Iterable[str] | None,
    ) -> None:
        self.app = app
        self.require_token = require_token
        self.token = token
        self.allowed_hosts = {h.lower() for h in allowed_hosts} if allowed_hosts else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, self._with_headers(send))
            return
        await self.app(scope, receive, self._with_headers(send))

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.allowed_hosts is not None and _hostname(host) not in self.allowed_hosts:
            return _error(400, ErrorCode.BAD_HOST, f"host {host!r} is not served here")
        origin = headers.get("origin")
        if scope["method"] not in ("GET", "HEAD") and origin is not None:
            expected = f"{scope.get('scheme', 'http')}://{host}"
            if origin.lower() != expected.lower():
                return _error(403, ErrorCode.CROSS_ORIGIN, "cross-origin requests are refused")
        path: str = scope["path"]
        if self.require_token and not _is_public(path):
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not secrets.compare_digest(
                value.strip().encode(), (self.token or "").encode()
            ):
                return _error(
                    401,
                    ErrorCode.UNAUTHORIZED,
                    "a bearer token is required (open the URL printed by plangate serve)",
                    **{"WWW-Authenticate": "Bearer"},
                )
        return None

    @staticmethod
    def _with_headers(send: Send) -> Send:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        return sending


def _is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _hostname(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# -- handlers -----------------------------------------------------------------------------


DEFAULT_MAX_RUNS = 64
"""Runs in progress one server admits by default. Each holds a model call, tool calls and a
database connection; past the machine's capacity every run slows, so the next waits at
the balancer (or the client's retry) instead."""
RETRY_AFTER_SECONDS = 2


class WebState:
    def __init__(self, runner: Runner, user_id: str, max_body_bytes: int, about: dict) -> None:
        self.runner = runner
        self.user_id = user_id
        self.max_body_bytes = max_body_bytes
        self.about = about
        self.runs: dict[str, asyncio.Task[None] | None] = {}
        """Threads with a run in progress (None while the run is being prepared)."""
        self.stopping: set[str] = set()
        """Threads whose run the user stopped (the run journals it as it ends)."""
        self.threads = ThreadRuns(runner, user_id)
        """Threads with a run in progress across every process on the database (leases)."""
        self.live = ThreadEvents(origin=new_holder())
        """Live events of the threads, to and from every process on the database."""
        self.max_runs = DEFAULT_MAX_RUNS
        """Runs in progress this server admits; past it a new one gets 503."""
        self.health = HealthProbe(lambda: database_health(runner), sqlite_file=_sqlite_file(runner))
        """``/health``'s one database check at a time, answered within a bound."""

    def publish(self, thread_id: str, event_json: str) -> None:
        self.live.publish(self.threads.thread_key(thread_id), event_json)

    def plan_session(self, thread_id: str) -> PlanSession:
        return PlanSession(self.runner, user_id=self.user_id, session_id=thread_id)

    async def exists(self, thread_id: str) -> bool:
        session = await self.plan_session(thread_id).session(events=False)
        return session is not None

    async def create(self, thread_id: str) -> None:
        """Create the thread's session, just found absent (no second look, as
        ``PlanSession.open`` would take); one created meanwhile is kept."""
        with contextlib.suppress(AlreadyExistsError):
            await self.runner.session_service.create_session(
                app_name=self.runner.app_name, user_id=self.user_id, session_id=thread_id
            )


def _sqlite_file(runner: Runner) -> Path | None:
    """The SQLite file of the plan store (the one database every surface shares)."""
    runtime = plan_runtime(runner.agent) if isinstance(runner.agent, LlmAgent) else None
    if runtime is None:
        return None
    try:
        return sqlite_path(resolve_database_url(runtime.database_url))
    except ValueError:
        return None


def _web(request: Request) -> WebState:
    return request.app.state.web


def _static_dir() -> Path:
    return Path(str(resources.files("plangate.web").joinpath("static")))


async def index(request: Request) -> Response:
    html = (_static_dir() / "index.html").read_text(encoding="utf-8")
    return HTMLResponse(html, headers={"Cache-Control": "no-store"})


async def health(request: Request) -> Response:
    """Liveness and the database, within 100 ms: 503 with the problem's code when the
    server cannot take runs (a load balancer stops sending them here; the page says why).
    See ``plangate.web.health``."""
    found = await _web(request).health.read()
    return JSONResponse(
        found.as_json(), status_code=found.status_code, headers={"Cache-Control": "no-store"}
    )


async def database_failed(request: Request, exc: Exception) -> Response:
    """A request the database could not serve: its code and a plain line, never the
    statement or the driver's text."""
    error = database_error(exc)
    status = 422 if error.code is ErrorCode.TEXT_NOT_STORABLE else 503
    return _error(status, error.code, error.line())


async def info(request: Request) -> Response:
    return JSONResponse(_web(request).about)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRunInput(f"the request body is larger than {limit} bytes", status=413)
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise BadRunInput(f"the request body is larger than {limit} bytes", status=413)
    return bytes(body)


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "body"
        problems.append(f"{where}: {error['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "invalid RunAgentInput: " + "; ".join(problems) + more


async def _parse_input(request: Request, limit: int) -> RunAgentInput:
    if not _sends_json(request):
        raise BadRunInput("send the RunAgentInput as Content-Type: application/json", status=415)
    body = await _read_body(request, limit)
    data = _loads(body)
    if not isinstance(data, dict):
        raise BadRunInput("the body must be a JSON object (a RunAgentInput)", status=400)
    try:
        run_input = RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise BadRunInput(_validation_message(exc)) from None
    if not THREAD_ID.match(run_input.thread_id):
        raise BadRunInput(
            "threadId must be 1-128 characters: letters, digits and _ . : - "
            "(starting with a letter or digit)"
        )
    if not run_input.run_id or len(run_input.run_id) > 128:
        raise BadRunInput("runId must be 1-128 characters")
    return run_input


async def agent(request: Request) -> Response:
    """Run the agent on one thread and stream AG-UI events as SSE."""
    web = _web(request)
    try:
        run_input = await _parse_input(request, web.max_body_bytes)
    except BadRunInput as exc:
        return _error(exc.status, ErrorCode.BAD_INPUT, exc.message)
    thread_id = run_input.thread_id
    if thread_id in web.runs:
        return _error(
            409,
            ErrorCode.RUN_IN_PROGRESS,
            f"thread {thread_id!r} already has a run in progress; wait for it",
        )
    if len(web.runs) >= web.max_runs:
        # Nothing was read or written for this request: the client retries as it is.
        response = _error(
            503,
            ErrorCode.SERVER_BUSY,
            f"this server runs {len(web.runs)} runs, as many as it admits; "
            f"retry in {RETRY_AFTER_SECONDS} s",
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    web.runs[thread_id] = None  # reserved before any await: no second run can slip in
    try:
        # Other processes on the same database: the thread's lease decides.
        lease = await web.threads.start(thread_id, run_input.run_id)
    except LeaseHeld:
        web.runs.pop(thread_id, None)
        return _error(
            409,
            ErrorCode.RUN_IN_PROGRESS,
            f"thread {thread_id!r} already has a run in progress on another server; wait for it",
        )
    except BaseException:
        web.runs.pop(thread_id, None)
        raise
    try:
        session = web.plan_session(thread_id)
        existed = await web.exists(thread_id)
        prepared = await prepare_run(session, run_input, new_thread=not existed)
        if not existed and prepared.stale is None and not prepared.replies:
            await web.create(thread_id)
    except BadRunInput as exc:
        await _end_run(web, thread_id, lease)
        return _error(exc.status, ErrorCode.BAD_INPUT, exc.message)
    except BaseException:
        await _end_run(web, thread_id, lease)
        raise

    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def produce() -> None:
        # The run belongs to the thread, not to the connection: a reload or a dropped
        # connection does not cut an agent off in the middle of a tool call.
        current = asyncio.current_task()
        assert current is not None
        lost: list[bool] = []

        def stop_lost_run() -> None:
            lost.append(True)
            current.cancel()

        def emit(event: BaseEvent) -> None:
            # To this response, and to whoever follows the thread from any server: one
            # serialisation for both.
            event_json = event_text(event)
            queue.put_nowait(sse_frame(event_json))
            web.publish(thread_id, event_json)

        try:
            await web.threads.keep(lease, stop_lost_run)
            async for event in run_events(
                session, prepared, thread_id=thread_id, run_id=run_input.run_id
            ):
                if isinstance(event, RunErrorEvent) and await _lost_lease(web):
                    # A run that woke after losing its thread can fail in ADK's own
                    # stale-session check before plangate's fence refuses it: the
                    # reason is still the lost lease.
                    event = lease_lost_event()
                emit(event)
        except asyncio.CancelledError:
            if lost:
                # The lease could not be renewed in time (the database was away for the
                # whole lease) and another server took the thread: stop rather than run
                # twice, and say so.
                emit(lease_lost_event())
            elif thread_id in web.stopping:
                # The user pressed Stop: end the stream with a terminal event, journal it.
                emit(stopped_event())
                await session.note_stopped(surface="web")
            else:
                raise  # the server is shutting down
        except Exception:
            # ``run_events`` never raises: what fails here is sending an event. The stream
            # still ends with a terminal event rather than just stopping.
            logger.exception("could not send an event of the run on thread %s", thread_id)
            with contextlib.suppress(Exception):
                emit(send_failed_event())
        finally:
            web.stopping.discard(thread_id)
            # Free the thread before the stream ends: a client that sends its next run
            # right after the last event must not be refused.
            try:
                await _end_run(web, thread_id, lease)
            finally:
                queue.put_nowait(None)

    web.runs[thread_id] = asyncio.create_task(produce(), name=f"plangate-run-{thread_id}")

    async def stream() -> AsyncIterator[str]:
        # The frames queued by the time the response sends go out in one write: events
        # often come several at once (a run's start and its state, a message's start,
        # text and end), and each write is a pass through the middleware and a syscall.
        while (frame := await queue.get()) is not None:
            frames = [frame]
            while not queue.empty():
                following = queue.get_nowait()
                if following is None:
                    yield "".join(frames)
                    return
                frames.append(following)
            yield "".join(frames)

    return RunResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class RunResponse(StreamingResponse):
    """A run's own event stream, which needs no watch for its client going away: the run
    belongs to the thread and ends by itself, and so does this stream with it.

    Starlette's streaming response otherwise runs the stream and a disconnect listener in
    a task group of their own, for every run: two tasks and a cancel scope more."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A server may refuse a write to a client that left: the rest is for nobody.
        with contextlib.suppress(OSError):
            await self.stream_response(send)


async def _end_run(web: WebState, thread_id: str, lease: Lease) -> None:
    """Free the thread here and for the other processes (an unreleased lease would only
    delay the next run until it expires)."""
    web.runs.pop(thread_id, None)
    try:
        # The run's last events reach the other servers before its thread is free there:
        # every server then shows a thread's runs one after the other, never overlapping.
        await web.live.flush()
        await web.threads.finish(lease)
    except Exception:
        logger.warning("could not release the lease of thread %s", thread_id, exc_info=True)


async def _thread_or_404(request: Request) -> tuple[WebState, str] | Response:
    web = _web(request)
    thread_id = request.path_params["thread_id"]
    if not THREAD_ID.match(thread_id):
        return _error(422, ErrorCode.BAD_INPUT, "not a valid thread id")
    if not await web.exists(thread_id):
        return _error(404, ErrorCode.NO_THREAD, f"no thread {thread_id!r}")
    return web, thread_id


async def thread(request: Request) -> Response:
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    running = thread_id in web.runs or await web.threads.running_elsewhere(thread_id)
    data = await thread_json(web.plan_session(thread_id), running=running)
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


async def journal(request: Request) -> Response:
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    entries = await thread_journal(web.plan_session(thread_id))
    return JSONResponse(
        {"threadId": thread_id, "journal": journal_json(entries)},
        headers={"Cache-Control": "no-store"},
    )


async def leave_plan(request: Request) -> Response:
    """The user's explicit exit from Plan Mode (the page's Agent toggle): the plan is
    cancelled and journaled, pending requests are withdrawn, the selection becomes Agent.
    During a run the exit is recorded and applied at the run's next step boundary."""
    return await _select_mode(request, "agent")


async def close_plan(request: Request) -> Response:
    """The user closes the approved plan (accepts the work): its scope and permission
    stop applying, journaled as ``plan.closed`` by the user. Completed todos never do
    this. 409 ``INVALID_STATE`` when no approved plan is open."""
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    done = await _plan_step(
        request, web, thread_id, lambda session: session.close_plan(actor="user", reason="accepted")
    )
    if isinstance(done, Response):
        return done
    closed, data = done
    if not closed:
        return _error(
            409,
            ErrorCode.INVALID_STATE,
            "no approved plan is open in this thread (it may already be closed)",
        )
    web.publish(thread_id, change_note(thread_id, "plan:closed"))
    message = "Closed the approved plan: its scope and permission no longer apply."
    return JSONResponse({"message": message, **data}, headers={"Cache-Control": "no-store"})


async def select_mode(request: Request) -> Response:
    """The Plan/Agent toggle: ``{"mode": "plan" | "agent"}``. During a run the selection
    is recorded and applies at the next step boundary; between runs Agent leaves Plan
    Mode at once and Plan applies from the next message."""
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    try:
        body = await _json_body(request, _web(request).max_body_bytes)
    except BadRunInput as exc:
        return _error(exc.status, ErrorCode.BAD_INPUT, exc.message)
    mode = body.get("mode")
    if mode not in ("plan", "agent"):
        return _error(422, ErrorCode.BAD_INPUT, "'mode' must be 'plan' or 'agent'")
    return await _select_mode(request, mode)


def _sends_json(request: Request) -> bool:
    """Whether the body is declared JSON: a browser cannot send that cross-origin without
    a preflight, so it also keeps other sites' forms out."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return content_type == "application/json"


async def _select_mode(request: Request, mode: str) -> Response:
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    done = await _plan_step(
        request,
        web,
        thread_id,
        lambda session: session.select_plan() if mode == "plan" else session.leave_plan(),
    )
    if isinstance(done, Response):
        return done
    message, data = done
    web.publish(thread_id, change_note(thread_id, f"mode:{mode}"))
    return JSONResponse({"message": message, **data}, headers={"Cache-Control": "no-store"})


async def _plan_step(
    request: Request,
    web: WebState,
    thread_id: str,
    step: Callable[[PlanSession], Awaitable[T]],
) -> tuple[T, dict[str, Any]] | Response:
    """Run a user's plan step (a mode switch, closing the plan) and read the thread back.
    Between runs no run may start meanwhile; a 409 when the session is busy."""
    if not _sends_json(request):
        return _error(415, ErrorCode.BAD_INPUT, "send Content-Type: application/json")
    session = web.plan_session(thread_id)
    running = thread_id in web.runs
    if not running:
        web.runs[thread_id] = None  # no run may start while the plan changes
    try:
        result = await step(session)
        data = await thread_json(session, running=running)
    except RuntimeError as exc:
        return _error(409, ErrorCode.MODE_NOT_CHANGED, str(exc))
    finally:
        if not running:
            web.runs.pop(thread_id, None)
    return result, data


async def stop(request: Request) -> Response:
    """Stop the thread's run in progress (journaled); the stream ends with RUN_ERROR
    ``RUN_STOPPED``. Stopping when nothing runs changes nothing."""
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    task = web.runs.get(thread_id)
    if task is None or task.done():
        return JSONResponse({"stopped": False, "message": "Nothing is running on this thread."})
    web.stopping.add(thread_id)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait({task})
    return JSONResponse({"stopped": True, "message": "Stopped. Send a message to go on."})


async def branch(request: Request) -> Response:
    """ "Branch from here": a new thread that starts where this one is now (messages, plan,
    waiting requests, task) and goes its own way. ``201 {"threadId": <new id>}``."""
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found
    if not _sends_json(request):
        return _error(415, ErrorCode.BAD_INPUT, "send Content-Type: application/json")
    new_id = f"t-{uuid.uuid4().hex}"

    async def work() -> Response:
        branched = await fork_session(web.plan_session(thread_id), new_id)
        return JSONResponse(
            {"threadId": branched.session_id, "from": thread_id},
            status_code=201,
            headers={"Cache-Control": "no-store"},
        )

    return await _while_idle(web, thread_id, "branch", work)


async def delete_thread(request: Request) -> Response:
    """Delete a thread with its plan and protocol state (the journal keeps the audit
    trail, with the deletion in it). A thread with a run in progress is refused (409)."""
    found = await _thread_or_404(request)
    if isinstance(found, Response):
        return found
    web, thread_id = found

    async def work() -> Response:
        await delete_session(web.plan_session(thread_id))
        # Pages following it on any server reload and find it gone.
        web.publish(thread_id, change_note(thread_id, "deleted"))
        return JSONResponse({"deleted": True, "threadId": thread_id})

    return await _while_idle(web, thread_id, "delete", work)


async def _while_idle(
    web: WebState, thread_id: str, action: str, work: Callable[[], Awaitable[Response]]
) -> Response:
    """Run ``work`` holding the thread here and on every server (its run lease): no run
    starts meanwhile, and a thread with a run in progress is refused with 409."""
    busy = _error(
        409,
        ErrorCode.RUN_IN_PROGRESS,
        f"thread {thread_id!r} has a run in progress; stop it or wait for it, then {action}",
    )
    if thread_id in web.runs:
        return busy
    web.runs[thread_id] = None
    try:
        try:
            lease = await web.threads.start(thread_id, f"{action}-{uuid.uuid4().hex}")
        except LeaseHeld:
            return busy
        try:
            return await work()
        except BranchError as exc:
            status = 404 if exc.code is ErrorCode.NO_THREAD else 409
            return _error(status, exc.code, exc.message)
        finally:
            await web.threads.finish(lease)
    finally:
        web.runs.pop(thread_id, None)


async def threads(request: Request) -> Response:
    """The threads in the database, newest first: id, last update and the first message.
    ``?limit=N`` (1-200, default 50) per page; ``nextCursor`` (null on the last page)
    goes back as ``?cursor=`` for the next."""
    web = _web(request)
    query = request.query_params
    try:
        limit = int(query.get("limit", THREAD_LIST_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_THREAD_PAGE:
        return _error(
            422, ErrorCode.BAD_INPUT, f"'limit' must be a number from 1 to {MAX_THREAD_PAGE}"
        )
    after = None
    if "cursor" in query:
        try:
            after = decode_cursor(query["cursor"])
        except ValueError as exc:
            return _error(422, ErrorCode.BAD_INPUT, f"'cursor': {exc}")
    # One more than asked: whether a next page exists, without a second read.
    data = await thread_list(
        web.runner, web.user_id, running=set(web.runs), limit=limit + 1, after=after
    )
    next_cursor = None
    if len(data) > limit:
        data = data[:limit]
        next_cursor = encode_cursor(data[-1]["updatedAt"], data[-1]["threadId"])
    return JSONResponse(
        {"threads": data, "nextCursor": next_cursor}, headers={"Cache-Control": "no-store"}
    )


MAX_THREAD_PAGE = 200


KEEP_ALIVE_SECONDS = 15.0


async def live_thread(request: Request) -> Response:
    """The thread's live events as SSE: a ``plangate.live.ready`` note once the stream
    follows every server, then each AG-UI event of each run and a change note for what
    happens between runs. The thread need not exist yet (its first run is followed)."""
    web = _web(request)
    thread_id = request.path_params["thread_id"]
    if not THREAD_ID.match(thread_id):
        return _error(422, ErrorCode.BAD_INPUT, "not a valid thread id")
    return _live_response(web, web.threads.thread_key(thread_id), wrap=False)


async def live_all(request: Request) -> Response:
    """Every thread's live events as SSE, each as ``{"threadId": …, "event": …}``."""
    web = _web(request)
    return _live_response(web, None, wrap=True)


def _live_response(web: WebState, key: str | None, *, wrap: bool) -> Response:
    subscription = web.live.subscribe(key)
    prefix = web.threads.thread_key("")

    def frame(event_key: str, event_json: str) -> str:
        if not wrap:
            return f"data: {event_json}\n\n"
        thread_id = json.dumps(event_key[len(prefix) :])
        return f'data: {{"threadId":{thread_id},"event":{event_json}}}\n\n'

    async def stream() -> AsyncIterator[str]:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(web.live.ready(), 10)
            ready = json.dumps({"type": "CUSTOM", "name": READY, "value": {}})
            yield frame(prefix, ready) if wrap else f"data: {ready}\n\n"
            while True:
                try:
                    item = await subscription.next(KEEP_ALIVE_SECONDS)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is None:
                    return
                event_key, event_json = item
                if key is None and not event_key.startswith(prefix):
                    continue  # another agent's or user's thread on the same database
                yield frame(event_key, event_json)
        finally:
            subscription.close()

    return LiveResponse(
        subscription,
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class LiveResponse(StreamingResponse):
    """A stream that ends as soon as its client goes: without this it would notice only
    at its next write (the keep-alive), and a stopping server waits for it."""

    def __init__(self, subscription: Subscription, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.subscription = subscription

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.subscription.end()

        watcher = asyncio.create_task(watch())
        try:
            await super().__call__(scope, receive, send)
        finally:
            watcher.cancel()


async def _json_body(request: Request, limit: int) -> dict[str, Any]:
    if not _sends_json(request):
        raise BadRunInput("send Content-Type: application/json", status=415)
    body = await _read_body(request, limit)
    data = _loads(body or b"{}")
    if not isinstance(data, dict):
        raise BadRunInput("the body must be a JSON object", status=400)
    return data


def _loads(body: bytes) -> Any:
    """A request body's JSON, every text in it cleaned as the stores clean it: JSON may
    spell an unpaired surrogate (``"\\ud800"``), which no model, store or response can
    then encode; it becomes U+FFFD, and the request goes on."""
    try:
        data = json.loads(body)
    except RecursionError:  # the C decoder's own stack limit, near 1,000 levels
        raise _too_deep() from None
    except ValueError as exc:
        raise BadRunInput(f"the body is not valid JSON: {exc}", status=400) from None
    if _deeper_than(data, MAX_JSON_DEPTH):
        raise _too_deep()
    return clean_parameters(data)


MAX_JSON_DEPTH = 100
"""Deeper bodies are refused before anything walks them recursively (cleaning, pydantic,
the stores): AG-UI's messages, state and tool arguments are a few levels deep."""


def _too_deep() -> BadRunInput:
    return BadRunInput(f"the body nests deeper than {MAX_JSON_DEPTH} levels", status=400)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` deep (iterative: the
    check itself must not recurse)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)  # pyright: ignore[reportUnknownArgumentType,reportUnknownVariableType]
    return False


async def _lost_lease(web: WebState) -> bool:
    """Whether this run's lease belongs to another holder now."""
    try:
        await web.threads.check_lease()
    except LeaseLost:
        return True
    except Exception:  # the database is away: the run's own error says so
        return False
    return False


async def _sweep_forever(web: WebState) -> None:
    """Mark the runs of dead servers interrupted, every half lease time."""
    while True:
        try:
            marked = await web.threads.sweep()
            if marked:
                logger.warning("marked %d run(s) of a stopped server interrupted", len(marked))
            interval = (await web.threads.leases()).ttl / 2
        except Exception:  # the database is away: /health says so; try again later
            interval = 5.0
        await asyncio.sleep(interval)


def create_app(
    *,
    runner: Runner,
    user_id: str = "user",
    require_token: bool,
    token: str | None,
    max_body_bytes: int = 1 << 20,
    allowed_hosts: Iterable[str] | None = None,
    about: dict[str, Any] | None = None,
    max_runs: int = DEFAULT_MAX_RUNS,
) -> Starlette:
    """The ASGI app. ``require_token`` needs a ``token``; without one, only requests whose
    Host is a loopback name are served (``allowed_hosts`` overrides that list). Past
    ``max_runs`` runs in progress a new run gets 503 with ``Retry-After``."""
    if max_runs < 1:
        raise ValueError(f"max_runs must be at least 1, not {max_runs}")
    if require_token and not token:
        raise ValueError("require_token=True needs a token")
    if allowed_hosts is None and not require_token:
        allowed_hosts = LOOPBACK_HOSTS
    from plangate.models.config import describe_model
    from plangate.sandbox import sandbox_status

    sandbox = sandbox_status()
    details: dict[str, Any] = {
        "agent": runner.agent.name,
        "model": describe_model(getattr(runner.agent, "model", "")),
        "protocolVersion": PROTOCOL_VERSION,
        "sandbox": {"available": sandbox.available, "detail": sandbox.detail, "fix": sandbox.fix},
    }
    if isinstance(runner.agent, LlmAgent) and plan_runtime(runner.agent) is not None:
        keys = StateKeys.of(PlanSession(runner, user_id=user_id, session_id="-"))
        details["stateKeys"] = keys.as_json()
    details.update(about or {})
    web = WebState(runner, user_id, max_body_bytes, details)
    web.max_runs = max_runs

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(_sweep_forever(web), name="plangate-lease-sweep")
        # The first check starts now, so the first probe finds an answer.
        first_check = asyncio.create_task(web.health.read(), name="plangate-first-health")
        try:
            await web.live.start((await web.threads.leases()).store.url)
        except Exception:  # the database is away: /health says so; pages poll on reload
            logger.warning("live events from other servers are off", exc_info=True)
        yield
        first_check.cancel()
        sweeper.cancel()
        await web.live.close()
        web.threads.close()
        tasks = [t for t in web.runs.values() if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/health", health),
            Route("/api/info", info),
            Route("/api/agent", agent, methods=["POST"]),
            Route("/api/threads", threads),
            Route("/api/threads/{thread_id}", thread),
            Route("/api/threads/{thread_id}", delete_thread, methods=["DELETE"]),
            Route("/api/threads/{thread_id}/branch", branch, methods=["POST"]),
            Route("/api/threads/{thread_id}/journal", journal),
            Route("/api/threads/{thread_id}/live", live_thread),
            Route("/api/live", live_all),
            Route("/api/threads/{thread_id}/leave-plan", leave_plan, methods=["POST"]),
            Route("/api/threads/{thread_id}/close-plan", close_plan, methods=["POST"]),
            Route("/api/threads/{thread_id}/mode", select_mode, methods=["POST"]),
            Route("/api/threads/{thread_id}/stop", stop, methods=["POST"]),
            Mount("/static", StaticFiles(directory=_static_dir()), name="static"),
        ],
        lifespan=lifespan,
        exception_handlers={DatabaseError: database_failed, SQLAlchemyError: database_failed},
    )
    app.state.web = web
    app.add_middleware(Guard, require_token=require_token, token=token, allowed_hosts=allowed_hosts)
    return app


# -- serving ------------------------------------------------------------------------------


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, bound before the URL is printed (port 0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that name it, and with Nagle on, every response on a kept-alive connection
    # waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Room for a burst of connections (hundreds of tabs or clients at once); a full
    # backlog makes the kernel drop SYNs, and the client retries only after a second.
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def serve(
    host: str,
    port: int,
    workspace: str | Path | None,
    model_spec: str | None,
    database_url: str | None,
    token: str | None,
    data_sources: Sequence[tuple[str, str | Path]] = (),
    allow_network: bool = False,
    max_runs: int = DEFAULT_MAX_RUNS,
) -> None:
    """Build the reference agent (the coding agent with the data tools under protocol
    governance) and serve the page and the AG-UI endpoint until interrupted.

    ``data_sources`` are ``(name, path)`` pairs of .csv, .parquet or .duckdb files
    registered beside the sample database; a bad one raises ``DataError`` before anything
    listens.
    """
    import uvicorn

    from plangate.adk.runner import build_runner
    from plangate.agent.coding_agent import build_coding_agent
    from plangate.agent.workspace import copy_sample_workspace
    from plangate.data import DataCatalog
    from plangate.models.config import describe_model, resolve_model
    from plangate.sandbox.probe import sandbox_summary

    require_token = token is not None or not is_loopback(host)
    if require_token and not token:
        token = secrets.token_urlsafe(24)
    catalog = DataCatalog(cache_dir=Path.cwd() / ".plangate" / "data")
    for name, path in data_sources:
        catalog.register(name, Path(path).expanduser())
    if workspace is None:
        root = copy_sample_workspace(Path.cwd() / ".plangate" / "workspace")
    else:
        root = Path(workspace).expanduser().resolve()
        if not root.is_dir():
            raise ValueError(f"workspace {workspace} is not a directory")
    model = resolve_model(model_spec, surface="web")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]", category=UserWarning)
        agent = build_coding_agent(root, model, data=catalog, allow_network=allow_network)
        runner = build_runner(agent, database_url=database_url)
    # Models without usage metadata (the offline demo) would log this on every call.
    logging.getLogger("google_adk.google.adk.telemetry._metrics").setLevel(logging.ERROR)
    app = create_app(
        runner=runner,
        require_token=require_token,
        token=token,
        about={"workspace": str(root), "data": [source.name for source in catalog.sources()]},
        max_runs=max_runs,
    )
    sock = bind(host, port)
    actual_port = sock.getsockname()[1]
    url = f"http://{_url_host(host)}:{actual_port}/"
    if require_token:
        url += f"#token={token}"
    print(f"plangate web UI: {url}")
    print(f"  model: {describe_model(model)}   workspace: {root}")
    print(f"  data: {', '.join(source.name for source in catalog.sources())}")
    print(f"  {sandbox_summary(allow_network)}")
    if require_token:
        print("  API requests need the header: Authorization: Bearer <token>")
    print("  Ctrl+C to stop.", flush=True)
    web: WebState = app.state.web

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # Live streams never end by themselves: end them, or shutting down would
            # wait for every open page.
            web.live.end_all()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=10)
    freeze_startup_heap()
    Server(config).run(sockets=[sock])


def freeze_startup_heap() -> None:
    """Exempt what exists at start (modules, ADK, schemas: ~240,000 objects) from the
    garbage collector. None of it becomes garbage while the server runs, and every full
    collection would otherwise walk all of it: a ~150 ms pause of every request, once
    every ~150 runs."""
    gc.collect()
    gc.freeze()
