"""Plan Mode on Google ADK: ``setup_plan(agent, PlanOptions(...))``."""

from plangate.adk.options import PlanOptions
from plangate.adk.plugin import PlanPlugin
from plangate.adk.setup import get_plan_record, plan_runtime, setup_plan
from plangate.adk.tools import PlanToolSet

__all__ = [
    "PlanOptions",
    "PlanPlugin",
    "PlanToolSet",
    "get_plan_record",
    "plan_runtime",
    "setup_plan",
]
