"""The base of every protocol record: frozen, strict, camelCase on the wire.

Protocol records travel as JSON (session state, journal, AG-UI state) in the camelCase
shape of the system they come from; in Python they keep snake_case names.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["WireModel"]


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )
