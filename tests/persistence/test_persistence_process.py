"""Resume across real processes: process 1 talks and exits, process 2 resumes by id."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from persistence_helpers import JSONL, open_store

from trio_agent import _serde
from trio_agent.llm import Message, TextBlock, ToolResultBlock
from trio_agent.session import TurnStart, project_messages

SCRIPT = Path(__file__).with_name("conversation_main.py")


async def run_conversation(
    directory: Path, mode: str, prompt: str, responses: list[Any], out: Path
) -> list[dict[str, Any]]:
    with trio.fail_after(60):
        result = await trio.run_process(
            [
                sys.executable,
                str(SCRIPT),
                str(directory),
                "conv",
                mode,
                prompt,
                json.dumps(responses),
                str(out),
            ],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    requests: list[dict[str, Any]] = json.loads(await trio.Path(out).read_text())
    return requests


def messages(request: dict[str, Any]) -> list[Message]:
    return [_serde.structure(m, Message) for m in request["messages"]]


async def test_a_second_process_resumes_the_conversation(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    first = await run_conversation(
        directory,
        "create",
        "What is 2+3?",
        [{"tool_call": ["c1", "add", '{"a": 2, "b": 3}']}, {"text": "It is 5."}],
        tmp_path / "first.json",
    )
    assert len(first) == 2
    async with open_store(JSONL, tmp_path) as ctx:
        after_first = (await ctx.session_persistence.load("conv")).events
    history = project_messages(after_first)
    assert [(m.role, m.text) for m in history] == [
        ("user", "What is 2+3?"),
        ("assistant", ""),
        ("user", ""),
        ("assistant", "It is 5."),
    ]
    result = history[2].content[0]  # the tool result
    assert isinstance(result, ToolResultBlock) and isinstance(result.content[0], TextBlock)
    assert result.content[0].text == "5"

    second = await run_conversation(
        directory, "resume", "Double it.", [{"text": "10."}], tmp_path / "second.json"
    )
    assert len(second) == 1 and second[0]["session_id"] == "conv"
    sent = messages(second[0])
    # The full prior history, exactly as process 1 logged it, then the new prompt.
    assert tuple(sent[: len(history)]) == history
    assert [(m.role, m.text) for m in sent[len(history) :]] == [("user", "Double it.")]
    calls = [
        block.tool_call_id for m in sent for block in m.content if hasattr(block, "tool_call_id")
    ]
    assert calls == ["c1"]

    async with open_store(JSONL, tmp_path) as ctx:
        events = (await ctx.session_persistence.load("conv")).events
        infos = await ctx.session_persistence.list()
    assert [(e.seq, e.type, e.time, e.data) for e in events[: len(after_first)]] == [
        (e.seq, e.type, e.time, e.data) for e in after_first
    ]
    assert events[len(after_first)].type == "session/end-seed"
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.payload_as(TurnStart).turn for e in events if e.type == "turn/start"] == [1, 2]
    assert [m.text for m in project_messages(events)][-1] == "10."
    assert [(i.session_id, i.turns, i.title) for i in infos] == [("conv", 2, "What is 2+3?")]
