"""Shared pieces of the protocol tests: a scripted model safe for tools holding live
connections, scripted classifiers, and journal readers."""

from __future__ import annotations

import json

from plangate.protocol.classifier import ClassificationInput
from plangate.store.shared import shared_store

POSTGRES_ENV = "PLANGATE_TEST_POSTGRES_URL"


def classification(
    protocol: str = "data-analysis",
    relation: str = "replace",
    confidence: float = 0.9,
    reasons: tuple[str, ...] = ("TEST_CLASSIFIED",),
) -> str:
    return json.dumps(
        {
            "protocolId": protocol,
            "protocolVersion": 1,
            "confidence": confidence,
            "reasonCodes": list(reasons),
            "taskRelation": relation,
        }
    )


class ScriptedClassifier:
    """Answers from a list (the last answer repeats) and remembers what it was shown."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers) or [classification()]
        self.inputs: list[ClassificationInput] = []

    async def __call__(self, classification_input: ClassificationInput) -> str:
        self.inputs.append(classification_input)
        if len(self.answers) > 1:
            return self.answers.pop(0)
        return self.answers[0]


async def journal_kinds(database_url: str, scope_key: str | None = None) -> list[str]:
    store = await shared_store(database_url)
    return [entry.event.kind for entry in await store.journal(scope_key)]
