"""A separate process that drives Plan Mode on a shared database (restart and race tests).

python plan_process.py start DB WORKDIR         -> plans and pauses on approval
python plan_process.py approve DB WORKDIR SID CALL_ID
python plan_process.py race DB SCOPE_KEY NAME COUNT START_AT
python plan_process.py ask-two DB WORKDIR      -> two questions in one step, answers one
python plan_process.py answer-second DB WORKDIR SID
python plan_process.py set-mode DB SCOPE_KEY plan|off  -> enters or leaves Plan Mode once
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


async def ask_two(db: str, workdir: str) -> None:
    from harness import make_agent
    from plangate.adk.runner import build_runner
    from plangate.adk.session import PlanSession
    from plangate.models.scripted import ScriptedLlm, call

    model = ScriptedLlm()
    runner = build_runner(make_agent(model), database_url=db, app_name="restart")
    session = await PlanSession.open(runner, state={"agent_mode": "plan"})
    model.add(
        [
            call("ask_user_question", question="Which database?"),
            call("ask_user_question", question="Which port?"),
        ]
    )
    async for _ in session.run("add persistence"):
        pass
    first, _second = await session.pending()
    waiting = await session.submit(PlanSession.answer(first, "PostgreSQL"))
    print(json.dumps({"session_id": session.session_id, "open": len(waiting.open)}))


async def answer_second(db: str, workdir: str, session_id: str) -> None:
    from harness import make_agent
    from plangate.adk.runner import build_runner
    from plangate.adk.session import PlanSession
    from plangate.models.scripted import ScriptedLlm, text

    model = ScriptedLlm()
    runner = build_runner(make_agent(model), database_url=db, app_name="restart")
    session = await PlanSession.open(runner, session_id=session_id)
    [second] = await session.pending()
    waiting = await session.submit(PlanSession.answer(second, "5432"))
    seen: list = []

    def echo(request):
        for content in request.contents:
            for part in content.parts or []:
                response = part.function_response
                if response is not None and response.name == "ask_user_question":
                    seen.append([response.response["status"], response.response["answer"]])
        return [text("thanks")]

    model.add(echo)
    async for _ in session.run(waiting.message):
        pass
    record = await session.record()
    print(
        json.dumps(
            {
                "seen": seen,
                "pending": [p.call_id for p in record.pending],
                "answers": [q.answer for q in record.asked_questions],
                "model_calls": len(model.requests),
            }
        )
    )


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


async def set_mode(db: str, scope_key: str, mode: str) -> None:
    """Enter (``plan``) or leave (``off``) Plan Mode for one scope, in one commit."""
    from plangate.adk.options import PlanOptions
    from plangate.adk.runtime import PlanRuntime
    from plangate.adk.scope import PlanScope
    from plangate.plan.transitions import cancel, force_enter

    scope = PlanScope(*scope_key.split("/"))
    runtime = PlanRuntime(PlanOptions(database_url=db), scope.branch)
    loaded = await runtime.load(scope)
    record = loaded.state.record
    if mode == "plan":
        transition = force_enter(record, objective="from another process", now=time.time())
    else:
        transition = cancel(record, now=time.time())
    assert transition is not None, f"nothing to do for {mode}"
    state = loaded.state.model_copy(update={"record": transition.record})
    version = await runtime.commit(scope, loaded, state, [transition])
    print(json.dumps({"status": transition.record.status.value, "version": version}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "start":
        asyncio.run(start(*args))
    elif command == "approve":
        asyncio.run(approve(*args))
    elif command == "ask-two":
        asyncio.run(ask_two(*args))
    elif command == "answer-second":
        asyncio.run(answer_second(*args))
    elif command == "set-mode":
        asyncio.run(set_mode(*args))
    else:
        asyncio.run(race(args[0], args[1], args[2], int(args[3]), float(args[4])))
