"""docs/embedding.md's "Agents" snippet runs as written, on the scripted model."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import trio

import trio_agent
from trio_agent.agent import TurnStarted
from trio_agent.testing import open_test_harness, text

DOC = Path(__file__).resolve().parent.parent / "docs" / "embedding.md"


def agents_snippet() -> str:
    section = DOC.read_text().split("## Agents", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "docs/embedding.md: no python block under '## Agents'"
    return match.group(1)


async def test_agents_snippet_runs_its_turns() -> None:
    source = "async def snippet(ctx):\n" + textwrap.indent(
        agents_snippet() + "return agent\n", "    "
    )
    scope: dict[str, Any] = {"trio": trio, "trio_agent": trio_agent, "TurnStarted": TurnStarted}
    exec(compile(source, str(DOC), "exec"), scope)
    with trio.fail_after(30):
        async with open_test_harness([text("fixed"), text("faster")]) as h:
            agent = await scope["snippet"](h.ctx)
            session = agent.session
            ends = [e.data["reason"] for e in session.events_of_type("turn/end")]
            assert ends == ["completed", "completed"]
            kinds = [e.type for e in session.events]
            assert kinds.index("context/message") < kinds.index("turn/start")
            steered = session.events_of_type("steering/message")
            assert [e.data["message"]["content"][0]["text"] for e in steered] == ["use pytest -x"]
