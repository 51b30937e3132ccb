"""The plan record as session state holds it: its key, and its JSON text form.

plangate mirrors a plan into ADK session state as a JSON object (``PlanRecord.dump()``);
a host that keeps it as a string, as the tRPC-Agent Plan Mode API does, can use the text
form. Both decode the same way. Decoding fails closed: malformed input raises
:class:`PlanDecodeError` instead of reading as "no plan", because "no plan" would lift
the gate.
"""

from __future__ import annotations

import json
from typing import Any, cast

from pydantic import ValidationError

from plangate.plan.record import PlanRecord

__all__ = ["PlanDecodeError", "decode_plan", "encode_plan", "state_key"]


class PlanDecodeError(ValueError):
    """A stored plan that is not a plan record; read it as "being planned", never as none."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __repr__(self) -> str:
        return f"PlanDecodeError({self.reason!r})"


def state_key(branch: str = "", prefix: str = "plan") -> str:
    """The session-state key of the plan of ``branch``: ``plan:<branch>``, or ``plan``."""
    if not prefix or prefix.startswith("temp:"):
        raise ValueError("the prefix must be non-empty and must not use 'temp:'")
    return f"{prefix}:{branch}" if branch else prefix


def encode_plan(record: PlanRecord) -> str:
    """The record as JSON text: the object plangate mirrors (camelCase), serialised."""
    return json.dumps(record.dump(), ensure_ascii=False, separators=(",", ":"))


def decode_plan(value: str | dict[str, Any] | None) -> PlanRecord | None:
    """The record in ``value`` (JSON text or the mirrored object); None only for None.

    Raises :class:`PlanDecodeError` for anything else -- text that is not JSON, JSON that
    is not an object, an object that is not a plan record -- so a caller cannot mistake
    a corrupt plan for no plan (and lift the gate with it).
    """
    if value is None:
        return None
    data: object = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as exc:
            raise PlanDecodeError(f"the plan is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PlanDecodeError(f"the plan is {type(data).__name__}, not an object")
    try:
        return PlanRecord.model_validate(cast("dict[str, Any]", data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise PlanDecodeError(f"invalid {where}: {first['msg']}") from None
