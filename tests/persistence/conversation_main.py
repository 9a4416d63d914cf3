"""One process of the cross-process resume test (run by test_persistence_process.py).

    python conversation_main.py DIR SESSION_ID create|resume PROMPT RESPONSES_JSON REQUESTS_OUT

Opens a runtime on the scripted model (``RESPONSES_JSON``: a list of ``{"text": "..."}`` and
``{"tool_call": [id, name, arguments]}``) with an ``add`` tool and ``JsonlPersistence`` on
``DIR``, creates (or resumes) agent ``a`` on ``SESSION_ID``, sends ``PROMPT``, waits for the
turn, writes every model request it received to ``REQUESTS_OUT`` as JSON, and exits.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from trio_agent import _serde
from trio_agent.persistence import JsonlPersistence
from trio_agent.testing import ScriptedResponse, open_test_harness, text, tool_call
from trio_agent.tools import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script(items: list[dict[str, Any]]) -> list[ScriptedResponse]:
    out = []
    for item in items:
        if "text" in item:
            out.append(text(item["text"]))
        else:
            call_id, name, arguments = item["tool_call"]
            out.append(tool_call(call_id, name, arguments))
    return out


async def main(
    directory: str, session_id: str, mode: str, prompt: str, responses: str
) -> list[dict[str, Any]]:
    async with open_test_harness(
        script(json.loads(responses)),
        tools=[add],
        persistence=JsonlPersistence,
        persistence_config=JsonlPersistence.Config(path=directory),
    ) as h:
        if mode == "create":
            handle = await h.ctx.agents.create(agent_id="a", session_id=session_id)
        else:
            handle = await h.ctx.agents.resume(agent_id="a", resume_session_id=session_id)
        async with handle:
            handle.agent.send(prompt)
            await handle.agent.wait_idle()
        return [
            {
                "session_id": request.session_id,
                "messages": [_serde.unstructure(m) for m in request.messages],
            }
            for request in h.model.requests
        ]


if __name__ == "__main__":
    directory, session_id, mode, prompt, responses = sys.argv[1:6]
    received = trio.run(main, directory, session_id, mode, prompt, responses)
    with open(sys.argv[6], "w", encoding="utf-8") as file:
        json.dump(received, file)
