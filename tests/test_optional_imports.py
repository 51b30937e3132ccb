"""ADK's optional A2A agent: a missing SDK is looked for once, not at every run."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest
from google.adk.agents import LlmAgent

from plangate.adk.optional_imports import REMOTE_A2A_MODULE
from plangate.adk.runner import build_app
from plangate.models.scripted import ScriptedLlm


def test_building_an_app_remembers_whether_adk_s_a2a_agent_can_be_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, REMOTE_A2A_MODULE, raising=False)
    build_app(LlmAgent(name="agent", model=ScriptedLlm()))
    if importlib.util.find_spec("a2a") is not None:
        assert sys.modules[REMOTE_A2A_MODULE] is not None  # the real module, imported once
        return
    assert sys.modules[REMOTE_A2A_MODULE] is None
    # What ADK does at every run: the import now fails at once, as ADK expects.
    with pytest.raises(ImportError):
        importlib.import_module(REMOTE_A2A_MODULE)
