"""The plan core: record, pure transitions, gate and prompts. No I/O, no ADK."""

from plangate.plan.codec import PlanDecodeError, decode_plan, encode_plan, state_key
from plangate.plan.gate import (
    DEFAULT_READONLY_SUBAGENT_TYPES,
    DEFAULT_READONLY_TOOL_NAMES,
    DEFAULT_WRITE_TOOL_NAMES,
    PLAN_TOOL_NAMES,
    GateDecision,
    GatePolicy,
    ToolCall,
    decide,
)
from plangate.plan.prompts import DEFAULT_PLAN_AWARENESS_PROMPT, DEFAULT_PLAN_MODE_PROMPT
from plangate.plan.record import (
    ApprovalEvent,
    PendingRequest,
    PlanQuestion,
    PlanRecord,
    PlanStatus,
    Revision,
)
from plangate.plan.render import plan_to_task_subjects, render_plan
from plangate.plan.replies import ReplyError, ReplyErrorCode
from plangate.plan.transitions import PlanError, ReplyIgnored, Transition

__all__ = [
    "DEFAULT_PLAN_AWARENESS_PROMPT",
    "DEFAULT_PLAN_MODE_PROMPT",
    "DEFAULT_READONLY_SUBAGENT_TYPES",
    "DEFAULT_READONLY_TOOL_NAMES",
    "DEFAULT_WRITE_TOOL_NAMES",
    "PLAN_TOOL_NAMES",
    "ApprovalEvent",
    "GateDecision",
    "GatePolicy",
    "PendingRequest",
    "PlanDecodeError",
    "PlanError",
    "PlanQuestion",
    "PlanRecord",
    "PlanStatus",
    "ReplyError",
    "ReplyErrorCode",
    "ReplyIgnored",
    "Revision",
    "ToolCall",
    "Transition",
    "decide",
    "decode_plan",
    "encode_plan",
    "plan_to_task_subjects",
    "render_plan",
    "state_key",
]
