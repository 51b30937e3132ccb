"""What a thread list calls a thread: the task it works on, else its first message.

The task is the session's active intent (seed 003): a "try again" keeps it, a new task
replaces it, a refinement refines it, and a side chat leaves it alone -- so the title
follows the work rather than whatever was typed first. A thread the protocol runtime
never routed (no protocols on the agent, or no run yet) keeps its first message.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.agents import LlmAgent
from google.adk.runners import Runner

from plangate.adk.protocols import protocol_runtime

__all__ = ["TITLE_LIMIT", "clip_title", "intent_titles"]

TITLE_LIMIT = 80


def clip_title(text: str, limit: int = TITLE_LIMIT) -> str:
    """The first line with text, at most ``limit`` characters: a list row has room for
    one line, and an intent's first line is its task (refinements follow on lines of
    their own, so a refined task keeps its name)."""
    line = next((" ".join(ln.split()) for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


async def intent_titles(runner: Runner, user_id: str, session_ids: Sequence[str]) -> dict[str, str]:
    """Session id -> its title from its active intent, for the listed sessions that have
    one. One read for the whole page (intent heads and fork pins), never a read of a
    thread's events."""
    agent = runner.agent
    runtime = protocol_runtime(agent) if isinstance(agent, LlmAgent) else None
    if runtime is None or not session_ids:
        return {}
    # Outside a run nothing has told the runtime its database yet (a fresh process lists
    # threads first): the runner's session service names it, as it does at a run start.
    runtime.bind_service(runner.session_service)
    texts = await runtime.intent_texts(runner.app_name, user_id, session_ids)
    return {sid: clip_title(text) for sid, text in texts.items() if text.strip()}
