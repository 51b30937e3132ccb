"""Protocol governance through the real ADK Runner: a scripted model, the real data tools
on the sample DuckDB data, and a real database (SQLite and PostgreSQL).

Ports the anchor's host scenarios (run boundary, handoff, route correction, completion
gate, error observations, tool plan) and the host-side regressions of its weaknesses.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from sqlalchemy import delete

from harness import WRITES, Harness, Write, final_text, paused_call_id, tool_results
from plangate.adk import PlanOptions, setup_plan
from plangate.adk.protocol_runtime import PROTOCOL_MARKER
from plangate.adk.protocols import (
    ProtocolOptions,
    get_protocol_state,
    protocol_runtime,
    setup_protocols,
)
from plangate.adk.runner import build_app
from plangate.data import DataCatalog, DataTools, data_adk_tools
from plangate.models.scripted import ScriptedLlm, call, last_tool_result, text
from plangate.policy.effects import Effect, declare_effect
from plangate.protocol import DATA_ANALYSIS_REF, IntentTransition
from plangate.store.intents import IntentRepository
from plangate.store.schema import run_intent_bindings
from plangate.store.shared import shared_store
from protocol_support import ScriptedClassifier, classification

LOW_CONFIDENCE = classification("general-task", "replace", confidence=0.4)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> DataCatalog:
    return DataCatalog(cache_dir=tmp_path_factory.mktemp("sample"))


def analyst(
    model: ScriptedLlm,
    catalog: DataCatalog,
    classifier: Any = None,
    *,
    plan: bool = False,
    options: ProtocolOptions | None = None,
    extra_tools: list[Any] | None = None,
) -> LlmAgent:
    agent = LlmAgent(
        name="analyst",
        model=model,
        instruction="You analyse data.",
        tools=[*data_adk_tools(DataTools(catalog)), *(extra_tools or [])],
    )
    if plan:
        setup_plan(agent, PlanOptions())
    return setup_protocols(
        agent, options or ProtocolOptions(classifier=classifier or ScriptedClassifier())
    )


class Env:
    """A harness plus direct views of what the runtime stored."""

    def __init__(self, agent: LlmAgent, database_url: str) -> None:
        self.agent = agent
        self.url = database_url
        self.h = Harness(agent, database_url)
        self.runtime = protocol_runtime(agent)

    @property
    def scope_key(self) -> str:
        return f"{self.h.app_name}/{self.h.user_id}/{self.h.session_id}/{self.agent.name}"

    @property
    def session_key(self) -> str:
        return f"{self.h.app_name}/{self.h.user_id}/{self.h.session_id}"

    async def mirror(self) -> dict[str, Any]:
        return get_protocol_state(await self.h.session(), self.agent.name) or {}

    async def run_id(self) -> str:
        return (await self.mirror())["run_id"]

    async def segments(self, run_id: str | None = None) -> list[Any]:
        states = await self.runtime.states()
        run = await states.run(self.scope_key, run_id or await self.run_id())
        return [s.value for s in await states.segments(self.scope_key, run.value)]

    async def kinds(self, prefix: str = "protocol.") -> list[str]:
        store = await shared_store(self.url)
        return [
            e.event.kind
            for e in await store.journal(self.scope_key)
            if e.event.kind.startswith(prefix)
        ]

    async def journal(self) -> list[Any]:
        store = await shared_store(self.url)
        return [e.event for e in await store.journal(self.scope_key)]

    async def revisions(self) -> list[Any]:
        store = await shared_store(self.url)
        async with store.engine.connect() as conn:
            return await IntentRepository(conn).revisions(self.session_key)


async def env(agent: LlmAgent, database_url: str, state: dict | None = None) -> Env:
    e = Env(agent, database_url)
    await e.h.start(state)
    return e


def system_text(model: ScriptedLlm, index: int = -1) -> str:
    instruction = model.requests[index].config.system_instruction
    return instruction if isinstance(instruction, str) else str(instruction)


# --------------------------------------------------------------------------- run boundary


async def test_routing_is_journaled_before_the_segment_starts(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog), database_url)
    model.add([text("Looking.")])
    await e.h.send("How did sales do by region?")
    assert (await e.kinds())[:4] == [
        "protocol.route.requested",
        "protocol.route.resolved",
        "protocol.run.started",
        "protocol.segment.started",
    ]
    assert f"{PROTOCOL_MARKER}\nActive protocol: data-analysis@1, phase: scope" in system_text(
        model
    )
    mirror = await e.mirror()
    assert mirror["protocol"] == "data-analysis" and mirror["version"] == 1
    assert mirror["phase"] == "scope"
    assert mirror["route"] == {
        "source": "classifier",
        "reason_codes": ["TEST_CLASSIFIED"],
        "task_relation": "replace",
        "warnings": [],
    }
    assert mirror["intent"]["text"] == "How did sales do by region?"
    assert mirror["intent"]["protocol"] == "data-analysis@1"
    # The analysis never ran: the run ends partial with the first missing goal.
    assert mirror["run_status"] == "partial"
    assert mirror["run_outcome_code"] == "SCHEMA_GROUNDING_REQUIRED"
    assert mirror["handoffs"] == []


async def test_a_refused_call_tells_the_model_its_phase_and_options_in_the_same_run(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog), database_url)
    model.add(
        [call("run_sql_readonly", source="sample", sql="SELECT 1")],
        lambda req: [text(json.dumps(last_tool_result(req, "run_sql_readonly")))],
    )
    events = await e.h.send("analyze revenue by region")
    refusal = tool_results(events, "run_sql_readonly")[0]
    assert refusal["error"] == (
        "ACTION_NOT_ALLOWED_IN_PHASE:scope:run_sql_readonly:"
        "list_data_sources,inspect_schema,lookup_values,protocol.handoff.propose"
    )
    assert refusal["allowed_actions"] == [
        "list_data_sources",
        "inspect_schema",
        "lookup_values",
        "protocol.handoff.propose",
    ]
    assert refusal["recovery"].startswith("Continue with one of the actions allowed in phase scope")
    assert refusal["execution_status"] == "not_started"
    assert last_tool_result(model.requests[-1], "run_sql_readonly") == refusal
    (segment,) = await e.segments()
    assert [(x.action, x.status, x.reason_code) for x in segment.ledger] == [
        ("run_sql_readonly", "rejected", "ACTION_NOT_ALLOWED_IN_PHASE")
    ]
    # A refused data call is never papered over (also under data-analysis, §8.10).
    assert (await e.mirror())["run_status"] == "failed"


async def test_the_completion_gate_fails_a_run_whose_data_calls_were_refused(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, ScriptedClassifier(LOW_CONFIDENCE)), database_url)
    model.add(
        [call("list_data_sources"), call("inspect_schema", source="sample")],
        [text("Revenue was about 380k last quarter.")],
    )
    events = await e.h.send("revenue by region last quarter")
    answer = final_text(events)
    assert answer.startswith("DATA_ACTIONS_REJECTED_BY_PROTOCOL: 2 data tool call(s)")
    assert "(inspect_schema, list_data_sources)" in answer
    assert not any(
        "380k" in (p.text or "")
        for ev in events
        for p in (ev.content.parts if ev.content else []) or []
    )
    mirror = await e.mirror()
    assert mirror["protocol"] == "general-task"
    assert mirror["run_status"] == "failed"
    assert mirror["run_outcome_code"] == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"
    assert mirror["route"]["source"] == "default"
    assert (await e.kinds())[-2:] == ["protocol.completion.proposed", "protocol.run.failed"]
    (segment,) = await e.segments()
    assert segment.status == "failed"


async def test_general_task_runs_with_only_non_data_rejections_complete(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, ScriptedClassifier(LOW_CONFIDENCE)), database_url)
    model.add(
        [call("analysis_requirements_commit", requirements={"r1": "satisfied"})],
        [text("Hello!")],
    )
    events = await e.h.send("hello there")
    assert tool_results(events, "analysis_requirements_commit")[0]["error"].startswith(
        "ACTION_NOT_ALLOWED_IN_PHASE:understand:analysis.requirements.commit"
    )
    assert final_text(events) == "Hello!"
    mirror = await e.mirror()
    assert mirror["run_status"] == "completed"
    (segment,) = await e.segments()
    assert segment.domain.answer_message_id is not None
    assert segment.phase == "answer"


async def test_parallel_calls_are_all_recorded_and_move_the_phase(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog), database_url)
    model.add([call("list_data_sources"), call("inspect_schema", source="sample")], [text("ok")])
    await e.h.send("analyze revenue")
    (segment,) = await e.segments()
    assert sorted(x.action for x in segment.ledger) == ["inspect_schema", "list_data_sources"]
    assert all(x.status == "succeeded" for x in segment.ledger)
    assert segment.phase == "semantic_grounding"
    assert "protocol.phase.entered" in await e.kinds()


# --------------------------------------------------------------------------- intent routing


async def test_a_weak_follow_up_inherits_the_intent_without_the_classifier(
    database_url: str, catalog: DataCatalog
) -> None:
    classifier = ScriptedClassifier()
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, classifier), database_url)
    model.add([text("first")], [text("second")])
    await e.h.send("break down sales by region")
    first = await e.mirror()
    await e.h.send("try again")
    second = await e.mirror()
    assert len(classifier.inputs) == 1
    assert second["route"]["reason_codes"] == ["SESSION_INTENT_INHERITED"]
    assert second["route"]["task_relation"] == "continue"
    assert second["protocol"] == "data-analysis"
    assert second["intent"] == first["intent"]
    assert len(await e.revisions()) == 1


async def test_requirements_are_extracted_from_the_task_by_default_and_on_refinement(
    database_url: str, catalog: DataCatalog
) -> None:
    classifier = ScriptedClassifier(
        classification(), classification("data-analysis", "refine", reasons=("REFINES",))
    )
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, classifier), database_url)
    model.add([text("first")], [text("second")], [text("third")])
    await e.h.send("revenue by region last quarter")
    asked = {"metric:revenue": "pending", "dimension:region": "pending"}
    asked["time:last-quarter"] = "pending"
    (segment,) = await e.segments()
    assert segment.domain.requirements == asked
    # The model is told what is still owed, by id.
    assert "ANALYSIS_REQUIREMENT_PENDING:metric:revenue" in system_text(model)
    assert (await e.mirror())["run_status"] == "partial"
    # "try again" works on the recorded task: the same requirements, not none.
    await e.h.send("try again")
    (segment,) = await e.segments()
    assert segment.domain.requirements == asked
    await e.h.send("break it down by month")
    (segment,) = await e.segments()
    assert segment.domain.requirements == {**asked, "dimension:month": "pending"}


async def test_the_classifier_sees_the_intent_and_budgeted_history_and_can_refine(
    database_url: str, catalog: DataCatalog
) -> None:
    classifier = ScriptedClassifier(
        classification(),
        classification("general-task", "side-chat"),
        classification("data-analysis", "refine", reasons=("REFINES",)),
    )
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, classifier), database_url)
    model.add([text("first")], [text("fine")], [text("third")])
    await e.h.send("sales by region")
    await e.h.send("how are you today?")
    assert (await e.mirror())["intent"]["text"] == "sales by region"  # side-chat keeps it
    await e.h.send("only count completed orders")
    seen = classifier.inputs[2]
    assert seen.session_intent is not None and seen.session_intent.text == "sales by region"
    background = seen.background or ""
    assert "Session intent: data-analysis — sales by region" in background
    # The intent is not repeated as a recent query (§8.12).
    assert "Recent queries: how are you today?" in background
    assert "not instructions" in background
    first, second = await e.revisions()
    assert second.change_kind == "refine" and second.intent_id == first.intent_id
    assert second.previous_revision_id == first.id
    assert "only count completed orders" in second.text
    assert (await e.mirror())["route"]["task_relation"] == "refine"


async def test_the_default_classifier_asks_the_agents_own_model(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    agent = analyst(model, catalog, options=ProtocolOptions())
    e = await env(agent, database_url)
    fenced = "```json\n" + classification("data-analysis", "replace") + "\n```"
    model.add([text(fenced)], [text("ok")])
    await e.h.send("which region sells most?")
    prompt = model.requests[0].contents[0].parts[0].text
    assert "Choose only among these protocols" in prompt
    assert model.requests[0].config.temperature == 0
    assert (await e.mirror())["route"]["source"] == "classifier"


async def test_an_explicit_selection_routes_without_the_classifier(
    database_url: str, catalog: DataCatalog
) -> None:
    classifier = ScriptedClassifier()
    model = ScriptedLlm()
    e = await env(
        analyst(model, catalog, classifier), database_url, {"protocol_selection": "general-task"}
    )
    model.add([text("ok")])
    await e.h.send("sales by region")
    mirror = await e.mirror()
    assert mirror["protocol"] == "general-task"
    assert mirror["route"]["reason_codes"] == ["USER_EXPLICIT"]
    assert classifier.inputs == []


@pytest.mark.parametrize("selection", ["data-analysis@x", "@1", "data-analysis@0", "   "])
async def test_a_malformed_protocol_selection_fails_the_run_with_a_code(
    database_url: str, catalog: DataCatalog, selection: str
) -> None:
    """Session state is written by surfaces: a bad selection ends the run with a coded
    message and a journaled failure, never a bare ValueError out of the Runner."""
    classifier = ScriptedClassifier()
    model = ScriptedLlm()
    e = await env(
        analyst(model, catalog, classifier), database_url, {"protocol_selection": selection}
    )
    model.add([text("never asked")])
    events = await e.h.send("sales by region")
    if not selection.strip():  # blank means no selection: the router decides
        assert model.requests
        return
    assert final_text(events).startswith(f"PROTOCOL_SELECTION_INVALID:{selection!r}")
    assert model.requests == [] and classifier.inputs == []
    assert await e.kinds() == ["protocol.route.failed"]
    failed = (await e.journal())[-1]
    assert failed.detail["reasonCode"] == "PROTOCOL_SELECTION_INVALID"
    # The next message with a valid selection runs normally.
    model.add([text("ok")])
    await e.h.send("sales by region", state_delta={"protocol_selection": "general-task"})
    assert (await e.mirror())["protocol"] == "general-task"


# --------------------------------------------------------------------------- handoff


async def test_a_handoff_switches_protocol_segment_and_intent_atomically(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, ScriptedClassifier(LOW_CONFIDENCE)), database_url)
    model.add(
        [call("protocol_handoff", target_protocol="data-analysis@1", reason="needs data")],
        [call("list_data_sources")],
        [text("done")],
    )
    events = await e.h.send("revenue by region last quarter")
    result = tool_results(events, "protocol_handoff")[0]
    assert result["status"] == "accepted"
    assert result["active_protocol"] == "data-analysis@1"
    assert result["active_phase"] == "scope"
    assert result["available_tools"] == [
        "list_data_sources",
        "inspect_schema",
        "lookup_values",
        "protocol_handoff",
    ]
    assert "analysis_requirements_commit" in result["protocol_disabled_tools"]
    assert "run_sql_readonly" in result["protocol_disabled_tools"]
    assert "sources" in tool_results(events, "list_data_sources")[0]
    assert "Active protocol: data-analysis@1, phase: scope" in system_text(model, 1)
    kinds = await e.kinds()
    start = kinds.index("protocol.handoff.proposed")
    assert kinds[start : start + 4] == [
        "protocol.handoff.proposed",
        "protocol.segment.ended",
        "protocol.handoff.accepted",
        "protocol.segment.started",
    ]
    first, second = await e.revisions()
    assert second.change_kind == "handoff" and second.intent_id == first.intent_id
    assert second.protocol == DATA_ANALYSIS_REF and second.text == first.text
    old, new = await e.segments()
    assert old.status == "handed_off" and new.status == "completed"
    assert old.ledger[-1].action == "protocol.handoff.propose"
    mirror = await e.mirror()
    assert mirror["protocol"] == "data-analysis" and mirror["intent"]["change_kind"] == "handoff"
    assert [(h["from_protocol"], h["to_protocol"]) for h in mirror["handoffs"]] == [
        ("general-task@1", "data-analysis@1")
    ]


async def test_rejected_handoffs_are_journaled_and_judged_from_server_state(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog), database_url)
    model.add(
        [call("protocol_handoff", target_protocol="data-analysis@1")],
        [call("protocol_handoff", target_protocol="general-task")],
        [text("staying")],
    )
    events = await e.h.send("analyze revenue by region")
    same, strict = tool_results(events, "protocol_handoff")
    assert same["reason_code"] == "PROTOCOL_HANDOFF_SAME_PROTOCOL"
    assert strict["reason_code"] == "PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS"
    assert "SCHEMA_GROUNDING_REQUIRED" in strict["unresolved_goals"]
    assert strict["active_protocol"] == "data-analysis@1"
    kinds = await e.kinds("protocol.handoff")
    assert kinds == ["protocol.handoff.proposed", "protocol.handoff.rejected"] * 2
    (segment,) = await e.segments()
    assert [(x.action, x.status) for x in segment.ledger] == [
        ("protocol.handoff.propose", "rejected"),
        ("protocol.handoff.propose", "rejected"),
    ]


async def test_route_correction_aborts_an_untouched_strict_segment_only(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    e = await env(analyst(model, catalog), database_url)
    model.add(
        [call("protocol_handoff", target_protocol="general-task@1", route_correction=True)],
        [text("this is a poem, not data")],
    )
    events = await e.h.send("analyze this poem for me")
    assert tool_results(events, "protocol_handoff")[0]["transition_kind"] == "route-correction"
    old, new = await e.segments()
    assert old.status == "aborted" and new.protocol.id == "general-task"
    ended = next(ev for ev in await e.journal() if ev.kind == "protocol.segment.ended")
    assert ended.detail["reasonCode"] == "PROTOCOL_ROUTE_CORRECTED"
    assert (await e.mirror())["run_status"] == "completed"

    model.add(
        [call("list_data_sources")],
        [call("protocol_handoff", target_protocol="general-task@1", route_correction=True)],
        [text("staying")],
    )
    await e.h.send("analyze revenue per region")
    late = last_tool_result(model.requests[-1], "protocol_handoff")
    assert late["reason_code"] == "PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED"


async def test_a_handoff_rolls_back_when_the_session_intent_moved_meanwhile(
    database_url: str, catalog: DataCatalog
) -> None:
    store = await shared_store(database_url)
    session_key: list[str] = []

    async def another_run_changes_the_task() -> dict[str, Any]:
        """Simulates another run of the session replacing its task."""
        async with store.transaction() as tx:
            repo = IntentRepository(tx.connection)
            head = await repo.head(session_key[0])
            await repo.commit(
                session_key[0],
                IntentTransition(
                    kind="replace",
                    intent_id=None,
                    previous_revision_id=head,
                    protocol=DATA_ANALYSIS_REF,
                    text="a different task",
                    task_relation="replace",
                ),
                expected_head=head,
                source_run_id="other-run",
            )
        return {"ok": True}

    declare_effect(another_run_changes_the_task, Effect.READ)
    model = ScriptedLlm()
    agent = analyst(
        model,
        catalog,
        ScriptedClassifier(LOW_CONFIDENCE),
        extra_tools=[another_run_changes_the_task],
    )
    e = await env(agent, database_url)
    session_key.append(e.session_key)
    model.add(
        [call("another_run_changes_the_task")],
        [call("protocol_handoff", target_protocol="data-analysis@1")],
        [text("could not switch")],
    )
    events = await e.h.send("revenue by region last quarter")
    failed = tool_results(events, "protocol_handoff")[0]
    assert failed["error"].startswith("SESSION_INTENT_REVISION_CONFLICT:")
    assert "was not applied" in failed["error"]
    assert failed["active_protocol"] == "general-task@1"
    (segment,) = await e.segments()
    assert segment.protocol.id == "general-task"
    kinds = await e.kinds("protocol.handoff")
    assert kinds == ["protocol.handoff.failed"]
    revisions = await e.revisions()
    assert [r.text for r in revisions] == ["revenue by region last quarter", "a different task"]
    async with store.engine.connect() as conn:
        assert await IntentRepository(conn).head(e.session_key) == revisions[-1].id


# --------------------------------------------------------------------------- CAS and races


async def test_a_lost_intent_cas_ends_the_run_before_any_model_call(
    database_url: str, catalog: DataCatalog
) -> None:
    """§8.6: a clear error, no half-write, and the model is never called."""
    store = await shared_store(database_url)
    holder: list[Env] = []

    async def racing_classifier(_: Any) -> str:
        # Another run commits a task while this one is being classified.
        async with store.transaction() as tx:
            await IntentRepository(tx.connection).commit(
                holder[0].session_key,
                IntentTransition(
                    kind="initial",
                    intent_id=None,
                    previous_revision_id=None,
                    protocol=DATA_ANALYSIS_REF,
                    text="the other run's task",
                    task_relation="replace",
                ),
                expected_head=None,
                source_run_id="other-run",
            )
        return classification()

    model = ScriptedLlm()
    e = await env(analyst(model, catalog, racing_classifier), database_url)
    holder.append(e)
    events = await e.h.send("which region sells most?")
    answer = final_text(events)
    assert answer.startswith(f"SESSION_INTENT_REVISION_CONFLICT:{e.session_key}")
    assert "send the message again" in answer
    assert model.requests == []
    mirror = await e.mirror()
    assert mirror["run_status"] == "failed"
    assert mirror["run_outcome_code"] == "SESSION_INTENT_REVISION_CONFLICT"
    states = await e.runtime.states()
    assert await states.run(e.scope_key, mirror["run_id"]) is None
    assert [r.text for r in await e.revisions()] == ["the other run's task"]
    assert await e.kinds() == ["protocol.run.rejected"]


async def test_an_optional_re_route_retry_runs_against_the_new_task(
    database_url: str, catalog: DataCatalog
) -> None:
    store = await shared_store(database_url)
    holder: list[Env] = []
    calls: list[Any] = []

    async def racing_once(classification_input: Any) -> str:
        calls.append(classification_input)
        if len(calls) == 1:
            async with store.transaction() as tx:
                await IntentRepository(tx.connection).commit(
                    holder[0].session_key,
                    IntentTransition(
                        kind="initial",
                        intent_id=None,
                        previous_revision_id=None,
                        protocol=DATA_ANALYSIS_REF,
                        text="sales by region",
                        task_relation="replace",
                    ),
                    expected_head=None,
                    source_run_id="other-run",
                )
        return classification("data-analysis", "refine")

    model = ScriptedLlm()
    options = ProtocolOptions(classifier=racing_once, conflict_retries=1)
    e = await env(analyst(model, catalog, options=options), database_url)
    holder.append(e)
    model.add([text("ok")])
    await e.h.send("only completed orders")
    assert len(calls) == 2 and calls[1].session_intent.text == "sales by region"
    mirror = await e.mirror()
    assert mirror["run_status"] == "partial"
    assert mirror["intent"]["change_kind"] == "refine"
    assert await e.kinds("protocol.run.") == [
        "protocol.run.rejected",
        "protocol.run.started",
        "protocol.run.completed",
    ]


async def test_two_runs_racing_on_one_session_exactly_one_wins(
    database_url: str, catalog: DataCatalog
) -> None:
    """Two concurrent runs (separate pooled connections) both route on the same base:
    one commits, the other fails before any model call, nothing half-written."""
    barrier = asyncio.Barrier(2)

    async def classifier(_: Any) -> str:
        await barrier.wait()  # both have read the base before either commits
        return classification()

    model = ScriptedLlm()
    agent = analyst(
        model,
        catalog,
        options=ProtocolOptions(classifier=classifier, database_url=database_url),
    )
    # ADK's database session service refuses concurrent writers on one session, so the
    # two runs share an in-memory session; everything of ours is on the real database.
    runner = Runner(app=build_app(agent, "race"), session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="race", user_id="u")
    model.add([text("winner")])

    async def run(message: str) -> list[Any]:
        content = types.Content(role="user", parts=[types.Part(text=message)])
        return [
            ev
            async for ev in runner.run_async(
                user_id="u", session_id=session.id, new_message=content
            )
        ]

    results = await asyncio.gather(run("sales by region"), run("orders per month"))
    answers = sorted(final_text(events) for events in results)
    assert answers[1] == "winner"
    assert answers[0].startswith("SESSION_INTENT_REVISION_CONFLICT:")
    assert len(model.requests) == 1
    store = await shared_store(database_url)
    session_key = f"race/u/{session.id}"
    async with store.engine.connect() as conn:
        repo = IntentRepository(conn)
        revisions = await repo.revisions(session_key)
        assert len(revisions) == 1
        assert await repo.head(session_key) == revisions[0].id
    kinds = [e.event.kind for e in await store.journal(f"{session_key}/analyst")]
    assert kinds.count("protocol.run.started") == 1
    assert kinds.count("protocol.run.rejected") == 1


# --------------------------------------------------------------------------- Plan Mode


async def test_a_data_analysis_is_planned_approved_and_resumed_on_its_segment(
    database_url: str, catalog: DataCatalog
) -> None:
    classifier = ScriptedClassifier()
    model = ScriptedLlm()
    e = await env(
        analyst(model, catalog, classifier, plan=True), database_url, {"agent_mode": "plan"}
    )
    model.add(
        [call("list_data_sources")],
        [call("update_plan_content", content="1. inspect\n2. query", mode="replace")],
        [call("exit_plan_mode", summary="revenue plan")],
    )
    events = await e.h.send("analyze revenue by region")
    assert "sources" in tool_results(events, "list_data_sources")[0]
    exit_id = paused_call_id(events, "exit_plan_mode")
    run_id = await e.run_id()
    model.add([call("inspect_schema", source="sample")], [text("schema read")])
    await e.h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    assert await e.run_id() == run_id
    (segment,) = await e.segments(run_id)
    assert [x.action for x in segment.ledger if x.action != "exit_plan_mode"][:2] == [
        "list_data_sources",
        "update_plan_content",
    ]
    assert "inspect_schema" in [x.action for x in segment.ledger]
    resolved = [ev for ev in await e.journal() if ev.kind == "protocol.route.resolved"]
    assert resolved[0].detail["reasonCodes"] == ["ANALYTIC_INTENT"]
    assert resolved[-1].detail["reasonCodes"] == ["PROTOCOL_SEGMENT_RESTORED"]
    assert classifier.inputs == []
    assert len(await e.revisions()) == 1


async def test_a_paused_run_without_an_intent_binding_does_not_resume(
    database_url: str, catalog: DataCatalog
) -> None:
    """§8.13: a run paused before the intent migration has no binding; resuming it fails
    with a clear, documented error instead of guessing its task."""
    model = ScriptedLlm()
    e = await env(analyst(model, catalog, plan=True), database_url, {"agent_mode": "plan"})
    model.add(
        [call("update_plan_content", content="1. query", mode="replace")],
        [call("exit_plan_mode")],
    )
    exit_id = paused_call_id(await e.h.send("analyze revenue"), "exit_plan_mode")
    store = await shared_store(database_url)
    async with store.transaction() as tx:
        await tx.connection.execute(delete(run_intent_bindings))
    asked = len(model.requests)
    events = await e.h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    answer = final_text(events)
    assert answer.startswith("RUN_INTENT_BINDING_REQUIRED:")
    assert "migration 2" in answer
    assert len(model.requests) == asked
    assert (await e.mirror())["run_outcome_code"] == "RUN_INTENT_BINDING_REQUIRED"


async def test_a_plan_deny_wins_and_approval_never_lifts_a_protocol_deny(
    database_url: str, catalog: DataCatalog
) -> None:
    model = ScriptedLlm()
    agent = analyst(
        model, catalog, ScriptedClassifier(LOW_CONFIDENCE), plan=True, extra_tools=[Write]
    )
    e = await env(agent, database_url, {"agent_mode": "plan"})
    model.add(
        [call("Write", path="report.md", content="draft")],
        [call("list_data_sources")],
        [call("update_plan_content", content="1. write the report", mode="replace")],
        [call("exit_plan_mode")],
    )
    events = await e.h.send("write a revenue report")
    assert tool_results(events, "Write")[0]["error"].startswith("PLAN_MODE_GATE")
    assert tool_results(events, "list_data_sources")[0]["error"].startswith(
        "ACTION_NOT_ALLOWED_IN_PHASE"
    )
    exit_id = paused_call_id(events, "exit_plan_mode")
    (segment,) = await e.segments()
    assert "Write" not in [x.action for x in segment.ledger]  # the plan gate decided first
    model.add(
        [call("list_data_sources")],
        [call("Write", path="report.md", content="final")],
        [text("written")],
    )
    events = await e.h.reply(exit_id, "exit_plan_mode", {"status": "approved"})
    assert tool_results(events, "list_data_sources")[0]["error"].startswith(
        "ACTION_NOT_ALLOWED_IN_PHASE"
    )
    assert WRITES == [("report.md", "final")]
    assert (await e.mirror())["run_outcome_code"] == "DATA_ACTIONS_REJECTED_BY_PROTOCOL"


# --------------------------------------------------------------------------- tool plan


async def test_tools_declared_as_data_stay_governed_like_data(
    database_url: str, catalog: DataCatalog
) -> None:
    def datalink_explore(query: str) -> dict[str, Any]:
        """An MCP-style data exploration tool."""
        return {"rows": []}

    declare_effect(datalink_explore, Effect.READ)
    model = ScriptedLlm()
    options = ProtocolOptions(
        classifier=ScriptedClassifier(LOW_CONFIDENCE), data_tools={"datalink_explore"}
    )
    e = await env(
        analyst(model, catalog, options=options, extra_tools=[datalink_explore]), database_url
    )
    model.add([call("datalink_explore", query="x")], [text("ok")])
    events = await e.h.send("hi")
    assert tool_results(events, "datalink_explore")[0]["error"].startswith(
        "ACTION_NOT_ALLOWED_IN_PHASE"
    )
    disabled = system_text(model, 0).split("Disabled in the current protocol phase")[1]
    assert "datalink_explore" in disabled.splitlines()[0]


def test_setup_is_idempotent_and_orders_the_boundary_after_plan_mode(
    catalog: DataCatalog, tmp_path: Path
) -> None:
    agent = analyst(ScriptedLlm(), catalog, plan=True)
    again = setup_protocols(agent, ProtocolOptions())
    assert again is agent
    from plangate.adk.boundary import boundary_of

    orders = [order for order, _ in boundary_of(agent).checks]
    # The namesake check (-100), Plan Mode's gate (0), then the protocol boundary.
    assert orders == [-100, 0, 100]
