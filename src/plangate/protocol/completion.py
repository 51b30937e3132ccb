"""The run completion gate: how a run ends, given everything its protocols refused.

A run whose data work was refused by the protocol must not be reported as completed
just because the agent wrote a closing message about it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from plangate.errors import ErrorCode
from plangate.protocol.actions import is_data_action
from plangate.protocol.definitions import (
    PROTOCOL_REJECTION_CODES,
    CompletionDecision,
    LedgerEntry,
)

__all__ = [
    "DATA_ACTIONS_REJECTED",
    "TERMINAL_DECISION_REQUIRED",
    "RunOutcome",
    "completion_gate",
    "unrecovered_data_rejections",
]

DATA_ACTIONS_REJECTED = ErrorCode.DATA_ACTIONS_REJECTED_BY_PROTOCOL
TERMINAL_DECISION_REQUIRED = ErrorCode.PROTOCOL_TERMINAL_DECISION_REQUIRED


class RunOutcome(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    status: Literal["completed", "degraded", "partial", "failed"]
    reason_codes: tuple[str, ...] = ()
    message: str | None = None
    rejected_data_tools: tuple[str, ...] = ()


def _refused_by_protocol(entry: LedgerEntry) -> bool:
    code = (entry.reason_code or "").split(":", 1)[0]
    return entry.status == "rejected" and code in PROTOCOL_REJECTION_CODES


def unrecovered_data_rejections(
    run_ledger: Iterable[LedgerEntry], *, is_data_action: Callable[[str], bool] = is_data_action
) -> list[LedgerEntry]:
    """Data calls the protocol refused, in any segment, whose action never ran later.

    A refusal followed by a successful call of the same action (typically after a
    handoff to data-analysis) was recovered from: the work did run.
    """
    pending: list[LedgerEntry] = []
    for entry in run_ledger:
        if not is_data_action(entry.action):
            continue
        if entry.status == "succeeded":
            pending = [p for p in pending if p.action != entry.action]
        elif _refused_by_protocol(entry):
            pending.append(entry)
    return pending


def completion_gate(
    run_ledger: Iterable[LedgerEntry],
    final_decision: CompletionDecision | None,
    *,
    is_data_action: Callable[[str], bool] = is_data_action,
) -> RunOutcome:
    """The run's terminal outcome.

    ``run_ledger`` is every segment's ledger of the run, in order; ``final_decision`` is
    the last segment's completion decision at run end. Unrecovered data refusals fail the
    run whatever the protocol; otherwise ``continue`` ends as ``partial`` and a missing
    decision fails.
    """
    refused = unrecovered_data_rejections(run_ledger, is_data_action=is_data_action)
    if refused:
        names = sorted({entry.tool or entry.action for entry in refused})
        return RunOutcome(
            status="failed",
            reason_codes=(DATA_ACTIONS_REJECTED,),
            message=(
                f"{DATA_ACTIONS_REJECTED}: {len(refused)} data tool call(s) "
                f"({', '.join(names)}) were rejected by the protocol and never ran"
            ),
            rejected_data_tools=tuple(names),
        )
    if final_decision is None:
        return RunOutcome(
            status="failed",
            reason_codes=(TERMINAL_DECISION_REQUIRED,),
            message=TERMINAL_DECISION_REQUIRED,
        )
    status = "partial" if final_decision.status == "continue" else final_decision.status
    return RunOutcome(status=status, reason_codes=final_decision.reason_codes)
