"""A separate process that drives Plan Mode on a shared database (restart and race tests).

python plan_process.py start DB WORKDIR         -> plans and pauses on approval
python plan_process.py approve DB WORKDIR SID CALL_ID
python plan_process.py race DB SCOPE_KEY NAME COUNT START_AT
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


async def start(db: str, workdir: str) -> None:
    from harness import Harness, make_agent, paused_call_id
    from plangate.models.scripted import ScriptedLlm, call

    model = ScriptedLlm()
    harness = Harness(make_agent(model, tools=_tools(workdir)), db)
    await harness.start({"agent_mode": "plan"})
    model.add([call("update_plan_content", content="1. write the file")], [call("exit_plan_mode")])
    events = await harness.send("write the file")
    print(
        json.dumps(
            {"session_id": harness.session_id, "call_id": paused_call_id(events, "exit_plan_mode")}
        )
    )


async def approve(db: str, workdir: str, session_id: str, call_id: str) -> None:
    from harness import Harness, make_agent, tool_results
    from plangate.models.scripted import ScriptedLlm, call, text

    model = ScriptedLlm()
    harness = Harness(make_agent(model, tools=_tools(workdir)), db)
    harness.session_id = session_id
    model.add([call("save", content="approved work")], [text("done")])
    events = await harness.reply(call_id, "exit_plan_mode", {"status": "approved"})
    record = await harness.record()
    print(json.dumps({"status": record.status.value, "save": tool_results(events, "save")}))


def _tools(workdir: str) -> list:
    from plangate.policy.effects import Effect, declare_effect

    def save(content: str) -> dict:
        """Save content to out.txt."""
        (Path(workdir) / "out.txt").write_text(content)
        return {"saved": True}

    return [declare_effect(save, Effect.WRITE)]


async def race(db: str, scope_key: str, name: str, count: int, start_at: float) -> None:
    """Append ``count`` lines to one plan as fast as possible, retrying lost CAS rounds."""
    from plangate.adk.options import PlanOptions
    from plangate.adk.runtime import PlanRuntime
    from plangate.adk.scope import PlanScope
    from plangate.plan.transitions import update_content
    from plangate.store import Conflict

    runtime = PlanRuntime(PlanOptions(database_url=db), "b")
    scope = PlanScope(*scope_key.split("/"))
    await runtime.store()
    while time.time() < start_at:
        await asyncio.sleep(0.001)
    conflicts = applied = 0
    while applied < count:
        loaded = await runtime.load(scope)
        transition = update_content(
            loaded.state.record, content=f"- {name}-{applied}", mode="append", now=time.time()
        )
        state = loaded.state.model_copy(update={"record": transition.record})
        try:
            await runtime.commit(scope, loaded, state, [transition])
        except Conflict:
            conflicts += 1
            continue
        applied += 1
    print(json.dumps({"applied": applied, "conflicts": conflicts}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "start":
        asyncio.run(start(*args))
    elif command == "approve":
        asyncio.run(approve(*args))
    else:
        asyncio.run(race(args[0], args[1], args[2], int(args[3]), float(args[4])))
