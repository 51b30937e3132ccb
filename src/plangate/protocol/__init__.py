"""Protocol governance core: routing, phase machines, handoff, tool plan, completion.

Pure pydantic models and functions; the store and the ADK host call into these.
"""

from plangate.protocol.actions import (
    DATA_ACTION_NAMES,
    TOOL_ACTION_ALIASES,
    action_for_tool,
    is_data_action,
    tool_for_action,
)
from plangate.protocol.classifier import (
    Classification,
    ClassificationInput,
    Classifier,
    parse_classifier_output,
    render_classifier_prompt,
)
from plangate.protocol.completion import RunOutcome, completion_gate
from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    DEFINITIONS,
    GENERAL_TASK_REF,
    ActionOutcome,
    Allowed,
    CompletionDecision,
    LedgerEntry,
    ProtocolDefinition,
    ProtocolError,
    ProtocolRef,
    ProtocolState,
    Rejected,
    allowed_actions,
    authorize_action,
    evaluate_completion,
    record_action,
    segment_id_for,
    start_segment,
)
from plangate.protocol.handoff import HandoffDecision, ProtocolEvent, evaluate_handoff
from plangate.protocol.helper_context import HelperContext, build_helper_context
from plangate.protocol.intent import (
    IntentTransition,
    SessionIntent,
    TaskRelation,
    effective_intent_text,
    intent_transition_for_route,
    refine_intent_text,
)
from plangate.protocol.requirements import extract_requirements
from plangate.protocol.router import (
    ProtocolRoutingError,
    RouteDecision,
    analytic_intent,
    route_protocol,
    weak_continuation,
)
from plangate.protocol.tool_plan import (
    SkillPolicy,
    ToolPlan,
    ToolPlanEntry,
    build_tool_plan,
    render_tool_plan_for_instructions,
    resolve_availability,
)

__all__ = [
    "DATA_ACTION_NAMES",
    "DATA_ANALYSIS_REF",
    "DEFINITIONS",
    "GENERAL_TASK_REF",
    "TOOL_ACTION_ALIASES",
    "ActionOutcome",
    "Allowed",
    "Classification",
    "ClassificationInput",
    "Classifier",
    "CompletionDecision",
    "HandoffDecision",
    "HelperContext",
    "IntentTransition",
    "LedgerEntry",
    "ProtocolDefinition",
    "ProtocolError",
    "ProtocolEvent",
    "ProtocolRef",
    "ProtocolRoutingError",
    "ProtocolState",
    "Rejected",
    "RouteDecision",
    "RunOutcome",
    "SessionIntent",
    "SkillPolicy",
    "TaskRelation",
    "ToolPlan",
    "ToolPlanEntry",
    "action_for_tool",
    "allowed_actions",
    "analytic_intent",
    "authorize_action",
    "build_helper_context",
    "build_tool_plan",
    "completion_gate",
    "effective_intent_text",
    "evaluate_completion",
    "evaluate_handoff",
    "extract_requirements",
    "intent_transition_for_route",
    "is_data_action",
    "parse_classifier_output",
    "record_action",
    "refine_intent_text",
    "render_classifier_prompt",
    "render_tool_plan_for_instructions",
    "resolve_availability",
    "route_protocol",
    "segment_id_for",
    "start_segment",
    "tool_for_action",
    "weak_continuation",
]
