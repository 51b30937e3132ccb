"""Which plan a tool call is governed by: app, user, session and plan branch."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, NamedTuple

__all__ = ["PlanScope", "governing_scope", "scope_of"]


class PlanScope(NamedTuple):
    """Immutable and cheap to build: one is made for every tool call the gate checks."""

    app_name: str
    user_id: str
    session_id: str
    branch: str

    @property
    def key(self) -> str:
        return f"{self.app_name}/{self.user_id}/{self.session_id}/{self.branch}"

    @property
    def session_key(self) -> str:
        return f"{self.app_name}/{self.user_id}/{self.session_id}"


# A sub-agent spawned by a tool runs in a session of its own; the spawning tool sets this
# so the child's tool calls are still judged against the parent's plan.
governing_scope: ContextVar[PlanScope | None] = ContextVar("plangate_governing_scope", default=None)


def scope_of(context: Any, branch: str) -> PlanScope:
    """The scope of an ADK callback/tool/readonly context."""
    inherited = governing_scope.get()
    if inherited is not None:
        return inherited
    session = context.session
    return PlanScope(session.app_name, session.user_id, session.id, branch)
