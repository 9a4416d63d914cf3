"""ScriptedAdapter: every response kind, recording, exhaustion, timing."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent.ids import CallId
from trio_agent.llm import (
    BlockAssembler,
    BlockEnd,
    BlockStart,
    Finish,
    GenerateRequest,
    LlmFailure,
    ReasoningBlock,
    ScriptExhaustedError,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)
from trio_agent.runtime import Context
from trio_agent.testing import (
    ScriptedAdapter,
    ScriptedProvider,
    ScriptedResponse,
    error,
    hang,
    max_tokens,
    raises,
    raw,
    reasoning,
    text,
    tool_call,
)

from .helpers import collect, make_request


async def play(response: ScriptedResponse | str) -> list[StreamChunk]:
    adapter = ScriptedAdapter(responses=[response])
    async with adapter.stream(make_request()) as chunks:
        return [c async for c in chunks]


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    a = BlockAssembler()
    a.feed_all(chunks)
    return a


async def test_text_streams_one_delta_per_piece() -> None:
    chunks = await play(text("Hello ", "world"))
    assert chunks == [
        BlockStart(0, "text"),
        TextDelta(0, "Hello "),
        TextDelta(0, "world"),
        BlockEnd(0, TextBlock("Hello world")),
        Finish("stop"),
    ]


async def test_plain_string_is_a_text_reply() -> None:
    assert assemble(await play("just this")).message().text == "just this"


async def test_tool_call_arguments_split_into_deltas() -> None:
    chunks = await play(tool_call("c1", "read_file", '{"path": "a"}', chunks=3))
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert len(deltas) == 3
    assert all(d.id == "c1" and d.name == "read_file" for d in deltas)
    assert "".join(d.arguments_delta for d in deltas) == '{"path": "a"}'
    assert chunks[-1] == Finish("tool-calls")
    assert assemble(chunks).message().tool_calls == (
        ToolCallBlock(CallId("c1"), "read_file", '{"path": "a"}'),
    )


async def test_tool_call_arguments_from_a_mapping() -> None:
    chunks = await play(tool_call("c", "f", {"x": 1}))
    assert assemble(chunks).message().tool_calls[0].arguments == '{"x": 1}'


async def test_text_and_several_tool_calls_mixed() -> None:
    response = (
        reasoning("let me ", "check")
        + text("Looking.")
        + tool_call("a", "f", "{}")
        + tool_call("b", "g", "{}", chunks=2)
    )
    message = assemble(await play(response)).message()
    assert message.content == (
        ReasoningBlock("let me check"),
        TextBlock("Looking."),
        ToolCallBlock(CallId("a"), "f", "{}"),
        ToolCallBlock(CallId("b"), "g", "{}"),
    )


async def test_max_tokens() -> None:
    chunks = await play(max_tokens("partial"))
    assert chunks[-1] == Finish("max-tokens")
    assert assemble(chunks).message().text == "partial"


async def test_max_tokens_with_a_tool_call_drops_the_call() -> None:
    response = text("partial") + tool_call("c", "f", "{") + max_tokens()
    a = assemble(await play(response))
    assert a.finish == Finish("max-tokens")
    assert a.message().tool_calls == ()


async def test_error_with_code_and_retry_after() -> None:
    chunks = await play(error("RATE_LIMIT", retry_after=1.0, status=429))
    assert chunks == [
        Finish("error", LlmFailure("RATE_LIMIT", "scripted RATE_LIMIT failure", 429, 1.0))
    ]


async def test_error_after_partial_text() -> None:
    chunks = await play(error("SERVER", "down", partial=["a", "b"]))
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta(0, "a"), TextDelta(0, "b")]
    assert chunks[-1] == Finish("error", LlmFailure("SERVER", "down"))


async def test_error_aborted_is_an_aborted_finish() -> None:
    assert (await play(error("ABORTED")))[-1].reason == "aborted"  # type: ignore[union-attr]


async def test_usage_comes_just_before_finish() -> None:
    chunks = await play(text("x").with_usage(Usage(3, 1)))
    assert chunks[-2:] == [UsageChunk(Usage(3, 1)), Finish("stop")]


async def test_hang_streams_partial_then_waits_until_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    adapter = ScriptedAdapter(responses=[hang(partial="thinking...")])
    seen: list[StreamChunk] = []
    with trio.move_on_after(100) as scope:
        async with adapter.stream(make_request()) as chunks:
            async for chunk in chunks:
                seen.append(chunk)
    assert scope.cancelled_caught
    assert assemble(seen).interrupted_message().text == "thinking..."  # type: ignore[union-attr]
    assert not any(isinstance(c, Finish) for c in seen)


async def test_raises_after_partial() -> None:
    adapter = ScriptedAdapter(responses=[raises(ConnectionError("gone"), partial="so")])
    seen: list[StreamChunk] = []

    async def consume() -> None:
        async with adapter.stream(make_request()) as chunks:
            async for chunk in chunks:
                seen.append(chunk)

    with pytest.raises(ConnectionError, match="gone"):
        await consume()
    assert TextDelta(0, "so") in seen


async def test_raw_streams_exactly_what_it_is_given() -> None:
    chunks: list[StreamChunk] = [TextDelta(3, "x"), Finish("stop")]
    assert await play(raw(*chunks)) == chunks


async def test_callable_response_sees_the_request() -> None:
    def echo(request: GenerateRequest) -> ScriptedResponse:
        return text("you said: ", request.messages[-1].text)

    adapter = ScriptedAdapter(responses=[echo, lambda request: "plain"])
    async with adapter.stream(make_request(text="ping")) as chunks:
        assert assemble([c async for c in chunks]).message().text == "you said: ping"
    async with adapter.stream(make_request()) as chunks:
        assert assemble([c async for c in chunks]).message().text == "plain"


async def test_bad_callable_result_is_a_type_error() -> None:
    adapter = ScriptedAdapter(responses=[lambda request: 42])  # type: ignore[list-item,return-value]
    with pytest.raises(TypeError, match="scripted response must be"):
        async with adapter.stream(make_request()):
            pass  # pragma: no cover


async def test_requests_are_recorded_and_push_extends() -> None:
    adapter = ScriptedAdapter(responses=["one"])
    adapter.push("two")
    assert adapter.remaining == 2
    for word in ("a", "b"):
        async with adapter.stream(make_request(text=word)) as chunks:
            async for _ in chunks:
                pass
    assert [r.messages[-1].text for r in adapter.requests] == ["a", "b"]
    assert adapter.remaining == 0


async def test_exhaustion_names_the_adapter_and_its_length() -> None:
    adapter = ScriptedAdapter(name="fixture-model", responses=["only"])
    async with adapter.stream(make_request()) as chunks:
        async for _ in chunks:
            pass
    with pytest.raises(ScriptExhaustedError) as info:
        async with adapter.stream(make_request()):
            pass  # pragma: no cover
    message = str(info.value)
    assert "'fixture-model'" in message and "had 1 response" in message
    assert info.value.failure.code == "SCRIPT_EXHAUSTED"
    assert len(adapter.requests) == 2


async def test_exhaustion_through_the_service_is_an_error_finish(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(name="empty"))
    chunks = await collect(lctx, make_request("empty"))
    last = chunks[-1]
    assert isinstance(last, Finish) and last.failure is not None
    assert last.failure.code == "SCRIPT_EXHAUSTED"
    assert "'empty'" in last.failure.message and "had 0 responses" in last.failure.message


async def test_every_chunk_is_a_checkpoint() -> None:
    adapter = ScriptedAdapter(responses=[text("a", "b")])
    async with adapter.stream(make_request()) as chunks:
        for _ in range(5):
            with trio.testing.assert_checkpoints():
                await chunks.receive()
        with trio.testing.assert_checkpoints(), pytest.raises(trio.EndOfChannel):
            await chunks.receive()


async def test_per_chunk_delay(autojump_clock: trio.testing.MockClock) -> None:
    adapter = ScriptedAdapter(responses=[text("a", "b", "c")], delay=0.5)
    start = trio.current_time()
    async with adapter.stream(make_request()) as chunks:
        count = len([c async for c in chunks])
    assert trio.current_time() - start == pytest.approx(0.5 * count)


async def test_plus_keeps_the_right_sides_ending() -> None:
    combined = text("a") + error("SERVER")
    assert combined.finish is not None and combined.finish.reason == "error"
    assert (error("SERVER") + text("b")).finish.reason == "error"  # type: ignore[union-attr]
    assert (text("a") + hang()).hang


async def test_scripted_provider_plugin(lctx: Context) -> None:
    fiber = await lctx.plugin(ScriptedProvider, {"name": "cfg", "responses": ["from config"]})
    assert (await lctx.llm.generate(make_request("cfg"))).message.text == "from config"
    fiber.instance.adapter.push("pushed")
    assert (await lctx.llm.generate(make_request("cfg"))).message.text == "pushed"
    await fiber.dispose()
    assert lctx.llm.names() == ()
