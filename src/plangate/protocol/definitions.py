"""Protocols as phase machines: what each phase allows, how domain state moves phases,
when a segment counts as done, and the pure authorize/record pair the runtime calls.

Everything a protocol *is* lives in data (``ProtocolDefinition``): phase action lists,
action effects on domain facts, fact-driven transitions and a completion ladder. The
functions below interpret that data; there is no per-protocol branch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

from pydantic import Field

from plangate.errors import CodedError, ErrorCode
from plangate.protocol.actions import (
    EVIDENCE_BIND_ACTION,
    GENERAL_ANSWER_COMMIT_ACTION,
    HANDOFF_ACTION,
    HANDOFF_TOOL,
    QUERY_PLAN_ACTION,
    REQUIREMENTS_COMMIT_ACTION,
    RESULT_VALIDATE_ACTION,
    RUNTIME_ACTION_NAMES,
    is_data_action,
    tool_for_action,
)
from plangate.protocol.wire_model import WireModel

__all__ = [
    "ACTION_BUDGET_EXHAUSTED",
    "ACTION_NOT_ALLOWED_IN_PHASE",
    "DATA_ANALYSIS",
    "DATA_ANALYSIS_REF",
    "DEFINITIONS",
    "GENERAL_TASK",
    "GENERAL_TASK_REF",
    "GUARD_REJECTED",
    "PROTOCOL_REJECTION_CODES",
    "SEGMENT_NOT_ACTIVE",
    "ActionEffect",
    "ActionOutcome",
    "Allowed",
    "Authorization",
    "CompletionDecision",
    "CompletionStep",
    "DomainState",
    "Guard",
    "LedgerEntry",
    "Phase",
    "ProtocolDefinition",
    "ProtocolError",
    "ProtocolRef",
    "ProtocolState",
    "Rejected",
    "Transition",
    "allowed_actions",
    "authorize_action",
    "evaluate_completion",
    "next_segment_id",
    "protocols_allowing",
    "record_action",
    "register_protocols",
    "segment_id_for",
    "start_segment",
]

ACTION_NOT_ALLOWED_IN_PHASE = ErrorCode.ACTION_NOT_ALLOWED_IN_PHASE
ACTION_BUDGET_EXHAUSTED = ErrorCode.PROTOCOL_ACTION_BUDGET_EXHAUSTED
GUARD_REJECTED = ErrorCode.PROTOCOL_GUARD_REJECTED
SEGMENT_NOT_ACTIVE = ErrorCode.PROTOCOL_SEGMENT_NOT_ACTIVE
PROTOCOL_REJECTION_CODES = frozenset(
    {ACTION_NOT_ALLOWED_IN_PHASE, ACTION_BUDGET_EXHAUSTED, GUARD_REJECTED, SEGMENT_NOT_ACTIVE}
)
"""Reason codes meaning "the protocol refused this call before it ran"."""

_HINT_MAX_NAMES = 12


class ProtocolError(CodedError):
    """A governance refusal with a stable machine code.

    Its ``message`` keeps the seed's shape, ``<CODE>:<detail>``, which journals and
    clients already read; ``code`` and ``detail`` are the same facts as fields.
    """

    def __init__(self, code: ErrorCode, detail: str = "", hint: str = "") -> None:
        super().__init__(code, f"{code.value}:{detail}" if detail else code.value, hint)
        self.detail = detail
        self.args = (self.message,)


class ProtocolRef(WireModel):
    id: str = Field(min_length=1)
    version: int = Field(ge=1)

    def __str__(self) -> str:
        return f"{self.id}@{self.version}"

    @classmethod
    def parse(cls, text: str) -> ProtocolRef:
        """``"data-analysis@1"`` → ``ProtocolRef(id="data-analysis", version=1)``."""
        protocol_id, sep, version = text.rpartition("@")
        if not sep or not version.isdigit():
            raise ValueError(f"not a protocol reference: {text!r}")
        return cls(id=protocol_id, version=int(version))


# --------------------------------------------------------------------------- definitions


class Transition(WireModel):
    """Move to ``to`` when every fact in ``requires`` holds and none in ``requires_missing``.

    Fact-driven transitions are followed to a fixpoint after each successful action;
    ``after_any_action`` transitions fire only as the direct result of one.
    """

    to: str
    requires: frozenset[str] = frozenset()
    requires_missing: frozenset[str] = frozenset()
    after_any_action: bool = False


class Phase(WireModel):
    name: str
    actions: tuple[str, ...]
    """Protocol-specific actions allowed here; the caller's common actions are added."""
    transitions: tuple[Transition, ...] = ()


class ActionEffect(WireModel):
    """The domain facts a successful action establishes and those it invalidates."""

    sets: frozenset[str] = frozenset()
    clears: frozenset[str] = frozenset()


class CompletionStep(WireModel):
    """One rung of the completion ladder: a fact that must hold, and how to obtain it."""

    fact: str
    missing_code: str
    recovery_actions: tuple[str, ...]


class ProtocolDefinition(WireModel):
    ref: ProtocolRef
    initial_phase: str
    phases: tuple[Phase, ...]
    effects: Mapping[str, ActionEffect] = Field(default_factory=dict)
    completion_steps: tuple[CompletionStep, ...] = ()
    tracks_requirements: bool = False
    strict: bool = False
    """A strict protocol cannot be left by an ordinary handoff while goals are unresolved."""
    max_actions: int = Field(ge=1)

    def phase(self, name: str) -> Phase:
        for phase in self.phases:
            if phase.name == name:
                return phase
        raise ProtocolError(ErrorCode.PROTOCOL_PHASE_UNKNOWN, f"{self.ref}:{name}")


def register_protocols(
    *definitions: ProtocolDefinition,
) -> Mapping[ProtocolRef, ProtocolDefinition]:
    """Index definitions by reference; registering one reference twice is an error."""
    registry: dict[ProtocolRef, ProtocolDefinition] = {}
    for definition in definitions:
        if definition.ref in registry:
            raise ProtocolError(ErrorCode.PROTOCOL_ALREADY_REGISTERED, f"{definition.ref}")
        registry[definition.ref] = definition
    return registry


GENERAL_TASK_REF = ProtocolRef(id="general-task", version=1)
DATA_ANALYSIS_REF = ProtocolRef(id="data-analysis", version=1)

# Domain facts.
ANSWER_COMMITTED = "answer_committed"
SCHEMA_INSPECTED = "schema_inspected"
GROUNDED = "grounded"
QUERY_PLANNED = "query_planned"
QUERY_EXECUTED = "query_executed"
RESULT_VALIDATED = "result_validated"
EVIDENCE_BOUND = "evidence_bound"

_GENERAL_WORK = (HANDOFF_ACTION, GENERAL_ANSWER_COMMIT_ACTION)

GENERAL_TASK = ProtocolDefinition(
    ref=GENERAL_TASK_REF,
    initial_phase="understand",
    phases=(
        Phase(
            name="understand",
            actions=_GENERAL_WORK,
            transitions=(
                Transition(to="answer", requires=frozenset({ANSWER_COMMITTED})),
                Transition(to="gather", after_any_action=True),
            ),
        ),
        Phase(
            name="gather",
            actions=_GENERAL_WORK,
            transitions=(Transition(to="answer", requires=frozenset({ANSWER_COMMITTED})),),
        ),
        # The answer is committed by the host at the end of the run; further common
        # tools stay harmless, a second commit does not.
        Phase(name="answer", actions=(HANDOFF_ACTION,)),
    ),
    effects={GENERAL_ANSWER_COMMIT_ACTION: ActionEffect(sets=frozenset({ANSWER_COMMITTED}))},
    completion_steps=(
        CompletionStep(
            fact=ANSWER_COMMITTED,
            missing_code="GENERAL_ANSWER_NOT_COMMITTED",
            recovery_actions=(GENERAL_ANSWER_COMMIT_ACTION,),
        ),
    ),
    max_actions=100,
)

_SCHEMA_READS = ("list_data_sources", "inspect_schema", "lookup_values")
_DATA_READS = (*_SCHEMA_READS, "preview_table")
_ANALYSIS_WRAP_UP = (
    QUERY_PLAN_ACTION,
    RESULT_VALIDATE_ACTION,
    EVIDENCE_BIND_ACTION,
    REQUIREMENTS_COMMIT_ACTION,
    HANDOFF_ACTION,
)
# A re-plan invalidates everything computed from the previous query.
_BACK_TO_EXECUTION = Transition(to="execution", requires_missing=frozenset({QUERY_EXECUTED}))

DATA_ANALYSIS = ProtocolDefinition(
    ref=DATA_ANALYSIS_REF,
    initial_phase="scope",
    phases=(
        Phase(
            name="scope",
            actions=(*_SCHEMA_READS, HANDOFF_ACTION),
            transitions=(
                Transition(to="semantic_grounding", requires=frozenset({SCHEMA_INSPECTED})),
            ),
        ),
        Phase(
            name="semantic_grounding",
            actions=(*_DATA_READS, HANDOFF_ACTION),
            transitions=(Transition(to="query_planning", requires=frozenset({GROUNDED})),),
        ),
        Phase(
            name="query_planning",
            actions=(*_DATA_READS, QUERY_PLAN_ACTION, HANDOFF_ACTION),
            transitions=(Transition(to="execution", requires=frozenset({QUERY_PLANNED})),),
        ),
        Phase(
            name="execution",
            actions=(*_DATA_READS, "run_sql_readonly", QUERY_PLAN_ACTION, HANDOFF_ACTION),
            transitions=(Transition(to="validation", requires=frozenset({QUERY_EXECUTED})),),
        ),
        Phase(
            name="validation",
            actions=(*_DATA_READS, *_ANALYSIS_WRAP_UP),
            transitions=(
                _BACK_TO_EXECUTION,
                Transition(to="synthesis", requires=frozenset({RESULT_VALIDATED, EVIDENCE_BOUND})),
            ),
        ),
        Phase(
            name="synthesis",
            actions=(*_DATA_READS, *_ANALYSIS_WRAP_UP),
            transitions=(_BACK_TO_EXECUTION,),
        ),
    ),
    effects={
        "inspect_schema": ActionEffect(sets=frozenset({SCHEMA_INSPECTED})),
        "lookup_values": ActionEffect(sets=frozenset({GROUNDED})),
        "preview_table": ActionEffect(sets=frozenset({GROUNDED})),
        QUERY_PLAN_ACTION: ActionEffect(
            sets=frozenset({QUERY_PLANNED}),
            clears=frozenset({QUERY_EXECUTED, RESULT_VALIDATED, EVIDENCE_BOUND}),
        ),
        "run_sql_readonly": ActionEffect(
            sets=frozenset({QUERY_EXECUTED}), clears=frozenset({RESULT_VALIDATED, EVIDENCE_BOUND})
        ),
        RESULT_VALIDATE_ACTION: ActionEffect(sets=frozenset({RESULT_VALIDATED})),
        EVIDENCE_BIND_ACTION: ActionEffect(sets=frozenset({EVIDENCE_BOUND})),
    },
    completion_steps=(
        CompletionStep(
            fact=SCHEMA_INSPECTED,
            missing_code="SCHEMA_GROUNDING_REQUIRED",
            recovery_actions=("list_data_sources", "inspect_schema"),
        ),
        CompletionStep(
            fact=GROUNDED,
            missing_code="SEMANTIC_GROUNDING_REQUIRED",
            recovery_actions=("lookup_values", "preview_table"),
        ),
        CompletionStep(
            fact=QUERY_PLANNED,
            missing_code="QUERY_PLAN_REQUIRED",
            recovery_actions=(QUERY_PLAN_ACTION,),
        ),
        CompletionStep(
            fact=QUERY_EXECUTED,
            missing_code="QUERY_EXECUTION_REQUIRED",
            recovery_actions=("run_sql_readonly",),
        ),
        CompletionStep(
            fact=RESULT_VALIDATED,
            missing_code="RESULT_VALIDATION_REQUIRED",
            recovery_actions=(RESULT_VALIDATE_ACTION,),
        ),
        CompletionStep(
            fact=EVIDENCE_BOUND,
            missing_code="EVIDENCE_BINDING_REQUIRED",
            recovery_actions=(EVIDENCE_BIND_ACTION,),
        ),
    ),
    tracks_requirements=True,
    strict=True,
    max_actions=500,
)

DEFINITIONS: Mapping[ProtocolRef, ProtocolDefinition] = register_protocols(
    GENERAL_TASK, DATA_ANALYSIS
)


# --------------------------------------------------------------------------- state

RequirementStatus = Literal["pending", "satisfied", "unmet"]
SegmentStatus = Literal["active", "waiting", "handed_off", "aborted", "completed", "failed"]


class DomainState(WireModel):
    facts: frozenset[str] = frozenset()
    requirements: Mapping[str, RequirementStatus] = Field(default_factory=dict)
    """Analysis requirements by id; extracted at segment start, reported by the agent."""
    answer_message_id: str | None = None

    def pending_requirements(self) -> tuple[str, ...]:
        return tuple(rid for rid, status in self.requirements.items() if status == "pending")


class LedgerEntry(WireModel):
    action: str
    tool: str | None = None
    status: Literal["succeeded", "rejected"]
    reason_code: str | None = None


class ProtocolState(WireModel):
    """One protocol segment of a run: which protocol, where in it, and what it did."""

    protocol: ProtocolRef
    segment_id: str
    phase: str
    revision: int = 0
    status: SegmentStatus = "active"
    domain: DomainState = Field(default_factory=DomainState)
    ledger: tuple[LedgerEntry, ...] = ()


def segment_id_for(run_id: str, index: int = 1) -> str:
    return f"{run_id}:segment:{index}"


def start_segment(
    protocol: ProtocolRef,
    segment_id: str,
    *,
    requirements: Iterable[str] = (),
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> ProtocolState:
    """A fresh segment in the protocol's initial phase, its requirements all pending."""
    definition = _definition(protocol, definitions)
    return ProtocolState(
        protocol=protocol,
        segment_id=segment_id,
        phase=definition.initial_phase,
        domain=DomainState(requirements=dict.fromkeys(requirements, "pending")),
    )


_SEGMENT_ID = re.compile(r"^(?P<run>.*):segment:(?P<index>\d+)$")


def next_segment_id(segment_id: str) -> str:
    match = _SEGMENT_ID.match(segment_id)
    if match is None:
        return f"{segment_id}:segment:2"
    return f"{match['run']}:segment:{int(match['index']) + 1}"


def _definition(
    protocol: ProtocolRef, definitions: Mapping[ProtocolRef, ProtocolDefinition]
) -> ProtocolDefinition:
    try:
        return definitions[protocol]
    except KeyError:
        raise ProtocolError(ErrorCode.PROTOCOL_NOT_REGISTERED, f"{protocol}") from None


# --------------------------------------------------------------------------- authorization


class Allowed(WireModel):
    allowed: Literal[True] = True
    action: str


class Rejected(WireModel):
    allowed: Literal[False] = False
    action: str
    code: ErrorCode
    message: str
    """The seed's colon-joined text, e.g. ``ACTION_NOT_ALLOWED_IN_PHASE:<phase>:<action>:<allowed>``."""
    phase: str = ""
    """The phase the segment was in when it refused."""
    allowed_actions: tuple[str, ...] = ()
    recovery_hint: str = ""
    handoff_targets: tuple[ProtocolRef, ...] = ()
    """Other registered protocols that would allow the action in some phase."""


Authorization = Allowed | Rejected
Guard = Callable[[ProtocolState, str], str | None]
"""Extra check after the phase gate: returns a reason to refuse, or ``None``."""


def allowed_actions(
    state: ProtocolState,
    common_actions: Iterable[str] = (),
    *,
    is_data_action: Callable[[str], bool] = is_data_action,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> tuple[str, ...]:
    """The phase's own actions, then the caller's common actions (sorted).

    Common actions are an explicit set: data actions and runtime actions are removed
    from it, so data work is only ever allowed by a phase that names it.
    """
    phase = _definition(state.protocol, definitions).phase(state.phase)
    own = phase.actions
    common = sorted(
        {
            action
            for action in common_actions
            if not is_data_action(action) and action not in RUNTIME_ACTION_NAMES
        }
        - set(own)
    )
    return (*own, *common)


def protocols_allowing(
    action: str,
    *,
    exclude: ProtocolRef | None = None,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> tuple[ProtocolRef, ...]:
    """Registered protocols with some phase naming ``action`` (handoff recovery targets)."""
    return tuple(
        ref
        for ref, definition in definitions.items()
        if ref != exclude and any(action in phase.actions for phase in definition.phases)
    )


def _name_list(actions: Iterable[str]) -> str:
    names = [tool_for_action(action) for action in actions]
    shown = ", ".join(names[:_HINT_MAX_NAMES])
    if len(names) > _HINT_MAX_NAMES:
        shown += f" (+{len(names) - _HINT_MAX_NAMES} more)"
    return shown


def authorize_action(
    state: ProtocolState,
    action: str,
    *,
    common_actions: Iterable[str] = (),
    is_data_action: Callable[[str], bool] = is_data_action,
    guard: Guard | None = None,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> Authorization:
    """Decide one action in the segment's current phase.

    Order: segment active → action budget (rejected calls count) → phase → guard.
    An action that is neither named by the phase nor in ``common_actions`` is refused,
    whatever its origin (MCP, unknown, misspelt).
    """
    definition = _definition(state.protocol, definitions)
    if state.status not in ("active", "waiting"):
        return Rejected(
            action=action,
            code=SEGMENT_NOT_ACTIVE,
            message=f"{SEGMENT_NOT_ACTIVE}:{state.status}:{action}",
            phase=state.phase,
            recovery_hint="This protocol segment has ended; no further actions run in it.",
        )
    if len(state.ledger) >= definition.max_actions:
        return Rejected(
            action=action,
            code=ACTION_BUDGET_EXHAUSTED,
            message=f"{ACTION_BUDGET_EXHAUSTED}:{definition.max_actions}",
            phase=state.phase,
            recovery_hint=(
                f"The action budget of {definition.max_actions} calls for this protocol "
                "segment is used up. Answer with what you have."
            ),
        )
    allowed = allowed_actions(
        state, common_actions, is_data_action=is_data_action, definitions=definitions
    )
    if action not in allowed:
        targets = protocols_allowing(action, exclude=state.protocol, definitions=definitions)
        hint = (
            f"Continue with one of the actions allowed in phase {state.phase}: "
            f"{_name_list(allowed) or '(none)'}. "
            f"Do not repeat {tool_for_action(action)} while the protocol remains in phase "
            f"{state.phase}."
        )
        if targets and HANDOFF_ACTION in allowed:
            hint += f" If the task needs it, propose a handoff to {targets[0]} with {HANDOFF_TOOL}."
        return Rejected(
            action=action,
            code=ACTION_NOT_ALLOWED_IN_PHASE,
            message=f"{ACTION_NOT_ALLOWED_IN_PHASE}:{state.phase}:{action}:{','.join(allowed)}",
            phase=state.phase,
            allowed_actions=allowed,
            recovery_hint=hint,
            handoff_targets=targets,
        )
    if guard is not None:
        reason = guard(state, action)
        if reason:
            return Rejected(
                action=action,
                code=GUARD_REJECTED,
                message=f"{GUARD_REJECTED}:{reason}:{action}",
                phase=state.phase,
                allowed_actions=allowed,
                recovery_hint=f"{tool_for_action(action)} was refused: {reason}.",
            )
    return Allowed(action=action)


# --------------------------------------------------------------------------- recording


class ActionOutcome(WireModel):
    status: Literal["succeeded", "rejected"] = "succeeded"
    reason_code: str | None = None
    requirements: Mapping[str, RequirementStatus] = Field(default_factory=dict)
    """For ``analysis.requirements.commit``: requirement id → reported status."""
    answer_message_id: str | None = None
    """For ``general.answer.commit``: the id of the message that holds the answer."""


def _follow_facts(definition: ProtocolDefinition, phase: str, facts: frozenset[str]) -> str:
    for _ in range(len(definition.phases) + 1):
        step = next(
            (
                t
                for t in definition.phase(phase).transitions
                if not t.after_any_action
                and t.requires <= facts
                and not (t.requires_missing & facts)
            ),
            None,
        )
        if step is None:
            return phase
        phase = step.to
    raise ProtocolError(ErrorCode.PROTOCOL_TRANSITION_CYCLE, f"{definition.ref}:{phase}")


def record_action(
    state: ProtocolState,
    action: str,
    outcome: ActionOutcome | Rejected,
    *,
    tool: str | None = None,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> ProtocolState:
    """The segment after one authorized-and-run (or refused) action: ledger, domain, phase.

    Pure: returns a new state with ``revision + 1``; ``state`` is unchanged.
    """
    definition = _definition(state.protocol, definitions)
    if isinstance(outcome, Rejected):
        outcome = ActionOutcome(status="rejected", reason_code=outcome.code)
    entry = LedgerEntry(
        action=action, tool=tool, status=outcome.status, reason_code=outcome.reason_code
    )
    ledger = (*state.ledger, entry)
    if outcome.status == "rejected":
        return state.model_copy(update={"ledger": ledger, "revision": state.revision + 1})

    domain = state.domain
    if action == GENERAL_ANSWER_COMMIT_ACTION and not outcome.answer_message_id:
        raise ProtocolError(ErrorCode.GENERAL_ANSWER_MESSAGE_MISSING)
    effect = definition.effects.get(action, ActionEffect())
    facts = (domain.facts - effect.clears) | effect.sets
    requirements = dict(domain.requirements)
    if action == REQUIREMENTS_COMMIT_ACTION:
        requirements.update(outcome.requirements)
    domain = domain.model_copy(
        update={
            "facts": facts,
            "requirements": requirements,
            "answer_message_id": outcome.answer_message_id or domain.answer_message_id,
        }
    )

    phase = _follow_facts(definition, state.phase, facts)
    if phase == state.phase:
        after_action = next(
            (t for t in definition.phase(phase).transitions if t.after_any_action), None
        )
        if after_action is not None:
            phase = _follow_facts(definition, after_action.to, facts)
    return state.model_copy(
        update={
            "ledger": ledger,
            "domain": domain,
            "phase": phase,
            "revision": state.revision + 1,
        }
    )


# --------------------------------------------------------------------------- completion


class CompletionDecision(WireModel):
    status: Literal["completed", "degraded", "partial", "continue", "failed"]
    reason_codes: tuple[str, ...] = ()
    allowed_actions: tuple[str, ...] = ()
    """Recovery: the actions that would move the segment towards completion."""


def evaluate_completion(
    state: ProtocolState,
    *,
    force_terminal: bool = False,
    definitions: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
) -> CompletionDecision:
    """The segment's completion policy, computed from its own state only.

    ``continue`` lists every missing rung and offers the first rung's actions; with
    ``force_terminal`` (the run is ending) ``continue`` becomes ``partial``.
    """
    definition = _definition(state.protocol, definitions)
    domain = state.domain
    missing = [step for step in definition.completion_steps if step.fact not in domain.facts]
    reasons = [step.missing_code for step in missing]
    recovery: list[str] = list(missing[0].recovery_actions) if missing else []
    unmet: list[str] = []
    if definition.tracks_requirements:
        pending = domain.pending_requirements()
        reasons += [f"ANALYSIS_REQUIREMENT_PENDING:{rid}" for rid in pending]
        if pending:
            recovery.append(REQUIREMENTS_COMMIT_ACTION)
        unmet = [
            f"ANALYSIS_REQUIREMENT_UNMET:{rid}"
            for rid, status in domain.requirements.items()
            if status == "unmet"
        ]
    if reasons:
        return CompletionDecision(
            status="partial" if force_terminal else "continue",
            reason_codes=tuple(reasons),
            allowed_actions=tuple(recovery),
        )
    if unmet:
        return CompletionDecision(status="degraded", reason_codes=tuple(unmet))
    return CompletionDecision(status="completed")
