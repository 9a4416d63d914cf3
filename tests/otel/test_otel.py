"""OTel spans with the SDK's in-memory exporter: the exact tree, parenting under concurrency,
content capture, and a core that never imports OpenTelemetry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from trio_agent.agent import AgentRegistry
from trio_agent.compaction import Compaction
from trio_agent.llm import GenerateRequest, RetryPolicy, ToolResultBlock, Usage
from trio_agent.otel import OtelTracing
from trio_agent.testing import (
    ScriptedResponse,
    error,
    hang,
    open_test_harness,
    text,
    tool_call,
)
from trio_agent.tools import ToolCallContext, tool
from trio_agent.usage import UsageService


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


@tool
async def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


NO_WAIT = RetryPolicy(initial_delay=0, max_delay=0, jitter=0)


def _by_start(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(spans, key=lambda s: s.start_time or 0)


def _parent(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


async def test_the_span_tree_of_a_turn_with_two_tool_calls_a_retry_and_a_cancel(
    spans: InMemorySpanExporter,
) -> None:
    script = [
        tool_call("c1", "echo", {"text": "hi"}) + tool_call("c2", "explode", {}),
        error("SERVER", "overloaded"),
        hang("partial"),
    ]
    async with open_test_harness(script, tools=[echo, explode], retry=NO_WAIT) as h:
        h.model.requests.clear()
        await h.ctx.plugin(OtelTracing)
        agent = h.agent("a")
        session = agent.session
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
    finished = _by_start(spans.get_finished_spans())
    assert [s.name for s in finished] == [
        "invoke_agent a",
        "chat scripted-model",
        "execute_tool echo",
        "execute_tool explode",
        "chat scripted-model",
        "chat scripted-model",
    ]
    turn, chat1, echo_span, explode_span, failed, cut = finished
    assert _parent(turn) is None
    assert {_parent(s) for s in finished[1:]} == {turn.context.span_id}
    assert len({s.context.trace_id for s in finished}) == 1
    assert turn.kind is SpanKind.INTERNAL and chat1.kind is SpanKind.CLIENT
    assert echo_span.kind is SpanKind.INTERNAL
    assert dict(turn.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": "a",
        "gen_ai.agent.name": "a",
        "gen_ai.conversation.id": session.id,
        "trio_agent.turn": 1,
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.usage.input_tokens": 0,
        "gen_ai.usage.output_tokens": 0,
        "trio_agent.turn.end_reason": "aborted",
    }
    assert turn.status.status_code is StatusCode.UNSET  # a cancel is not a failure of the turn
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted-model",
        "gen_ai.conversation.id": session.id,
    }
    assert dict(chat1.attributes or {}) == {
        **chat,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert chat1.status.status_code is StatusCode.UNSET
    assert dict(echo_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Echo the text.",
    }
    assert echo_span.status.status_code is StatusCode.UNSET
    assert dict(explode_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "explode",
        "gen_ai.tool.call.id": "c2",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Always fails.",
        "error.type": "TOOL_ERROR",
    }
    assert explode_span.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {}) == {**chat, "error.type": "SERVER"}
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "overloaded"
    assert dict(cut.attributes or {}) == {**chat, "error.type": "ABORTED"}
    assert cut.status.status_code is StatusCode.ERROR
    # The tool spans nest inside the first chat's end and the retry's start.
    assert (chat1.end_time or 0) <= (echo_span.start_time or 0)
    assert (explode_span.end_time or 0) <= (failed.start_time or 0)


async def test_usage_and_an_error_turn(spans: InMemorySpanExporter) -> None:
    script = [
        text("hi").with_usage(Usage(100, 7, cache_read_tokens=30, reasoning_tokens=2)),
        error("AUTH", "bad key"),
    ]
    async with open_test_harness(script) as h:
        await h.ctx.plugin(OtelTracing)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await agent.wait_idle()
    turn1, chat1, turn2, chat2 = _by_start(spans.get_finished_spans())
    attributes = dict(chat1.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 130  # all input, the cached part included
    assert attributes["gen_ai.usage.output_tokens"] == 7
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    assert attributes["gen_ai.usage.reasoning.output_tokens"] == 2
    assert dict(turn1.attributes or {})["gen_ai.usage.input_tokens"] == 130
    assert dict(turn2.attributes or {})["trio_agent.turn.end_reason"] == "error"
    assert dict(turn2.attributes or {})["error.type"] == "AUTH"
    assert turn2.status.status_code is StatusCode.ERROR
    assert dict(chat2.attributes or {})["error.type"] == "AUTH"


@tool(concurrency_safe=True)
async def nap(seconds: float) -> str:
    """Sleep a little."""
    await trio.sleep(seconds)
    return "rested"


def _concurrent_model(request: GenerateRequest) -> ScriptedResponse:
    """Two parallel naps per agent, then an answer; call ids name the session."""
    last = request.messages[-1]
    if isinstance(last.content[0], ToolResultBlock):
        return text("done")
    prefix = str(request.session_id)
    return tool_call(f"{prefix}-1", "nap", {"seconds": 0.3}) + tool_call(
        f"{prefix}-2", "nap", {"seconds": 0.1}
    )


async def test_concurrent_agents_never_cross_parent(
    spans: InMemorySpanExporter, autojump_clock: trio.testing.MockClock
) -> None:
    async with open_test_harness([_concurrent_model] * 20, tools=[nap]) as h:
        await h.ctx.plugin(OtelTracing)
        agents = [h.agent(f"agent-{i}") for i in range(5)]
        for agent in agents:
            agent.send("go")
        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(agent.wait_idle)
        sessions = {agent.id: agent.session.id for agent in agents}
    finished = spans.get_finished_spans()
    assert len(finished) == 5 * 5  # per agent: a turn, two chats, two tool calls
    turns = {s.context.span_id: s for s in finished if s.name.startswith("invoke_agent")}
    assert len(turns) == 5 and len({s.context.trace_id for s in turns.values()}) == 5
    for span in finished:
        if span in turns.values():
            continue
        owner = turns[_parent(span)]
        session = sessions[dict(owner.attributes or {})["gen_ai.agent.id"]]  # type: ignore[index]
        attributes = dict(span.attributes or {})
        if span.name.startswith("chat"):
            assert attributes["gen_ai.conversation.id"] == session
        else:
            assert str(attributes["gen_ai.tool.call.id"]).startswith(session)
        assert span.context.trace_id == owner.context.trace_id


async def test_a_child_agent_started_in_a_tool_nests_under_its_span(
    spans: InMemorySpanExporter,
) -> None:
    @tool
    async def delegate(task: str, *, call: ToolCallContext) -> str:
        """Hand the task to a helper agent."""
        assert call.agent is not None
        agents = call.agent.ctx.require(AgentRegistry)
        handle = await agents.create(agent_id="helper", session_id="helper-session")
        async with handle:
            handle.agent.send(task)
            await handle.agent.wait_idle()
            return handle.agent.session.derive_messages()[-1].text

    script = [tool_call("d1", "delegate", {"task": "sum it"}), text("helper says hi"), text("ok")]
    async with open_test_harness(script, tools=[delegate]) as h:
        await h.ctx.plugin(OtelTracing)
        agent = h.agent("parent")
        agent.send("go")
        await agent.wait_idle()
    by_name = {s.name: s for s in spans.get_finished_spans()}
    parent_turn = by_name["invoke_agent parent"]
    tool_span = by_name["execute_tool delegate"]
    child_turn = by_name["invoke_agent helper"]
    assert _parent(tool_span) == parent_turn.context.span_id
    assert _parent(child_turn) == tool_span.context.span_id
    child_chats = [
        s
        for s in spans.get_finished_spans()
        if dict(s.attributes or {}).get("gen_ai.conversation.id") == "helper-session"
        and s.name.startswith("chat")
    ]
    assert [_parent(s) for s in child_chats] == [child_turn.context.span_id]


async def test_content_is_captured_only_when_asked(spans: InMemorySpanExporter) -> None:
    script = [tool_call("c1", "echo", {"text": "secret"}), text("secret echoed")] * 2
    async with open_test_harness(script, tools=[echo], persona="Be brief.") as h:
        fiber = await h.ctx.plugin(OtelTracing)
        agent = h.agent("a")
        agent.send("say secret")
        await agent.wait_idle()
        assert not any(
            "secret" in repr(dict(s.attributes or {})) for s in spans.get_finished_spans()
        )
        await fiber.dispose()
        spans.clear()
        await h.ctx.plugin(OtelTracing, OtelTracing.Config(capture_content=True))
        agent.send("say secret")
        await agent.wait_idle()
    chat1, tool_span, chat2 = (s for s in _by_start(spans.get_finished_spans())[1:])
    attributes = dict(chat1.attributes or {})
    messages = json.loads(str(attributes["gen_ai.input.messages"]))
    assert messages[-1] == {"role": "user", "parts": [{"type": "text", "content": "say secret"}]}
    assert json.loads(str(attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert json.loads(str(attributes["gen_ai.tool.definitions"]))[0]["name"] == "echo"
    output = json.loads(str(attributes["gen_ai.output.messages"]))
    assert (
        output[0]["parts"][0]["type"] == "tool_call" and output[0]["finish_reason"] == "tool_calls"
    )
    tool_attributes = dict(tool_span.attributes or {})
    assert json.loads(str(tool_attributes["gen_ai.tool.call.arguments"])) == {"text": "secret"}
    assert tool_attributes["gen_ai.tool.call.result"] == "secret"
    last = json.loads(str(dict(chat2.attributes or {})["gen_ai.input.messages"]))[-1]
    assert last == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "secret"}],
    }


async def test_unloading_ends_the_open_spans(spans: InMemorySpanExporter) -> None:
    async with open_test_harness([hang()]) as h:
        fiber = await h.ctx.plugin(OtelTracing)
        agent = h.agent("a")
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        await fiber.dispose()
        assert [s.name for s in spans.get_finished_spans()] == ["invoke_agent a"]
        agent.cancel()
        await agent.wait_idle()


async def test_a_compaction_summary_call_is_a_chat_span_of_the_turn(
    spans: InMemorySpanExporter,
) -> None:
    script = [text("one"), text("two"), text("summary"), text("three")]
    async with open_test_harness(script) as h:
        await h.ctx.plugin(UsageService)
        await h.ctx.plugin(Compaction, Compaction.Config(keep_turns=1))
        await h.ctx.plugin(OtelTracing)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await agent.wait_idle()
        assert await h.ctx.require(Compaction).compact(agent) is not None
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 3
    summary = _by_start(chats)[-1]
    assert _parent(summary) is None  # compacted between turns: no turn to belong to
    assert dict(summary.attributes or {})["gen_ai.conversation.id"] == agent.session.id


_CHECK_IMPORTS = """
import importlib, pathlib, sys
import trio_agent
root = pathlib.Path(trio_agent.__file__).parent
skipped = ("trio_agent.otel", "trio_agent.mcp")
for path in sorted(root.rglob("*.py")):
    parts = path.relative_to(root.parent).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    if not name.startswith(skipped) and not name.endswith("__main__"):
        importlib.import_module(name)
import trio
from trio_agent.testing import open_test_harness, text
from trio_agent.usage import UsageService
from trio_agent.compaction import Compaction
async def main():
    async with open_test_harness([text("hi")]) as h:
        await h.ctx.plugin(UsageService)
        await h.ctx.plugin(Compaction)
        agent = h.agent("a")
        agent.send("hello")
        await agent.wait_idle()
trio.run(main)
print(sorted({m.split(".")[0] for m in sys.modules if m.startswith(("opentelemetry", "mcp"))}))
"""


def test_the_core_imports_nothing_of_otel() -> None:
    # In a fresh process that never imports mcp (the MCP SDK imports opentelemetry-api).
    result = subprocess.run(
        [sys.executable, "-c", _CHECK_IMPORTS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_content_capture_is_off_by_default() -> None:
    assert OtelTracing.Config().capture_content is False
