"""The host side of protocol governance: routing and the atomic run start, authorization
and the action ledger, handoff, and the completion gate -- over the durable store.

``protocols.py`` wires these into ADK callbacks and tools; this module knows ADK only
through the contexts it is handed (scope, invocation id, session events).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plangate.adk import telemetry
from plangate.adk.scope import PlanScope, scope_of
from plangate.errors import ErrorCode, error_result, is_error
from plangate.journal.events import JournalEvent
from plangate.policy.authority import ProtocolGrant, current_authority, set_authority
from plangate.protocol.actions import (
    GENERAL_ANSWER_COMMIT_ACTION,
    HANDOFF_TOOL,
    REQUIREMENTS_COMMIT_ACTION,
    REQUIREMENTS_COMMIT_TOOL,
    action_for_tool,
    tool_for_action,
)
from plangate.protocol.classifier import Classifier
from plangate.protocol.completion import completion_gate, unrecovered_data_rejections
from plangate.protocol.definitions import (
    ActionOutcome,
    Allowed,
    ProtocolDefinition,
    ProtocolError,
    ProtocolRef,
    ProtocolState,
    Rejected,
    authorize_action,
    evaluate_completion,
    record_action,
    segment_id_for,
    start_segment,
)
from plangate.protocol.handoff import evaluate_handoff
from plangate.protocol.helper_context import build_helper_context
from plangate.protocol.intent import (
    effective_intent_text,
    intent_transition_for_route,
)
from plangate.protocol.router import ProtocolRoutingError, RouteDecision, route_protocol
from plangate.protocol.tool_plan import (
    ToolPlan,
    build_tool_plan,
    render_tool_plan_for_instructions,
    resolve_availability,
)
from plangate.store.fresh import FreshReads
from plangate.store.intents import (
    IntentRepository,
    IntentRevision,
    IntentRevisionConflict,
    RunBinding,
)
from plangate.store.protocol_state import (
    HandoffRecord,
    ProtocolStateStore,
    RunRecord,
    Versioned,
    journal_event,
)
from plangate.store.shared import StoreOfLoop
from plangate.store.storable import clean_text
from plangate.store.store import Conflict, Store, Transaction

if TYPE_CHECKING:
    from plangate.adk.protocols import ProtocolOptions

__all__ = [
    "BINDING_REQUIRED",
    "PROTOCOL_MARKER",
    "Finished",
    "ProtocolRuntime",
    "StartResult",
]

log = logging.getLogger("plangate")

PROTOCOL_MARKER = "## Protocol governance"
BINDING_REQUIRED = "RUN_INTENT_BINDING_REQUIRED"
SELF_RECORDING_TOOLS = frozenset({HANDOFF_TOOL, REQUIREMENTS_COMMIT_TOOL})
"""Tools that write their own ledger entry (the handoff decision, the reported
requirements); the after-tool hook leaves them alone."""
_REQUIREMENT_STATUSES = ("pending", "satisfied", "unmet")


@dataclass(frozen=True)
class StartResult:
    mirror: dict[str, Any]
    failure: str | None = None
    """Why the run must not start; the model is never called."""


@dataclass(frozen=True)
class Finished:
    outcome: dict[str, Any]
    """The run's outcome as JSON."""
    mirror: dict[str, Any]
    """The session-state mirror of the run as committed."""


@dataclass
class _Pending:
    scope_key: str
    segment_id: str
    action: str
    tool: str


@dataclass
class _RunView:
    scope: PlanScope
    run: Versioned[RunRecord]
    segment: Versioned[ProtocolState]


def _now() -> float:
    return time.time()


def _event(
    kind: str, subject: str, detail: dict[str, Any], *, actor: str = "protocol"
) -> JournalEvent:
    return JournalEvent(kind=kind, subject=subject, actor=actor, at=_now(), detail=detail)


def _route_detail(decision: RouteDecision) -> dict[str, Any]:
    return {
        "protocol": str(decision.protocol),
        "source": decision.source,
        "reasonCodes": list(decision.reason_codes),
        "taskRelation": decision.task_relation,
        "warnings": list(decision.warnings),
        "confidence": decision.confidence,
    }


def _user_text(context: Any) -> str:
    """The message's text, as every store keeps it: an unpaired surrogate (a client's
    broken escape, undecodable terminal input) or a NUL becomes U+FFFD, so routing and
    the session intent get a string they can validate and store, and the run goes on."""
    content = getattr(context, "user_content", None)
    if content is None:
        return ""
    return clean_text(" ".join(p.text for p in content.parts or [] if p.text).strip())


def _recent_user_texts(context: Any, limit: int = 2) -> list[str]:
    """Earlier user messages of the session, newest first (helper context only)."""
    current = getattr(context, "invocation_id", None)
    texts: list[str] = []
    for event in reversed(context.session.events):
        if event.author != "user" or event.invocation_id == current or event.content is None:
            continue
        text = clean_text(" ".join(p.text for p in event.content.parts or [] if p.text).strip())
        if text:
            texts.append(text)
        if len(texts) >= limit:
            break
    return texts


def _intent_view(revision: IntentRevision | None) -> dict[str, Any] | None:
    if revision is None:
        return None
    return {
        "intent_id": revision.intent_id,
        "revision_id": revision.id,
        "text": revision.text,
        "protocol": str(revision.protocol),
        "change_kind": revision.change_kind,
    }


def _tool_source(tool: Any) -> str:
    module = type(tool).__module__
    if module.startswith("google.adk.tools.mcp_tool"):
        return "mcp"
    if getattr(getattr(tool, "func", None), "__module__", "") == "plangate.adk.tools":
        return "plan"
    return "agent"


class ProtocolRuntime:
    """Options, store access and the known tool set of one governed agent."""

    def __init__(
        self,
        options: ProtocolOptions,
        agent_name: str,
        *,
        model_classifier: Callable[[], Classifier | None],
        fallback_database_url: Callable[[], str | None],
    ) -> None:
        self.options = options
        self.branch = agent_name
        self.state_key = f"{options.state_key_prefix}:{agent_name}"
        self.database_url = options.database_url
        self._model_classifier = model_classifier
        self._fallback_url = fallback_database_url
        self._tool_sources: dict[str, str] = {}
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._availability: dict[tuple[ProtocolRef, str], ToolPlan] = {}
        self._intents: FreshReads[IntentRevision | None] = FreshReads()
        self._store = StoreOfLoop()
        self._run_intents: dict[tuple[str, str], tuple[int, IntentRevision | None]] = {}
        """(session key, run id) -> (run document version, the run's intent revision)."""
        self.replaced_answers: set[str] = set()
        """Runs whose final model answer the completion gate already replaced."""

    # -- plumbing -------------------------------------------------------------------

    @property
    def definitions(self) -> Mapping[ProtocolRef, ProtocolDefinition]:
        return self.options.definitions

    @property
    def authorized(self) -> tuple[ProtocolRef, ...]:
        return tuple(self.options.authorized or self.definitions)

    def bind_database(self, context: Any) -> None:
        """Use the database of the runner's session service when nothing else names one,
        so sessions, plans, protocol state and intents share one database."""
        if self.database_url or self._fallback_url():
            return
        self.bind_service(context.get_invocation_context().session_service)

    def bind_service(self, service: Any) -> None:
        """``bind_database`` for a reader outside a run (a thread list) that has the
        runner's session service at hand."""
        if self.database_url or self._fallback_url():
            return
        engine = getattr(service, "db_engine", None)
        if engine is not None:
            self.database_url = engine.url.render_as_string(hide_password=False)
        elif isinstance(url := getattr(service, "database_url", None), str):
            self.database_url = url  # plangate's session service (or the one choosing it)

    async def store(self) -> Store:
        # Asked several times per step.
        return await self._store.get(self.database_url or self._fallback_url())

    async def states(self) -> ProtocolStateStore:
        return ProtocolStateStore(await self.store())

    async def intent_texts(
        self, app_name: str, user_id: str, session_ids: Sequence[str]
    ) -> dict[str, str]:
        """Session id -> the text of the task each session works on (its active
        intent), for the sessions that have one: one read, however many sessions."""
        keys = {
            PlanScope(app_name, user_id, sid, self.branch).session_key: sid for sid in session_ids
        }
        store = await self.store()
        texts = await store.read(lambda conn: IntentRepository(conn).active_texts(keys))
        return {keys[key]: text for key, text in texts.items()}

    def classifier(self) -> Classifier | None:
        chosen = self.options.classifier
        if chosen == "model":
            return self._model_classifier()
        return chosen  # type: ignore[return-value]

    def learn_tools(self, tools: Mapping[str, Any] | Sequence[Any]) -> None:
        """Remember the tools the model is offered, to build the tool plan from them."""
        items = tools.values() if isinstance(tools, Mapping) else tools
        for tool in items:
            name = getattr(tool, "name", None)
            if name and name not in self._tool_sources:
                self._tool_sources[name] = _tool_source(tool)
                self._availability.clear()

    def tool_plan(self) -> ToolPlan:
        groups: dict[str, list[str]] = {}
        mcp: list[str] = []
        for name, source in self._tool_sources.items():
            if name in SELF_RECORDING_TOOLS:
                continue
            (mcp if source == "mcp" else groups.setdefault(source, [])).append(name)
        return build_tool_plan(
            groups,
            mcp,
            always_allow=self.options.always_allow,
            skill_policy=self.options.skill_policy,
            data_tools=self.options.data_tools,
        )

    def available(self, state: ProtocolState) -> ToolPlan:
        # Asked at every model step; it follows from the tools learnt so far and the
        # segment's protocol and phase alone, so it is worked out once per phase.
        key = (state.protocol, state.phase)
        plan = self._availability.get(key)
        if plan is None:
            plan = resolve_availability(
                self.tool_plan(), state, authorized=self.authorized, definitions=self.definitions
            )
            self._availability[key] = plan
        return plan

    def _requirements(self, protocol: ProtocolRef, task_text: str) -> tuple[str, ...]:
        definition = self.definitions.get(protocol)
        extractor = self.options.requirement_extractor
        if definition is None or not definition.tracks_requirements or extractor is None:
            return ()
        return tuple(extractor(task_text))

    async def _run_intent(
        self, session_key: str, run: Versioned[RunRecord]
    ) -> IntentRevision | None:
        """The intent revision a run works on, as of the run document ``run``.

        A run's binding changes only in a transaction that also writes its run document
        (start, handoff), so the revision is remembered against the document's version:
        the steps of a run read the run document anyway, and ask nothing more while its
        version stays the same.
        """
        key = (session_key, run.value.run_id)
        known = self._run_intents.get(key)
        if known is not None and known[0] == run.version:
            return known[1]
        store = await self.store()

        async def read(conn: Any) -> IntentRevision | None:
            return await IntentRepository(conn).resolve_for_run(session_key, run.value.run_id)

        revision = await self._intents.get(store, key, lambda: store.read(read))
        self._remember_intent(key, run.version, revision)
        return revision

    def _remember_intent(
        self, key: tuple[str, str], version: int, revision: IntentRevision | None
    ) -> None:
        if len(self._run_intents) >= 4096:
            self._run_intents.clear()
        self._run_intents[key] = (version, revision)

    async def view(self, context: Any) -> _RunView | None:
        """The run this call belongs to: by invocation id, else the scope's running run."""
        scope = scope_of(context, self.branch)
        states = await self.states()
        run = await states.run(scope.key, context.invocation_id)
        if run is None:
            latest = await states.latest_running_run(scope.key)
            run = await states.run(scope.key, latest.run_id) if latest else None
        if run is None:
            return None
        segment = await states.segment(scope.key, run.value.active_segment_id)
        if segment is None:
            return None
        return _RunView(scope, run, segment)

    # -- the session-state mirror -----------------------------------------------------

    async def mirror(self, scope: PlanScope, run_id: str) -> dict[str, Any]:
        states = await self.states()
        run = await states.run(scope.key, run_id)
        if run is None:
            return {}
        segment = await states.segment(scope.key, run.value.active_segment_id)
        return await self.mirror_of(scope, run, segment.value if segment else None)

    async def mirror_of(
        self, scope: PlanScope, run: Versioned[RunRecord], state: ProtocolState | None
    ) -> dict[str, Any]:
        """The mirror of a run and its active segment as just read or written."""
        revision = await self._run_intent(scope.session_key, run)
        record = run.value
        mirror: dict[str, Any] = {
            "protocol": state.protocol.id if state else None,
            "version": state.protocol.version if state else None,
            "phase": state.phase if state else None,
            "segment_id": record.active_segment_id,
            "segment_status": state.status if state else None,
            "run_id": record.run_id,
            "run_status": record.status,
            "intent": _intent_view(revision),
            "handoffs": [h.model_dump(mode="json") for h in record.handoffs],
            "route": {
                "source": record.route.get("source"),
                "reason_codes": record.route.get("reasonCodes", []),
                "task_relation": record.route.get("taskRelation"),
                "warnings": record.route.get("warnings", []),
            },
        }
        if record.outcome_code:
            mirror["run_outcome_code"] = record.outcome_code
        if record.outcome_message:
            mirror["run_outcome_message"] = record.outcome_message
        return mirror

    @staticmethod
    def failed_mirror(previous: Any, run_id: str, message: str) -> dict[str, Any]:
        base = dict(previous) if isinstance(previous, Mapping) else {}
        return {
            **base,
            "run_id": run_id,
            "run_status": "failed",
            "run_outcome_code": message.split(":", 1)[0],
            "run_outcome_message": message,
        }

    # -- run start: route, then commit everything at once ---------------------------

    async def start_run(self, context: Any) -> StartResult:
        self.bind_database(context)
        scope = scope_of(context, self.branch)
        run_id = context.invocation_id
        states = await self.states()
        existing = await states.run(scope.key, run_id)
        if existing is not None:
            return await self._restore(scope, existing.value)
        user_input = _user_text(context)
        failure = ""
        for attempt in range(self.options.conflict_retries + 1):
            try:
                run, segment = await self._route_and_commit(
                    context, scope, run_id, user_input, attempt
                )
            except IntentRevisionConflict as exc:
                failure = (
                    f"{exc.message}. The run did not start; send the message again to run it "
                    "against the session's current task."
                )
                await states.append(
                    scope.key,
                    [
                        _event(
                            "protocol.run.rejected",
                            run_id,
                            {"reasonCode": exc.code, "attempt": attempt, "message": exc.message},
                        )
                    ],
                )
                continue
            except ProtocolRoutingError as exc:
                await states.append(
                    scope.key,
                    [_event("protocol.route.failed", run_id, {"reasonCode": exc.code})],
                )
                return StartResult({}, f"{exc.message}: no protocol can run this message")
            return StartResult(await self.mirror_of(scope, run, segment))
        return StartResult({}, failure)

    @telemetry.traced(telemetry.ROUTE_SPAN)
    async def _route_and_commit(
        self, context: Any, scope: PlanScope, run_id: str, user_input: str, attempt: int
    ) -> tuple[Versioned[RunRecord], ProtocolState]:
        """Route the message and commit the run's start; the run and segment written."""
        states = await self.states()
        store = await self.store()
        # Read before routing: the classifier call sits inside the compare-and-set window.
        # Read every time (a run start follows the commit of the user's message, so a
        # kept answer would never be current).
        base, head = await store.read(
            lambda conn: IntentRepository(conn).resolve_with_head(scope.session_key)
        )
        intent = base.as_intent() if base else None
        helper = build_helper_context(
            intent,
            recent_queries=_recent_user_texts(context),
            max_chars=self.options.helper_context_max_chars,
        )
        decision = await route_protocol(
            user_input,
            authorized=self.authorized,
            registered=self.definitions,
            explicit=self._explicit_selection(context),
            intent=intent,
            classifier=self.classifier(),
            background=helper.text if helper else None,
            threshold=self.options.classifier_threshold,
        )
        transition = intent_transition_for_route(intent, decision, user_input)
        task_text = effective_intent_text(
            intent.text if intent else None, user_input, decision.task_relation
        )
        segment = start_segment(
            decision.protocol,
            segment_id_for(run_id),
            requirements=self._requirements(decision.protocol, task_text),
            definitions=self.definitions,
        )
        record = RunRecord(
            run_id=run_id,
            scope_key=scope.key,
            session_key=scope.session_key,
            agent=self.branch,
            user_input=user_input,
            segment_ids=(segment.segment_id,),
            route=_route_detail(decision),
            started_at=_now(),
        )
        route = _route_detail(decision)
        events = [
            _event(
                "protocol.route.requested", run_id, {"attempt": attempt, "base": base and base.id}
            ),
            _event("protocol.route.resolved", run_id, route),
            _event("protocol.run.started", run_id, {"protocol": str(decision.protocol)}),
            _event(
                "protocol.segment.started",
                segment.segment_id,
                {"protocol": str(decision.protocol), "phase": segment.phase},
            ),
        ]

        bound: list[tuple[RunBinding, IntentRevision | None]] = []

        async def bind_intent(tx: Transaction) -> None:
            bound.append(
                await IntentRepository(tx.connection).commit_run_start(
                    scope.session_key,
                    run_id,
                    expected_base_id=base.id if base else None,
                    expected_head=head,
                    transition=transition,
                    task_relation=decision.task_relation,
                )
            )

        await states.create(scope.key, record, segment, events, within=bind_intent)
        binding, written = bound[0]
        # Created at version 1 with its binding: the run's revision is the one written
        # for it, else the base it was routed on.
        self._remember_intent((scope.session_key, run_id), 1, written or base)
        telemetry.routed(decision, binding, transition)
        telemetry.journaled(scope.key, events=events)
        return Versioned(record, 1), segment

    def _explicit_selection(self, context: Any) -> ProtocolRef | None:
        key = self.options.selection_state_key
        value = context.state.get(key) if key else None
        if not value:
            return None
        text = str(value).strip()
        if not text:
            return None
        try:
            if "@" in text:
                return ProtocolRef.parse(text)
            versions = sorted(
                (r for r in self.definitions if r.id == text), key=lambda r: r.version
            )
            return versions[-1] if versions else ProtocolRef(id=text, version=1)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            # Session state is written by surfaces and users: a bad value is a routing
            # failure the run reports with a code, never a crash.
            raise ProtocolRoutingError(
                ErrorCode.PROTOCOL_SELECTION_INVALID,
                f"{text!r}: the protocol selection in session "
                f"state key {key!r} must be '<protocol>' or '<protocol>@<version>'",
            ) from exc

    async def _restore(self, scope: PlanScope, record: RunRecord) -> StartResult:
        """The same invocation again (a resumed pause): the stored segment continues."""
        store = await self.store()
        binding = await store.read(
            lambda conn: IntentRepository(conn).binding(scope.session_key, record.run_id)
        )
        if binding is None:
            return StartResult(
                {},
                f"{BINDING_REQUIRED}:{record.run_id}: this paused run has protocol state but no "
                "session-intent binding -- it was started before session intents were "
                "recorded (store migration 2, 'session intents'). Its task cannot be "
                "restored safely, so it will not resume; send a new message to start a new "
                "run.",
            )
        states = await self.states()
        segment = await states.segment(scope.key, record.active_segment_id)
        if segment is None:
            return StartResult(
                {}, f"{ErrorCode.PROTOCOL_SEGMENT_MISSING.value}:{record.active_segment_id}"
            )
        try:
            decision = await route_protocol(
                "",
                authorized=self.authorized,
                registered=self.definitions,
                restored=segment.value.protocol,
            )
        except ProtocolRoutingError as exc:
            return StartResult({}, exc.message)
        await states.append(
            scope.key, [_event("protocol.route.resolved", record.run_id, _route_detail(decision))]
        )
        return StartResult(await self.mirror(scope, record.run_id))

    # -- authorization and the ledger -------------------------------------------------

    async def authorize(
        self, tool: Any, args: dict[str, Any], tool_context: Any
    ) -> dict[str, Any] | None:
        self.learn_tools([tool])
        view = await self.view(tool_context)
        if view is None:
            return error_result(
                ErrorCode.PROTOCOL_RUN_NOT_STARTED,
                "no protocol run is active for this call, so it was refused (fail closed)",
                "answer in plain text; the user can send the message again",
                error_category="protocol",
                execution_status="not_started",
            )
        action = action_for_tool(tool.name)
        state = view.segment.value
        # The phase joins the one authority of this call (the plan gate set it just
        # before), and the decision is that authority's: executors see the same phase.
        grant = ProtocolGrant(
            state,
            common_actions=self.tool_plan().common_actions(),
            guard=self.options.guard,
            definitions=self.definitions,
        )
        authority = current_authority()
        if authority is not None:
            set_authority(authority.with_protocol(grant))
        decision = grant.decide(action)
        if isinstance(decision, Allowed):
            if tool.name not in SELF_RECORDING_TOOLS:
                key = (tool_context.invocation_id, tool_context.function_call_id or "")
                self._pending[key] = _Pending(view.scope.key, state.segment_id, action, tool.name)
            return None
        await self._record_rejection(view, decision, tool.name)
        return self._refusal(decision, tool.name)

    async def _record_rejection(self, view: _RunView, rejected: Rejected, tool: str) -> None:
        event = _event(
            "protocol.action.rejected",
            view.segment.value.segment_id,
            {
                "tool": tool,
                "action": rejected.action,
                "reasonCode": rejected.code,
                "phase": view.segment.value.phase,
            },
        )
        states = await self.states()
        await states.update_segment(
            view.scope.key,
            view.segment.value.segment_id,
            lambda s: (record_action(s, rejected.action, rejected, tool=tool), [event]),
        )
        telemetry.journaled(view.scope.key, events=(event,))

    @staticmethod
    def _refusal(rejected: Rejected, tool: str) -> dict[str, Any]:
        result = error_result(
            rejected.code,
            _refusal_message(rejected, tool),
            rejected.recovery_hint,
            error_category="protocol",
            execution_status="not_started",
            retryable=False,
            tool=tool,
            action=rejected.action,
            phase=rejected.phase,
            allowed_actions=list(rejected.allowed_actions),
            recovery=rejected.recovery_hint,
            handoff_targets=[str(ref) for ref in rejected.handoff_targets],
        )
        # The seed's colon-joined text (``ACTION_NOT_ALLOWED_IN_PHASE:<phase>:<action>:…``),
        # which models and existing clients read; the fields above carry the same facts.
        result["error"] = rejected.message
        return result

    async def record_outcome(self, tool_context: Any, response: Any) -> bool:
        """Record an authorized call's outcome; a result with an ``error`` key failed."""
        key = (tool_context.invocation_id, tool_context.function_call_id or "")
        pending = self._pending.pop(key, None)
        if pending is None:
            return False
        failed = is_error(response)
        code = response.get("code") if failed else None
        outcome = ActionOutcome(
            status="rejected" if failed else "succeeded",
            # A tool outside plangate may fail without a code; the ledger still says it failed.
            reason_code=code[:120] if isinstance(code, str) else None,
        )

        def change(state: ProtocolState) -> tuple[ProtocolState, list[JournalEvent]]:
            new = record_action(
                state, pending.action, outcome, tool=pending.tool, definitions=self.definitions
            )
            detail = {
                "tool": pending.tool,
                "action": pending.action,
                "status": outcome.status,
                "reasonCode": outcome.reason_code,
                "phaseBefore": state.phase,
                "phaseAfter": new.phase,
            }
            events = [_event("protocol.action.recorded", state.segment_id, detail)]
            if new.phase != state.phase:
                events.append(
                    _event(
                        "protocol.phase.entered",
                        state.segment_id,
                        {"from": state.phase, "to": new.phase},
                    )
                )
            return new, events

        states = await self.states()
        await states.update_segment(pending.scope_key, pending.segment_id, change)
        return True

    # -- protocol tools --------------------------------------------------------------

    async def commit_requirements(
        self, tool_context: Any, requirements: Mapping[str, str]
    ) -> dict[str, Any]:
        view = await self.view(tool_context)
        if view is None:
            return _not_started()
        known = view.segment.value.domain.requirements
        bad = {k: v for k, v in requirements.items() if v not in _REQUIREMENT_STATUSES}
        unknown = [k for k in requirements if k not in known]
        if bad or unknown or not requirements:
            return error_result(
                ErrorCode.ANALYSIS_REQUIREMENTS_INVALID,
                f"report known requirement ids with a status of {', '.join(_REQUIREMENT_STATUSES)}",
                "use the ids in known_requirements",
                known_requirements=dict(known),
                unknown=unknown,
                invalid_status=bad,
            )
        outcome = ActionOutcome(requirements=dict(requirements))  # type: ignore[arg-type]
        event = _event(
            "protocol.requirements.committed",
            view.segment.value.segment_id,
            {"requirements": dict(requirements)},
        )
        states = await self.states()
        new = await states.update_segment(
            view.scope.key,
            view.segment.value.segment_id,
            lambda s: (
                record_action(
                    s,
                    REQUIREMENTS_COMMIT_ACTION,
                    outcome,
                    tool=REQUIREMENTS_COMMIT_TOOL,
                    definitions=self.definitions,
                ),
                [event],
            ),
        )
        tool_context.state[self.state_key] = await self.mirror(view.scope, view.run.value.run_id)
        return {
            "status": "recorded",
            "requirements": dict(new.domain.requirements),
            "phase": new.phase,
        }

    def _target(self, text: str) -> ProtocolRef:
        if "@" in text:
            return ProtocolRef.parse(text)
        versions = sorted((r for r in self.definitions if r.id == text), key=lambda r: r.version)
        if not versions:
            raise ValueError(text)
        return versions[-1]

    async def handoff(
        self, tool_context: Any, target_text: str, *, reason: str, route_correction: bool
    ) -> dict[str, Any]:
        view = await self.view(tool_context)
        if view is None:
            return _not_started()
        try:
            target = self._target(target_text.strip())
        except ValueError:
            names = ", ".join(sorted(str(r) for r in self.authorized))
            return error_result(
                ErrorCode.PROTOCOL_HANDOFF_PROPOSAL_INVALID,
                f"unknown target {target_text!r}",
                f"use one of {names}",
            )
        scope, run_v, segment_v = view.scope, view.run, view.segment
        run = run_v.value
        states = await self.states()
        earlier = [
            entry
            for seg in (await states.segments(scope.key, run))[:-1]
            for entry in seg.value.ledger
        ]
        store = await self.store()

        async def read(conn: Any) -> tuple[RunBinding | None, IntentRevision | None]:
            repo = IntentRepository(conn)
            binding = await repo.binding(scope.session_key, run.run_id)
            return binding, await repo.revision(binding.active_revision_id) if binding else None

        binding, active = await store.read(read)
        intent = active.as_intent() if active else None
        task_text = effective_intent_text(
            intent.text if intent else None,
            run.user_input,
            binding.task_relation if binding else "replace",
        )
        decision = evaluate_handoff(
            segment_v.value,
            target,
            authorized=self.authorized,
            registered=self.definitions,
            correction_requested=route_correction,
            earlier_ledger=earlier,
            intent=intent,
            task_relation=binding.task_relation if binding else None,
            user_input=run.user_input,
            target_requirements=self._requirements(target, task_text),
        )
        events = [
            journal_event(e, actor=tool_context.agent_name or "agent") for e in decision.events
        ]
        if reason and events:
            events[0].detail["reason"] = reason[:500]
        if not decision.accepted:
            changed = decision.source_state.revision != segment_v.value.revision
            await states.write(
                scope.key,
                segments=[(decision.source_state, segment_v.version)] if changed else [],
                events=events,
            )
            telemetry.journaled(scope.key, events=events)
            return error_result(
                ErrorCode(decision.reason_code),
                f"the handoff to {target} was rejected",
                "go on in the current protocol with the actions it allows",
                status="rejected",
                reason_code=decision.reason_code,
                unresolved_goals=list(decision.unresolved_goals),
                **self._observation(segment_v.value),
            )
        target_state = decision.target_state
        assert target_state is not None
        new_run = run.model_copy(
            update={
                "segment_ids": (*run.segment_ids, target_state.segment_id),
                "handoffs": (
                    *run.handoffs,
                    HandoffRecord(
                        from_protocol=str(segment_v.value.protocol),
                        to_protocol=str(target),
                        from_segment_id=segment_v.value.segment_id,
                        to_segment_id=target_state.segment_id,
                        transition_kind=decision.transition_kind or "handoff",
                        at=_now(),
                    ),
                ),
            }
        )
        transition = decision.intent_transition

        async def apply_intent(tx: Transaction) -> None:
            if transition is not None:
                await IntentRepository(tx.connection).apply_handoff(
                    scope.session_key, run.run_id, transition
                )

        try:
            await states.write(
                scope.key,
                segments=[(decision.source_state, segment_v.version), (target_state, 0)],
                run=(new_run, run_v.version),
                events=events,
                within=apply_intent,
            )
        except (IntentRevisionConflict, Conflict, ProtocolError) as exc:
            message = getattr(exc, "message", str(exc))
            failed = [
                _event(
                    "protocol.handoff.failed",
                    segment_v.value.segment_id,
                    {"targetProtocol": str(target), "error": message},
                )
            ]
            await states.append(scope.key, failed)
            telemetry.journaled(scope.key, events=failed)
            return error_result(
                _failure_code(exc),
                f"the handoff to {target} was not applied (nothing changed): another run "
                "changed the session's task or protocol state first",
                "propose the handoff again if it is still needed",
                status="failed",
                detail=message,
                **self._observation(segment_v.value),
            )
        tool_context.state[self.state_key] = await self.mirror(scope, run.run_id)
        telemetry.journaled(scope.key, events=events)
        return {
            "status": "accepted",
            "transition_kind": decision.transition_kind,
            "unresolved_goals": list(decision.unresolved_goals),
            "segment_id": target_state.segment_id,
            **self._observation(target_state),
            "message": f"You now work under {target}, phase {target_state.phase}. Use the "
            "available tools; the disabled ones are refused in this phase.",
        }

    def _observation(self, state: ProtocolState) -> dict[str, Any]:
        plan = self.available(state)
        return {
            "active_protocol": str(state.protocol),
            "active_phase": state.phase,
            "available_tools": list(plan.available_tools()),
            "protocol_disabled_tools": list(plan.protocol_disabled_tools()),
            "tool_plan": render_tool_plan_for_instructions(plan.entries),
        }

    # -- instructions ----------------------------------------------------------------

    async def instructions(self, context: Any, tools: Mapping[str, Any]) -> str | None:
        self.learn_tools(tools)
        view = await self.view(context)
        if view is None:
            return None
        state = view.segment.value
        revision = await self._run_intent(view.scope.session_key, view.run)
        plan = self.available(state)
        lines = [
            PROTOCOL_MARKER,
            f"Active protocol: {state.protocol}, phase: {state.phase} "
            f"(segment {state.segment_id}).",
        ]
        if revision is not None:
            lines.append(
                f"Session task (intent {revision.intent_id}, revision {revision.id}, "
                f"{revision.protocol}): {revision.text}"
            )
        lines.append(render_tool_plan_for_instructions(plan.entries))
        completion = evaluate_completion(state, definitions=self.definitions)
        exposed = {e.name for e in plan.entries if e.exposed}
        # Only steps the model can take itself (the answer commit is the host's job).
        next_tools = [
            tool_for_action(a) for a in completion.allowed_actions if tool_for_action(a) in exposed
        ]
        if completion.status == "continue" and next_tools:
            lines.append(
                f"Still missing: {', '.join(completion.reason_codes)}; next: "
                f"{', '.join(next_tools)}."
            )
        lines.append(
            "Calls outside the current phase are refused (ACTION_NOT_ALLOWED_IN_PHASE) and "
            "never run. Do not claim results of tools that were refused."
        )
        return "\n".join(lines)

    # -- completion -----------------------------------------------------------------

    async def gate_text(self, context: Any) -> str | None:
        """The failure text if the run's data work was refused and never recovered."""
        view = await self.view(context)
        if view is None or view.run.value.status != "running":
            return None
        states = await self.states()
        ledger = await states.run_ledger(view.scope.key, view.run.value, active=view.segment)
        refused = unrecovered_data_rejections(ledger)
        if not refused:
            return None
        return completion_gate(ledger, None).message

    async def finish(self, context: Any, answer_message_id: str | None) -> Finished | None:
        """Decide and persist the run's outcome. Returns it with the run's mirror as
        committed, or None when there is no running run."""
        view = await self.view(context)
        if view is None or view.run.value.run_id != context.invocation_id:
            return None
        run_v, segment_v, scope = view.run, view.segment, view.scope
        if run_v.value.status != "running":
            return None
        states = await self.states()
        earlier = [
            entry
            for seg in (await states.segments(scope.key, run_v.value, active=segment_v))[:-1]
            for entry in seg.value.ledger
        ]
        state = segment_v.value
        if (
            not unrecovered_data_rejections([*earlier, *state.ledger])
            and answer_message_id
            and state.domain.answer_message_id is None
            and isinstance(
                authorize_action(state, GENERAL_ANSWER_COMMIT_ACTION, definitions=self.definitions),
                Allowed,
            )
        ):
            state = record_action(
                state,
                GENERAL_ANSWER_COMMIT_ACTION,
                ActionOutcome(answer_message_id=answer_message_id),
                definitions=self.definitions,
            )
        decision = (
            evaluate_completion(state, force_terminal=True, definitions=self.definitions)
            if state.status in ("active", "waiting")
            else None
        )
        outcome = completion_gate([*earlier, *state.ledger], decision)
        final = state.model_copy(
            update={
                "status": "failed" if outcome.status == "failed" else "completed",
                "revision": state.revision + 1,
            }
        )
        code = (
            outcome.reason_codes[0]
            if outcome.status != "completed" and outcome.reason_codes
            else None
        )
        record = run_v.value.model_copy(
            update={
                "status": outcome.status,
                "outcome_code": code,
                "outcome_message": outcome.message,
                "ended_at": _now(),
            }
        )
        detail = outcome.model_dump(mode="json", by_alias=True)
        events = [
            _event(
                "protocol.completion.proposed",
                state.segment_id,
                decision.model_dump(mode="json", by_alias=True) if decision else {},
            ),
            _event(
                "protocol.run.failed" if outcome.status == "failed" else "protocol.run.completed",
                run_v.value.run_id,
                detail,
            ),
        ]
        await states.write(
            scope.key,
            segments=[(final, segment_v.version)],
            run=(record, run_v.version),
            events=events,
        )
        written = Versioned(record, run_v.version + 1)
        # Written by compare-and-set on the version read, without touching the binding:
        # the revision known for that version is the new version's too.
        key = (scope.session_key, record.run_id)
        known = self._run_intents.get(key)
        if known is not None and known[0] == run_v.version:
            self._remember_intent(key, written.version, known[1])
        return Finished(detail, await self.mirror_of(scope, written, final))


def _not_started() -> dict[str, Any]:
    return error_result(
        ErrorCode.PROTOCOL_RUN_NOT_STARTED,
        "no protocol run is active",
        "answer in plain text; the user can send the message again",
    )


def _refusal_message(rejected: Rejected, tool: str) -> str:
    """The refusal in words; the seed's colon-joined text stays in ``error``."""
    if rejected.code is ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE:
        return f"{tool} is not allowed in phase {rejected.phase}"
    if rejected.code is ErrorCode.PROTOCOL_ACTION_BUDGET_EXHAUSTED:
        return f"{tool} was refused: this protocol segment used up its action budget"
    if rejected.code is ErrorCode.PROTOCOL_SEGMENT_NOT_ACTIVE:
        return f"{tool} was refused: this protocol segment has ended"
    return f"{tool} was refused by the protocol's runtime guard"


def _failure_code(exc: Exception) -> ErrorCode:
    """The code of a failed handoff commit: a moved intent, else a lost compare-and-set."""
    if isinstance(exc, IntentRevisionConflict):
        return ErrorCode.SESSION_INTENT_REVISION_CONFLICT
    if isinstance(exc, ProtocolError):
        return exc.code
    return ErrorCode.PROTOCOL_STATE_CONFLICT
