"""The protocol router: which protocol runs this message, and what it does to the task.

Priority chain: restored segment → explicit user selection → deterministic rules
(inherited intent for a weak continuation, analytic accelerator without an intent) →
classifier → fallback. Every decision carries its reason codes and warnings so the
journal can say why a run went where it did.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Literal

from plangate.errors import ErrorCode
from plangate.protocol.classifier import (
    Classification,
    ClassificationInput,
    Classifier,
    ClassifierOutputError,
    IntentSummary,
    parse_classifier_output,
)
from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    DEFINITIONS,
    GENERAL_TASK_REF,
    ProtocolDefinition,
    ProtocolError,
    ProtocolRef,
)
from plangate.protocol.intent import SessionIntent, TaskRelation
from plangate.protocol.text_budget import code_point_length
from plangate.protocol.wire_model import WireModel

__all__ = [
    "CLASSIFIER_CONFIDENCE_THRESHOLD",
    "DEFAULT_RULES",
    "WEAK_CONTINUATION_MAX_CHARS",
    "WEAK_CONTINUATION_PHRASES",
    "ProtocolRoutingError",
    "RouteCandidate",
    "RouteDecision",
    "RouteRule",
    "RouteSource",
    "analytic_intent",
    "analytic_intent_rule",
    "inherited_intent_rule",
    "route_protocol",
    "weak_continuation",
]

CLASSIFIER_CONFIDENCE_THRESHOLD = 0.75
WEAK_CONTINUATION_MAX_CHARS = 24

RouteSource = Literal["restored", "explicit", "deterministic", "classifier", "fallback", "default"]


class ProtocolRoutingError(ProtocolError):
    """No protocol can run this message; the host journals ``protocol.route.failed``."""


class RouteDecision(WireModel):
    protocol: ProtocolRef
    source: RouteSource
    reason_codes: tuple[str, ...]
    task_relation: TaskRelation
    warnings: tuple[str, ...] = ()
    confidence: float | None = None
    """The classifier's confidence when it took part in the decision."""


# --------------------------------------------------------------------------- text rules

WEAK_CONTINUATION_PHRASES: tuple[str, ...] = (
    "再次尝试",
    "再试一次",
    "再试",
    "重试一次",
    "重试",
    "继续",
    "接着",
    "重来",
    "再来一次",
    "重新来",
    "重新试",
    "重新跑",
    "try again",
    "retry",
    "continue",
    "resume",
    "keep going",
    "one more time",
)
_WEAK = re.compile(
    r"^(?:请|please\s+)?(?:"
    + "|".join(
        re.escape(p).replace(r"\ ", r"\s+")
        for p in sorted(WEAK_CONTINUATION_PHRASES, key=len, reverse=True)
    )
    + r")[\s!！?？。,.，]*$",
    re.IGNORECASE,
)


def weak_continuation(text: str) -> bool:
    """The whole message only says "go on / try again" (zh or en), at most 24 characters."""
    stripped = text.strip()
    if not 1 <= code_point_length(stripped) <= WEAK_CONTINUATION_MAX_CHARS:
        return False
    return _WEAK.match(stripped) is not None


_ANALYTIC_EN = re.compile(
    r"\b(?:sql|quer(?:y|ies)|metrics?|analytics?|analy[sz](?:e|es|ed|ing)|analys[ie]s"
    r"|statistics?|data\s+(?:analysis|query)|revenue\s+trends?|group\s+by"
    r"|(?:cohort|retention)\s+analysis|conversion\s+funnels?)\b",
    re.IGNORECASE,
)
_ANALYTIC_ZH = re.compile(
    r"分析|统计|查询数据|计算.{0,20}?(?:数据|订单|利润|指标)|转化漏斗",
)


def analytic_intent(text: str) -> bool:
    """The message plainly asks for data analysis (used only while no task is recorded).

    Single words that also appear in everyday requests (sales, count, orders) are not
    enough on their own.
    """
    return bool(_ANALYTIC_EN.search(text) or _ANALYTIC_ZH.search(text))


# --------------------------------------------------------------------------- rules


class RouteCandidate(WireModel):
    protocol: ProtocolRef
    priority: int
    reason_code: str
    task_relation: TaskRelation


RouteRule = Callable[[str, SessionIntent | None], RouteCandidate | None]


def inherited_intent_rule(text: str, intent: SessionIntent | None) -> RouteCandidate | None:
    """A weak continuation of a recorded task continues it, without a classifier call."""
    if intent is None or not weak_continuation(text):
        return None
    return RouteCandidate(
        protocol=intent.protocol,
        priority=300,
        reason_code="SESSION_INTENT_INHERITED",
        task_relation="continue",
    )


def analytic_intent_rule(text: str, intent: SessionIntent | None) -> RouteCandidate | None:
    """Plain analytic phrasing starts a data-analysis task when none is recorded."""
    if intent is not None or not analytic_intent(text):
        return None
    return RouteCandidate(
        protocol=DATA_ANALYSIS_REF,
        priority=100,
        reason_code="ANALYTIC_INTENT",
        task_relation="replace",
    )


DEFAULT_RULES: tuple[RouteRule, ...] = (inherited_intent_rule, analytic_intent_rule)


# --------------------------------------------------------------------------- routing


def _available(
    authorized: Collection[ProtocolRef], registered: Mapping[ProtocolRef, ProtocolDefinition]
) -> tuple[ProtocolRef, ...]:
    return tuple(sorted((ref for ref in set(authorized) if ref in registered), key=str))


async def _classify(
    classifier: Classifier,
    classification_input: ClassificationInput,
    warnings: list[str],
    threshold: float,
) -> Classification | None:
    """Call and parse once; every failure mode becomes a warning, never an exception."""
    try:
        raw = await classifier(classification_input)
    except Exception as exc:  # the classifier is a remote model call; any failure is soft
        warnings.append(f"PROTOCOL_CLASSIFICATION_FAILED:{type(exc).__name__}")
        return None
    try:
        result = parse_classifier_output(raw)
    except ClassifierOutputError as exc:
        warnings.append(exc.message)
        return None
    if result.protocol not in classification_input.candidates:
        warnings.append(f"PROTOCOL_CLASSIFIER_INVALID_SELECTION:{result.protocol}")
        return None
    if result.confidence < threshold:
        warnings.append(f"PROTOCOL_CLASSIFICATION_LOW_CONFIDENCE:{result.confidence:.2f}")
        return None
    return result


def _relation_without_intent(relation: TaskRelation) -> TaskRelation:
    # Nothing to continue or refine: a task-bearing message starts the task.
    return "replace" if relation in ("continue", "refine") else relation


async def route_protocol(
    user_input: str,
    *,
    authorized: Collection[ProtocolRef],
    registered: Mapping[ProtocolRef, ProtocolDefinition] = DEFINITIONS,
    restored: ProtocolRef | None = None,
    explicit: ProtocolRef | None = None,
    intent: SessionIntent | None = None,
    classifier: Classifier | None = None,
    background: str | None = None,
    rules: Sequence[RouteRule] = DEFAULT_RULES,
    threshold: float = CLASSIFIER_CONFIDENCE_THRESHOLD,
    default: ProtocolRef = GENERAL_TASK_REF,
) -> RouteDecision:
    """Route one message. Raises ``ProtocolRoutingError`` only when nothing can run it."""
    available = _available(authorized, registered)

    def require(ref: ProtocolRef) -> None:
        if ref not in registered:
            raise ProtocolRoutingError(ErrorCode.PROTOCOL_NOT_REGISTERED, f"{ref}")
        if ref not in set(authorized):
            raise ProtocolRoutingError(ErrorCode.PROTOCOL_NOT_AUTHORIZED, f"{ref}")

    # An intent whose protocol this user may no longer run is ignored for routing.
    usable_intent = intent if intent is not None and intent.protocol in available else None
    weak = weak_continuation(user_input)
    has_input = bool(user_input.strip())

    if restored is not None:
        require(restored)
        if explicit is not None and explicit != restored:
            raise ProtocolRoutingError(
                ErrorCode.PROTOCOL_RESUME_SELECTION_MISMATCH, f"{explicit}:{restored}"
            )
        return RouteDecision(
            protocol=restored,
            source="restored",
            reason_codes=("PROTOCOL_SEGMENT_RESTORED",),
            task_relation="continue",
        )

    if explicit is not None:
        require(explicit)
        return await _route_explicit(
            explicit, user_input, usable_intent, weak, classifier, background, threshold
        )

    candidates = [
        c
        for rule in rules
        if (c := rule(user_input, usable_intent)) is not None and c.protocol in available
    ]
    if candidates:
        top = max(c.priority for c in candidates)
        best = [c for c in candidates if c.priority == top]
        if len(best) == 1:
            return RouteDecision(
                protocol=best[0].protocol,
                source="deterministic",
                reason_codes=(best[0].reason_code,),
                task_relation=best[0].task_relation,
            )
        if classifier is None:
            tied = ",".join(sorted(str(c.protocol) for c in best))
            raise ProtocolRoutingError(ErrorCode.PROTOCOL_AMBIGUOUS, f"{tied}")

    warnings: list[str] = []
    if classifier is not None and available:
        classification_input = ClassificationInput(
            user_text=user_input,
            candidates=available,
            session_intent=IntentSummary.of(usable_intent) if usable_intent else None,
            background=background,
        )
        result = await _classify(classifier, classification_input, warnings, threshold)
        if result is not None:
            relation = result.task_relation
            if usable_intent is None:
                relation = _relation_without_intent(relation)
            return RouteDecision(
                protocol=result.protocol,
                source="classifier",
                reason_codes=result.reason_codes or ("PROTOCOL_CLASSIFIED",),
                task_relation=relation,
                warnings=tuple(warnings),
                confidence=result.confidence,
            )
    elif classifier is None:
        warnings.append("PROTOCOL_CLASSIFIER_UNAVAILABLE")

    if usable_intent is not None:
        # Without a confident classification the recorded task is the best evidence of
        # what the user is doing; defaulting to general-task would refuse its data work.
        return RouteDecision(
            protocol=usable_intent.protocol,
            source="fallback",
            reason_codes=("SESSION_INTENT_FALLBACK",),
            task_relation="continue",
            warnings=tuple(warnings),
        )
    if default not in available:
        raise ProtocolRoutingError(ErrorCode.PROTOCOL_NOT_RESOLVED, f"{default}")
    return RouteDecision(
        protocol=default,
        source="default",
        reason_codes=("GENERAL_TASK_DEFAULT",),
        # A first message is a task: record it so the session never stays intent-less.
        task_relation="replace" if has_input and not weak else "side-chat",
        warnings=tuple(warnings),
    )


async def _route_explicit(
    explicit: ProtocolRef,
    user_input: str,
    intent: SessionIntent | None,
    weak: bool,
    classifier: Classifier | None,
    background: str | None,
    threshold: float,
) -> RouteDecision:
    """The user chose the protocol; only the task relation is left to decide."""
    reasons = ("USER_EXPLICIT",)
    if intent is None:
        return RouteDecision(
            protocol=explicit, source="explicit", reason_codes=reasons, task_relation="replace"
        )
    if weak:
        return RouteDecision(
            protocol=explicit, source="explicit", reason_codes=reasons, task_relation="continue"
        )
    warnings: list[str] = []
    if classifier is not None:
        result = await _classify(
            classifier,
            ClassificationInput(
                user_text=user_input,
                candidates=(explicit,),
                session_intent=IntentSummary.of(intent),
                background=background,
            ),
            warnings,
            threshold,
        )
        if result is not None:
            return RouteDecision(
                protocol=explicit,
                source="explicit",
                reason_codes=(*reasons, "TASK_RELATION_CLASSIFIED"),
                task_relation=result.task_relation,
                warnings=tuple(warnings),
                confidence=result.confidence,
            )
    else:
        warnings.append("PROTOCOL_CLASSIFIER_UNAVAILABLE")
    # Undecided: a refinement keeps the task identity and all of its text, so a wrong
    # guess loses nothing, whereas a wrong replace would discard the task.
    return RouteDecision(
        protocol=explicit,
        source="explicit",
        reason_codes=(*reasons, "TASK_RELATION_ASSUMED_REFINE"),
        task_relation="refine",
        warnings=tuple(warnings),
    )
