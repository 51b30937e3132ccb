"""``plangate acp`` with a model that calls an MCP ``echo`` tool, for the ACP tests.

Run as ``python -m acp_echo_agent acp --database-url URL --workspace DIR``. A prompt
``echo <text>`` makes the model call the first tool whose name ends in ``_echo`` and
then report its result; everything else (the protocol router's classifier included) is
the offline demo model's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncGenerator
from pathlib import Path

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from plangate.acp import PlangateAgent, run_stdio
from plangate.models.demo import DemoModel
from plangate.plan.prompts import HOST_NOTE_PREFIX

CLASSIFIER_MARKER = "Choose how the agent should run this user message"


class EchoModel(DemoModel):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = _echo_step(llm_request)
        if parts is None:
            async for response in super().generate_content_async(llm_request, stream):
                yield response
            return
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def _echo_step(request: LlmRequest) -> list[types.Part] | None:
    text, results = "", []
    for content in request.contents:
        for part in content.parts or []:
            if part.text and CLASSIFIER_MARKER in part.text:
                return None
            if part.text and content.role == "user" and not part.text.startswith(HOST_NOTE_PREFIX):
                # plangate's own notes (a mode switch told to the model) are not the user's.
                text, results = part.text, []
            elif part.function_response is not None:
                results.append(part.function_response.response)
    if not text.startswith("echo "):
        return None
    if results:
        return [types.Part(text=f"[echo] {json.dumps(results[-1], sort_keys=True)}")]
    name = next((n for n in request.tools_dict if n.endswith("_echo")), None)
    if name is None:
        return [types.Part(text="[echo] there is no echo tool")]
    return [types.Part(function_call=types.FunctionCall(name=name, args={"text": text[5:]}))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["acp"])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    args = parser.parse_args()
    agent = PlangateAgent(EchoModel(), database_url=args.database_url, workspace=args.workspace)
    asyncio.run(run_stdio(agent))


if __name__ == "__main__":
    main()
