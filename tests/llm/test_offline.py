"""OfflineAdapter: the rule table, tool-result summaries, streaming and usage."""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from trio_agent.ids import CallId
from trio_agent.llm import (
    BlockAssembler,
    Finish,
    GenerateRequest,
    LlmCallConfig,
    Message,
    OfflineAdapter,
    OfflineProvider,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolSchema,
    UsageChunk,
)
from trio_agent.runtime import Context

ALL_TOOLS = tuple(
    ToolSchema(n, n) for n in ("list_dir", "read_file", "write_file", "shell", "glob")
)


def request(*messages: Message, tools: tuple[ToolSchema, ...] = ALL_TOOLS) -> GenerateRequest:
    return GenerateRequest(LlmCallConfig("offline", "offline"), messages, "system", tools)


async def run(req: GenerateRequest, delay: float = 0.0) -> tuple[list[StreamChunk], BlockAssembler]:
    adapter = OfflineAdapter(delay=delay)
    async with adapter.stream(req) as chunks:
        seen = [c async for c in chunks]
    a = BlockAssembler()
    a.feed_all(seen)
    return seen, a


RULES = [
    ("list files", "list_dir", {"path": "."}),
    ("List Files", "list_dir", {"path": "."}),
    ("list files in src", "list_dir", {"path": "src"}),
    ("please list the files in 'my dir'.", "list_dir", {"path": "my dir"}),
    ("read README.md", "read_file", {"path": "README.md"}),
    ("READ the file notes.txt.", "read_file", {"path": "notes.txt"}),
    ('read "a b.txt"', "read_file", {"path": "a b.txt"}),
    ("run ls -la", "shell", {"command": "ls -la"}),
    ("Run `echo hi`", "shell", {"command": "echo hi"}),
    ("run echo done.", "shell", {"command": "echo done."}),
    ("write out.txt: hello world", "write_file", {"path": "out.txt", "content": "hello world"}),
    ("write to a.md: line 1\nline 2", "write_file", {"path": "a.md", "content": "line 1\nline 2"}),
    ("find *.py", "glob", {"pattern": "*.py"}),
    ("find files matching src/**/*.md", "glob", {"pattern": "src/**/*.md"}),
]


@pytest.mark.parametrize(("said", "tool", "arguments"), RULES, ids=[r[0] for r in RULES])
async def test_rule_calls_the_tool(said: str, tool: str, arguments: dict[str, str]) -> None:
    chunks, a = await run(request(Message.user(said)))
    message = a.message()
    assert a.finish == Finish("tool-calls")
    (call,) = message.tool_calls
    assert call.name == tool
    assert json.loads(call.arguments) == arguments
    assert call.id == "offline-1"
    assert message.text  # it says what it is about to do
    assert sum(isinstance(c, TextDelta) for c in chunks) > 1  # token by token


@pytest.mark.parametrize(
    ("said", "tool", "arguments"), RULES[:1] + RULES[4:5] + RULES[7:8], ids=["list", "read", "run"]
)
async def test_rule_without_the_tool_explains(
    said: str, tool: str, arguments: dict[str, str]
) -> None:
    _, a = await run(request(Message.user(said), tools=()))
    assert a.finish == Finish("stop")
    assert a.message().tool_calls == ()
    assert f"`{tool}` tool is not available" in a.message().text


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("what is the weather?", 'did not understand "what is the weather?"'),
        ("hello there", "Hello! I am the offline model."),
        ("", "I am the offline model."),
        ("readme", "did not understand"),
    ],
)
async def test_plain_answers(said: str, expected: str) -> None:
    _, a = await run(request(Message.user(said)))
    assert expected in a.message().text
    assert a.message().tool_calls == ()
    assert 'run a command ("run CMD")' in a.message().text


async def test_plain_answer_lists_only_offered_tools() -> None:
    _, a = await run(request(Message.user("?"), tools=(ToolSchema("read_file", ""),)))
    text = a.message().text
    assert "read a file" in text and "run a command" not in text
    _, a = await run(request(Message.user("?"), tools=()))
    assert "No tools are available" in a.message().text


def conversation(
    tool: str, arguments: dict[str, str], output: str, *, is_error: bool = False
) -> tuple[Message, ...]:
    call = ToolCallBlock(CallId("offline-1"), tool, json.dumps(arguments))
    return (
        Message.user("do it"),
        Message.assistant(TextBlock("Doing it."), call),
        Message.tool_result(CallId("offline-1"), (TextBlock(output),), is_error=is_error),
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "output", "expected"),
    [
        (
            "list_dir",
            {"path": "src"},
            "a.py\nb.py",
            "The directory `src` contains:\n```\na.py\nb.py\n```",
        ),
        ("read_file", {"path": "a.txt"}, "hello", "Here is `a.txt`:\n```\nhello\n```"),
        ("shell", {"command": "echo hi"}, "hi\n", "`echo hi` printed:\n```\nhi\n```"),
        (
            "write_file",
            {"path": "o.txt", "content": "x"},
            "wrote 1 byte",
            "I wrote `o.txt`. The tool said: wrote 1 byte",
        ),
        ("glob", {"pattern": "*.md"}, "README.md", "Files matching `*.md`:\n```\nREADME.md\n```"),
        ("mystery", {}, "42", "The `mystery` tool returned:\n```\n42\n```"),
        ("read_file", {"path": "x"}, "", "Here is `x`:\n```\n(no output)\n```"),
    ],
)
async def test_tool_result_is_summarised(
    tool: str, arguments: dict[str, str], output: str, expected: str
) -> None:
    _, a = await run(request(*conversation(tool, arguments, output)))
    assert a.finish == Finish("stop")
    assert a.message().text == expected


async def test_failed_tool_is_reported() -> None:
    _, a = await run(
        request(*conversation("read_file", {"path": "x"}, "Error: no such file", is_error=True))
    )
    assert a.message().text.startswith("The `read_file` tool failed:")
    assert "no such file" in a.message().text


async def test_long_output_is_truncated() -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    _, a = await run(request(*conversation("shell", {"command": "seq"}, output)))
    text = a.message().text
    assert "line 39" in text and "line 40" not in text and "(60 more lines)" in text
    _, a = await run(request(*conversation("read_file", {"path": "big"}, "x" * 5000)))
    assert len(a.message().text) < 2200 and "(truncated)" in a.message().text


async def test_call_ids_count_the_calls_in_the_conversation() -> None:
    history = conversation("read_file", {"path": "a"}, "A")
    _, a = await run(request(*history, Message.assistant(TextBlock("ok")), Message.user("read b")))
    assert a.message().tool_calls[0].id == "offline-2"


async def test_usage_is_plausible_and_deterministic() -> None:
    req = request(Message.user("read README.md"))
    first, _ = await run(req)
    second, _ = await run(req)
    (usage,) = [c.usage for c in first if isinstance(c, UsageChunk)]
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    assert [c for c in first if not isinstance(c, UsageChunk)] == [
        c for c in second if not isinstance(c, UsageChunk)
    ]
    assert first[-1] == Finish("tool-calls") and isinstance(first[-2], UsageChunk)


async def test_streams_with_a_delay(autojump_clock: trio.testing.MockClock) -> None:
    start = trio.current_time()
    chunks, _ = await run(request(Message.user("hello")), delay=0.01)
    assert trio.current_time() - start == pytest.approx(0.01 * len(chunks))


async def test_offline_provider_plugin(lctx: Context) -> None:
    fiber = await lctx.plugin(OfflineProvider, {"delay": 0})
    result = await lctx.llm.generate(request(Message.user("list files")))
    assert result.message.tool_calls[0].name == "list_dir"
    await fiber.dispose()
    assert lctx.llm.names() == ()
