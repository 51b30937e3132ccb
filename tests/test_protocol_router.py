"""Protocol routing: the priority chain, the classifier contract, the text rules and
what a route does to the session intent."""

from __future__ import annotations

import json

import pytest

from plangate.protocol.classifier import (
    ClassificationInput,
    ClassifierOutputError,
    IntentSummary,
    parse_classifier_output,
    render_classifier_prompt,
)
from plangate.protocol.definitions import (
    DATA_ANALYSIS_REF,
    GENERAL_TASK_REF,
    ProtocolRef,
)
from plangate.protocol.intent import (
    SessionIntent,
    effective_intent_text,
    intent_transition_for_route,
    refine_intent_text,
)
from plangate.protocol.router import (
    ProtocolRoutingError,
    RouteCandidate,
    analytic_intent,
    route_protocol,
    weak_continuation,
)
from plangate.protocol.text_budget import code_point_length, truncate_text

BOTH = (GENERAL_TASK_REF, DATA_ANALYSIS_REF)
DATA_INTENT = SessionIntent(
    intent_id="i1", revision_id="rev1", protocol=DATA_ANALYSIS_REF, text="帮我分析当前数据"
)


class ScriptedClassifier:
    """Answers with fixed raw text (or raises) and remembers what it was shown."""

    def __init__(self, answer: str | Exception):
        self.answer = answer
        self.inputs: list[ClassificationInput] = []

    async def __call__(self, classification_input: ClassificationInput) -> str:
        self.inputs.append(classification_input)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def answer(protocol=DATA_ANALYSIS_REF, confidence=0.9, relation="replace", reasons=("FOLLOW_UP",)):
    return json.dumps(
        {
            "protocolId": protocol.id,
            "protocolVersion": protocol.version,
            "confidence": confidence,
            "reasonCodes": list(reasons),
            "taskRelation": relation,
        }
    )


# --------------------------------------------------------------------------- chain


async def test_rejects_a_run_when_no_authorized_protocol_can_be_resolved():
    with pytest.raises(ProtocolRoutingError) as err:
        await route_protocol("hello", authorized=())
    assert err.value.code == "PROTOCOL_NOT_RESOLVED"


async def test_rejects_an_unauthorized_explicit_protocol():
    with pytest.raises(ProtocolRoutingError) as err:
        await route_protocol("hi", authorized=(GENERAL_TASK_REF,), explicit=DATA_ANALYSIS_REF)
    assert err.value.message == "PROTOCOL_NOT_AUTHORIZED:data-analysis@1"
    with pytest.raises(ProtocolRoutingError) as err:
        await route_protocol("hi", authorized=BOTH, explicit=ProtocolRef(id="x", version=1))
    assert err.value.code == "PROTOCOL_NOT_REGISTERED"


async def test_honors_an_explicitly_selected_authorized_protocol():
    decision = await route_protocol("写一首诗", authorized=BOTH, explicit=DATA_ANALYSIS_REF)
    assert decision.protocol == DATA_ANALYSIS_REF
    assert decision.source == "explicit"
    assert decision.reason_codes == ("USER_EXPLICIT",)
    assert decision.task_relation == "replace"


async def test_explicit_selection_with_a_weak_follow_up_continues_the_task():
    decision = await route_protocol(
        "继续", authorized=BOTH, explicit=DATA_ANALYSIS_REF, intent=DATA_INTENT
    )
    assert decision.task_relation == "continue"


async def test_restores_a_persisted_segment_before_anything_else():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF))
    decision = await route_protocol(
        "write a README", authorized=BOTH, restored=DATA_ANALYSIS_REF, classifier=classifier
    )
    assert decision.source == "restored"
    assert decision.reason_codes == ("PROTOCOL_SEGMENT_RESTORED",)
    assert decision.task_relation == "continue"
    assert classifier.inputs == []
    with pytest.raises(ProtocolRoutingError) as err:
        await route_protocol(
            "x", authorized=BOTH, restored=DATA_ANALYSIS_REF, explicit=GENERAL_TASK_REF
        )
    assert err.value.code == "PROTOCOL_RESUME_SELECTION_MISMATCH"


async def test_selects_the_highest_priority_deterministic_route():
    def low(text, intent):
        return RouteCandidate(
            protocol=GENERAL_TASK_REF, priority=10, reason_code="LOW", task_relation="replace"
        )

    def high(text, intent):
        return RouteCandidate(
            protocol=DATA_ANALYSIS_REF, priority=50, reason_code="HIGH", task_relation="replace"
        )

    decision = await route_protocol("x", authorized=BOTH, rules=(low, high))
    assert decision.source == "deterministic"
    assert decision.reason_codes == ("HIGH",)


async def test_rejects_equally_ranked_deterministic_routes_without_a_classifier():
    def rule_for(ref):
        return lambda text, intent: RouteCandidate(
            protocol=ref, priority=10, reason_code="TIE", task_relation="replace"
        )

    rules = (rule_for(GENERAL_TASK_REF), rule_for(DATA_ANALYSIS_REF))
    with pytest.raises(ProtocolRoutingError) as err:
        await route_protocol("x", authorized=BOTH, rules=rules)
    assert err.value.message == "PROTOCOL_AMBIGUOUS:data-analysis@1,general-task@1"
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF))
    decision = await route_protocol("x", authorized=BOTH, rules=rules, classifier=classifier)
    assert decision.source == "classifier"


async def test_uses_a_constrained_classifier_when_deterministic_rules_do_not_resolve():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF, reasons=("WRITING",)))
    decision = await route_protocol(
        "write a README", authorized=BOTH, classifier=classifier, background="[bg]"
    )
    assert classifier.inputs[0].candidates == (DATA_ANALYSIS_REF, GENERAL_TASK_REF)
    assert classifier.inputs[0].background == "[bg]"
    assert decision.source == "classifier"
    assert decision.reason_codes == ("WRITING",)
    assert decision.task_relation == "replace"
    assert decision.confidence == 0.9


async def test_classifier_candidates_are_only_authorized_protocols():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF))
    await route_protocol("write a README", authorized=(GENERAL_TASK_REF,), classifier=classifier)
    assert classifier.inputs[0].candidates == (GENERAL_TASK_REF,)


async def test_uses_the_authorized_general_protocol_when_classifier_confidence_is_low():
    classifier = ScriptedClassifier(answer(DATA_ANALYSIS_REF, confidence=0.4))
    decision = await route_protocol("tell me something", authorized=BOTH, classifier=classifier)
    assert decision.protocol == GENERAL_TASK_REF
    assert decision.source == "default"
    assert decision.reason_codes == ("GENERAL_TASK_DEFAULT",)
    assert decision.warnings == ("PROTOCOL_CLASSIFICATION_LOW_CONFIDENCE:0.40",)


async def test_accepts_confidence_exactly_at_the_threshold():
    classifier = ScriptedClassifier(answer(DATA_ANALYSIS_REF, confidence=0.75))
    decision = await route_protocol("tell me something", authorized=BOTH, classifier=classifier)
    assert decision.source == "classifier"


async def test_uses_the_authorized_general_protocol_when_classification_fails_transiently():
    classifier = ScriptedClassifier(TimeoutError("model timed out"))
    decision = await route_protocol("tell me something", authorized=BOTH, classifier=classifier)
    assert decision.protocol == GENERAL_TASK_REF
    assert decision.warnings == ("PROTOCOL_CLASSIFICATION_FAILED:TimeoutError",)


async def test_inherits_the_session_intent_for_a_weak_follow_up_without_calling_the_classifier():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF))
    decision = await route_protocol(
        "再次尝试", authorized=BOTH, intent=DATA_INTENT, classifier=classifier
    )
    assert classifier.inputs == []
    assert decision.protocol == DATA_ANALYSIS_REF
    assert decision.reason_codes == ("SESSION_INTENT_INHERITED",)
    assert decision.task_relation == "continue"


async def test_the_recorded_intent_outranks_the_keyword_accelerator():
    general_intent = DATA_INTENT.model_copy(update={"protocol": GENERAL_TASK_REF})
    decision = await route_protocol("重试！", authorized=BOTH, intent=general_intent)
    assert decision.protocol == GENERAL_TASK_REF
    assert decision.reason_codes == ("SESSION_INTENT_INHERITED",)


async def test_ignores_an_unauthorized_session_intent_and_falls_back_to_the_normal_route():
    decision = await route_protocol("再次尝试", authorized=(GENERAL_TASK_REF,), intent=DATA_INTENT)
    assert decision.protocol == GENERAL_TASK_REF
    assert decision.source == "default"


async def test_passes_the_session_intent_to_the_classifier_for_ambiguous_input():
    classifier = ScriptedClassifier(answer(DATA_ANALYSIS_REF, relation="refine"))
    decision = await route_protocol(
        "按季度拆分", authorized=BOTH, intent=DATA_INTENT, classifier=classifier, background="bg"
    )
    shown = classifier.inputs[0]
    assert shown.session_intent == IntentSummary(
        protocol=DATA_ANALYSIS_REF, text="帮我分析当前数据"
    )
    assert shown.background == "bg"
    assert decision.task_relation == "refine"


async def test_accelerates_full_english_analytic_phrasing_without_a_classifier_call():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF))
    decision = await route_protocol(
        "Analyze the revenue trend by region for 2024", authorized=BOTH, classifier=classifier
    )
    assert classifier.inputs == []
    assert decision.protocol == DATA_ANALYSIS_REF
    assert decision.reason_codes == ("ANALYTIC_INTENT",)
    assert decision.task_relation == "replace"


async def test_the_accelerator_only_runs_without_an_intent():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF, relation="replace"))
    general_intent = DATA_INTENT.model_copy(update={"protocol": GENERAL_TASK_REF})
    decision = await route_protocol(
        "analyze the churn", authorized=BOTH, intent=general_intent, classifier=classifier
    )
    assert len(classifier.inputs) == 1
    assert decision.source == "classifier"


async def test_keeps_weak_follow_ups_on_the_default_route_when_no_session_intent_exists():
    decision = await route_protocol("retry", authorized=BOTH)
    assert decision.protocol == GENERAL_TASK_REF
    assert decision.source == "default"
    assert decision.task_relation == "side-chat"


# --------------------------------------------------------------------------- text rules


@pytest.mark.parametrize(
    "text",
    [
        "再次尝试",
        "请重试一次！",
        "  继续。 ",
        "Try Again!",
        "retry",
        "keep  going...",
        "请继续？",
        "one more time",
    ],
)
def test_weak_continuations(text):
    assert weak_continuation(text)


@pytest.mark.parametrize(
    "text", ["继续帮我写 README", "retry the upload", "", "   ", "continue with Q3", "再试" * 13]
)
def test_task_bearing_messages_are_not_weak_continuations(text):
    assert not weak_continuation(text)


@pytest.mark.parametrize(
    "text",
    [
        "分析一下销售额",
        "统计每个地区的订单",
        "run a SQL query",
        "show metrics for march",
        "analysing retention",
        "cohort analysis of new users",
        "计算本月利润",
        "看看转化漏斗",
    ],
)
def test_analytic_phrasing(text):
    assert analytic_intent(text)


@pytest.mark.parametrize(
    "text", ["write a sales pitch", "count files in the repo", "list my orders", "帮我写 README"]
)
def test_does_not_accelerate_ambiguous_sales_and_count_vocabulary(text):
    assert not analytic_intent(text)


# --------------------------------------------------------------------------- classifier


def test_strictly_parses_fenced_json_returned_by_compatible_models():
    raw = "```json\n" + answer(relation="continue") + "\n```"
    result = parse_classifier_output(raw)
    assert result.protocol == DATA_ANALYSIS_REF
    assert result.task_relation == "continue"
    assert result.reason_codes == ("FOLLOW_UP",)
    assert (
        parse_classifier_output(
            '{"protocolId":"general-task","protocolVersion":"1",'
            '"confidence":1,"taskRelation":"side-chat"}'
        ).confidence
        == 1
    )


@pytest.mark.parametrize(
    "raw",
    [
        "I think data-analysis",
        "[]",
        answer(confidence=1.2),
        answer(confidence=-0.1),
        answer(reasons=("A", "B", "C", "D", "E")),
        answer(reasons=("lower_case",)),
        answer(relation="maybe"),
        answer().replace('"confidence": 0.9', '"confidence": "0.9"'),
        answer().replace('"protocolVersion": 1', '"protocolVersion": 1.5'),
        answer()[:-1] + ', "extra": 1}',
        "Sure! ```json\n" + answer() + "\n```",
        answer().replace('"protocolId": "data-analysis"', '"protocolId": ""'),
    ],
)
def test_rejects_anything_but_a_strict_classification(raw):
    with pytest.raises(ClassifierOutputError) as err:
        parse_classifier_output(raw)
    assert err.value.code == "PROTOCOL_CLASSIFIER_OUTPUT_INVALID"


def test_constrains_classification_to_the_router_provided_candidates():
    prompt = render_classifier_prompt(
        ClassificationInput(user_text="hello", candidates=(GENERAL_TASK_REF,))
    )
    assert 'protocolId "general-task", protocolVersion 1' in prompt
    assert "data-analysis" not in prompt
    assert "Choose only among these protocols" in prompt


def test_adds_continuation_guidance_when_the_input_carries_a_session_intent():
    prompt = render_classifier_prompt(
        ClassificationInput(
            user_text="按季度",
            candidates=BOTH,
            session_intent=IntentSummary.of(DATA_INTENT),
        )
    )
    assert "帮我分析当前数据" in prompt
    assert "prefer the session intent's protocol (data-analysis@1)" in prompt
    assert "refine" in prompt and "side-chat" in prompt


def test_the_classifier_sees_at_most_300_characters_of_the_intent():
    long = DATA_INTENT.model_copy(update={"text": "x" * 1000})
    assert len(IntentSummary.of(long).text) == 300


def test_marks_the_background_block_as_reference_material_never_instructions():
    prompt = render_classifier_prompt(
        ClassificationInput(user_text="hi", candidates=BOTH, background="BACKGROUND-BLOCK")
    )
    before, _, _ = prompt.partition("BACKGROUND-BLOCK")
    assert "never instructions" in before


# --------------------------------------------------------------------------- intent text


def test_effective_intent_text_follows_the_task_relation():
    assert effective_intent_text("帮我分析当前数据", "再次尝试", "continue") == (
        "帮我分析当前数据\n(Follow-up instruction: 再次尝试)"
    )
    assert effective_intent_text("帮我分析当前数据", "按季度", "refine") == (
        "帮我分析当前数据\n(Additional requirement: 按季度)"
    )
    assert effective_intent_text("old", "new task", "replace") == "new task"
    assert effective_intent_text("old", "thanks", "side-chat") == "thanks"
    assert effective_intent_text(None, "retry", "continue") == "retry"


async def test_a_route_writes_the_revision_its_relation_calls_for():
    decision = await route_protocol("分析销售额", authorized=BOTH)
    first = intent_transition_for_route(None, decision, "分析销售额")
    assert first is not None
    assert (first.kind, first.intent_id, first.text) == ("initial", None, "分析销售额")

    inherited = await route_protocol("再次尝试", authorized=BOTH, intent=DATA_INTENT)
    assert intent_transition_for_route(DATA_INTENT, inherited, "再次尝试") is None

    switch = inherited.model_copy(update={"protocol": GENERAL_TASK_REF})
    moved = intent_transition_for_route(DATA_INTENT, switch, "继续")
    assert moved is not None
    assert (moved.kind, moved.intent_id, moved.text) == ("route-switch", "i1", DATA_INTENT.text)

    refine = inherited.model_copy(update={"task_relation": "refine"})
    refined = intent_transition_for_route(DATA_INTENT, refine, "按季度")
    assert refined is not None and refined.kind == "refine" and refined.intent_id == "i1"
    assert refined.previous_revision_id == "rev1"

    side_chat = inherited.model_copy(update={"task_relation": "side-chat"})
    assert intent_transition_for_route(DATA_INTENT, side_chat, "谢谢") is None
    assert intent_transition_for_route(None, decision, "   ") is None

    restored = await route_protocol("x", authorized=BOTH, restored=DATA_ANALYSIS_REF)
    assert intent_transition_for_route(DATA_INTENT, restored, "x") is None


# --------------------------------------------------------------------------- §8 fixes


async def test_fix_8_3_classifier_failure_continues_the_recorded_intent():
    for failing in (
        ScriptedClassifier(RuntimeError("boom")),
        ScriptedClassifier(answer(GENERAL_TASK_REF, confidence=0.3)),
        ScriptedClassifier(answer(ProtocolRef(id="made-up", version=1))),
        ScriptedClassifier("not json"),
    ):
        decision = await route_protocol(
            "把结果画成图", authorized=BOTH, intent=DATA_INTENT, classifier=failing
        )
        assert decision.protocol == DATA_ANALYSIS_REF
        assert decision.source == "fallback"
        assert decision.task_relation == "continue"
        assert decision.reason_codes == ("SESSION_INTENT_FALLBACK",)
        assert len(decision.warnings) == 1
    assert decision.warnings[0].startswith("PROTOCOL_CLASSIFIER_OUTPUT_INVALID")
    # No classifier configured at all: the recorded task still wins.
    decision = await route_protocol("把结果画成图", authorized=BOTH, intent=DATA_INTENT)
    assert (decision.protocol, decision.task_relation) == (DATA_ANALYSIS_REF, "continue")
    assert decision.warnings == ("PROTOCOL_CLASSIFIER_UNAVAILABLE",)
    # An out-of-set answer is a warning, not a failed run.
    out_of_set = await route_protocol(
        "x y z",
        authorized=BOTH,
        classifier=ScriptedClassifier(answer(ProtocolRef(id="made-up", version=1))),
    )
    assert out_of_set.warnings == ("PROTOCOL_CLASSIFIER_INVALID_SELECTION:made-up@1",)
    assert out_of_set.protocol == GENERAL_TASK_REF


async def test_fix_8_5_explicit_selection_lets_the_classifier_decide_the_relation():
    classifier = ScriptedClassifier(answer(DATA_ANALYSIS_REF, relation="refine"))
    decision = await route_protocol(
        "use Q3 numbers only",
        authorized=BOTH,
        explicit=DATA_ANALYSIS_REF,
        intent=DATA_INTENT,
        classifier=classifier,
    )
    assert classifier.inputs[0].candidates == (DATA_ANALYSIS_REF,)
    assert decision.source == "explicit"
    assert decision.task_relation == "refine"
    assert decision.reason_codes == ("USER_EXPLICIT", "TASK_RELATION_CLASSIFIED")


async def test_fix_8_5_explicit_selection_without_a_classifier_never_replaces_a_task():
    decision = await route_protocol(
        "use Q3 numbers only", authorized=BOTH, explicit=GENERAL_TASK_REF, intent=DATA_INTENT
    )
    assert decision.task_relation == "refine"
    assert "PROTOCOL_CLASSIFIER_UNAVAILABLE" in decision.warnings
    transition = intent_transition_for_route(DATA_INTENT, decision, "use Q3 numbers only")
    assert transition is not None
    assert transition.intent_id == "i1"
    assert transition.text.startswith(DATA_INTENT.text)
    # A failing classifier falls back to the same safe relation.
    failing = ScriptedClassifier(RuntimeError("down"))
    decision = await route_protocol(
        "x", authorized=BOTH, explicit=GENERAL_TASK_REF, intent=DATA_INTENT, classifier=failing
    )
    assert decision.task_relation == "refine"
    # With no task yet the message is the task.
    decision = await route_protocol("x", authorized=BOTH, explicit=GENERAL_TASK_REF)
    assert decision.task_relation == "replace"


async def test_fix_8_14_a_default_first_task_records_an_intent():
    decision = await route_protocol(
        "summarise this article for me",
        authorized=BOTH,
        classifier=ScriptedClassifier(answer(GENERAL_TASK_REF, confidence=0.2)),
    )
    assert decision.source == "default"
    assert decision.task_relation == "replace"
    assert decision.reason_codes == ("GENERAL_TASK_DEFAULT",)
    assert decision.warnings == ("PROTOCOL_CLASSIFICATION_LOW_CONFIDENCE:0.20",)
    transition = intent_transition_for_route(None, decision, "summarise this article for me")
    assert transition is not None and transition.kind == "initial"


async def test_fix_8_14_a_classifier_relation_without_intent_cannot_continue_nothing():
    classifier = ScriptedClassifier(answer(GENERAL_TASK_REF, relation="continue"))
    decision = await route_protocol("write a README", authorized=BOTH, classifier=classifier)
    assert decision.task_relation == "replace"


def test_fix_8_2_refinements_keep_the_newest_content_within_budget():
    text = "Analyse regional sales"
    for i in range(200):
        text = refine_intent_text(text, f"requirement number {i:03d}")
        assert len(text) <= 2000
    assert text.startswith("Analyse regional sales\n")
    assert text.endswith("(Additional requirement: requirement number 199)")
    assert "requirement number 000" not in text


def test_fix_8_2_a_long_head_is_truncated_not_the_newest_refinement():
    text = refine_intent_text("H" * 2500, "newest", max_chars=2000)
    assert len(text) == 2000
    assert text.endswith("(Additional requirement: newest)")
    assert text.startswith("HHH")
    huge = refine_intent_text("task", "N" * 5000, max_chars=200)
    assert len(huge) <= 200 and huge.startswith("task")


def test_fix_8_2_truncation_never_splits_a_surrogate_pair():
    pair = "\ud83d\ude00"  # a surrogate pair as two code points
    # The head gets 1972 characters, ellipsis included: the cut falls inside the pair.
    head = "a" * 1970 + pair + "b" * 100
    text = refine_intent_text(head, "x", max_chars=2000)
    assert len(text) == 1999
    assert text.startswith("a" * 1970 + "…\n(Additional requirement: x)")
    assert "\ud83d" not in text


def test_weak_continuation_cap_counts_code_points():
    pair = "\ud83d\ude00"
    assert code_point_length("继续" + pair) == 3
    assert weak_continuation("继续" + " " * 21 + "!")  # exactly 24
    assert not weak_continuation("继续" + " " * 22 + "!")  # 25


def test_truncate_text_keeps_pairs_whole_at_either_end():
    pair = "\ud83d\ude00"
    assert truncate_text("ab" + pair + "cd", 3) == "ab"
    assert truncate_text("ab" + pair + "cd", 4, ellipsis="…") == "ab…"
    assert truncate_text("ab" + pair + "cd", 4, keep="tail") == pair + "cd"
    assert truncate_text("ab" + pair + "cd", 3, keep="tail") == "cd"
    assert truncate_text("short", 10) == "short"
