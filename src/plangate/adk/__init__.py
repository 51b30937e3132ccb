"""Plan Mode on Google ADK: ``setup_plan(agent, PlanOptions(...))``."""

from plangate.adk.options import PlanOptions
from plangate.adk.plugin import PlanPlugin
from plangate.adk.setup import get_plan_record, plan_runtime, setup_plan
from plangate.adk.tools import PlanToolSet, UpdatePlanContentTool, make_enter_plan_mode_tool

__all__ = [
    "PlanOptions",
    "PlanPlugin",
    "PlanToolSet",
    "UpdatePlanContentTool",
    "get_plan_record",
    "make_enter_plan_mode_tool",
    "plan_runtime",
    "setup_plan",
]
