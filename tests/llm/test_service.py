"""ctx.llm: registry, the llm/stream waterfall, failure normalisation and cancellation."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.llm import (
    AdapterConflictError,
    BlockAssembler,
    Finish,
    GenerateRequest,
    LlmAdapter,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    LlmService,
    LlmStreamCall,
    Message,
    RetryPolicy,
    StreamChunk,
    TextBlock,
    TextDelta,
    Usage,
    UsageChunk,
)
from trio_agent.runtime import Context, Next
from trio_agent.testing import (
    ScriptedAdapter,
    assert_no_leaked_tasks,
    error,
    hang,
    raises,
    raw,
    text,
    tool_call,
)

from .helpers import collect, make_request


class Tracking:
    """Wraps an adapter and records when its stream opens and closes."""

    def __init__(self, inner: LlmAdapter, name: str | None = None) -> None:
        self.inner = inner
        self.name = name or inner.name
        self.events: list[str] = []

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        self.events.append("open")
        try:
            async with self.inner.stream(request) as chunks:
                yield chunks
        finally:
            self.events.append("closed")


class SyncRaising:
    name = "sync"

    def stream(self, request: GenerateRequest) -> Any:
        raise RuntimeError("cannot even start")


class EnterRaising:
    name = "enter"

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        await trio.lowlevel.checkpoint()
        raise LlmError(LlmFailure("AUTH", "bad key", status=401))
        yield  # type: ignore[unreachable]  # pragma: no cover - makes this a generator


class SafeChannelRaising:
    """An as_safe_channel adapter whose generator fails mid-stream (the error surfaces at exit)."""

    name = "safe"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        return self._gen(request)

    @trio.as_safe_channel
    async def _gen(self, request: GenerateRequest) -> AsyncGenerator[StreamChunk, None]:
        yield TextDelta(0, "partial")
        raise self.exc


def only_one_final_finish(chunks: list[StreamChunk]) -> Finish:
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert len(finishes) == 1 and chunks[-1] is finishes[0]
    assert sum(isinstance(c, UsageChunk) for c in chunks) <= 1
    return finishes[0]


# --- registry -------------------------------------------------------------------------------


async def test_register_get_names(lctx: Context) -> None:
    a, b = ScriptedAdapter(name="a"), ScriptedAdapter(name="b")
    lctx.llm.register(a)
    lctx.llm.register(b)
    assert lctx.llm.names() == ("a", "b")
    assert lctx.llm.get("a") is a
    assert lctx.llm.get("zzz") is None


async def test_duplicate_name_is_refused_by_name(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(name="dup"))
    with pytest.raises(AdapterConflictError, match="'dup' is already registered"):
        lctx.llm.register(ScriptedAdapter(name="dup"))


async def test_register_rejects_non_adapters(lctx: Context) -> None:
    with pytest.raises(TypeError, match="expects an LlmAdapter"):
        lctx.llm.register(object())


async def test_disposer_unregisters(lctx: Context) -> None:
    off = lctx.llm.register(ScriptedAdapter())
    off()
    assert lctx.llm.names() == ()
    lctx.llm.register(ScriptedAdapter())  # the name is free again


async def test_registration_belongs_to_the_registering_plugin(lctx: Context) -> None:
    adapter = ScriptedAdapter(name="mine")

    async def provider(ctx: Context, config: None) -> None:
        ctx.llm.register(adapter)

    provider.inject = ("llm",)  # type: ignore[attr-defined]
    fiber = await lctx.plugin(provider)
    assert lctx.llm.names() == ("mine",)
    await fiber.dispose()
    assert lctx.llm.names() == ()


async def test_registration_through_a_scope_is_undone_with_the_scope(lctx: Context) -> None:
    scope = lctx.scope_context("agent-1")
    scope.llm.register(ScriptedAdapter(name="scoped"))
    assert lctx.llm.names() == ("scoped",)
    await scope.fiber.dispose()
    assert lctx.llm.names() == ()


async def test_retry_policy_per_adapter(lctx: Context) -> None:
    policy = RetryPolicy(max_attempts=2)
    lctx.llm.register(ScriptedAdapter(name="a"), retry_policy=policy)
    assert lctx.llm.retry_policy("a") is policy
    assert lctx.llm.retry_policy("missing") == RetryPolicy()


# --- streaming and failure normalisation ------------------------------------------------------


async def test_stream_passes_chunks_through(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[text("a", "b").with_usage(Usage(1, 2))]))
    chunks = await collect(lctx, make_request())
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta(0, "a"), TextDelta(0, "b")]
    assert chunks[-2:] == [UsageChunk(Usage(1, 2)), Finish("stop")]


async def test_no_adapter_lists_registered_names(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(name="one"))
    lctx.llm.register(ScriptedAdapter(name="two"))
    chunks = await collect(lctx, make_request("nope"))
    finish = only_one_final_finish(chunks)
    assert chunks == [finish]
    assert finish.reason == "error" and finish.failure is not None
    assert finish.failure.code == "NO_ADAPTER"
    assert "'nope'" in finish.failure.message and "'one', 'two'" in finish.failure.message


@pytest.mark.parametrize(
    ("adapter", "code", "partial"),
    [
        (SyncRaising(), "UNKNOWN", False),
        (EnterRaising(), "AUTH", False),
        (SafeChannelRaising(ValueError("mid-stream boom")), "UNKNOWN", True),
        (SafeChannelRaising(LlmError(LlmFailure("SERVER", "overloaded"))), "SERVER", True),
        (
            ScriptedAdapter(name="s", responses=[raises(OSError("socket gone"), partial="so far")]),
            "UNKNOWN",
            True,
        ),
    ],
    ids=[
        "sync-raise",
        "enter-raise",
        "safe-channel-raise",
        "safe-channel-llm-error",
        "receive-raise",
    ],
)
async def test_adapter_failures_become_one_error_finish(
    lctx: Context, adapter: Any, code: str, partial: bool
) -> None:
    lctx.llm.register(adapter)
    chunks = await collect(lctx, make_request(adapter.name))
    finish = only_one_final_finish(chunks)
    assert finish.reason == "error" and finish.failure is not None
    assert finish.failure.code == code
    assert any(isinstance(c, TextDelta) for c in chunks) == partial


async def test_unknown_exception_text_is_reported(lctx: Context) -> None:
    lctx.llm.register(SafeChannelRaising(ValueError("mid-stream boom")))
    finish = only_one_final_finish(await collect(lctx, make_request("safe")))
    assert finish.failure is not None
    assert (
        "ValueError: mid-stream boom" in finish.failure.message
        and "'safe'" in finish.failure.message
    )


async def test_llm_error_aborted_becomes_aborted_finish(lctx: Context) -> None:
    lctx.llm.register(SafeChannelRaising(LlmError(LlmFailure("ABORTED", "provider aborted"))))
    finish = only_one_final_finish(await collect(lctx, make_request("safe")))
    assert (
        finish.reason == "aborted"
        and finish.failure is not None
        and finish.failure.code == "ABORTED"
    )


async def test_adapter_reported_abort_passes_through(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[error("ABORTED")]))
    finish = only_one_final_finish(await collect(lctx, make_request()))
    assert finish.reason == "aborted"


async def test_missing_finish_is_stream_closed(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[raw(TextDelta(0, "x"))]))
    chunks = await collect(lctx, make_request())
    finish = only_one_final_finish(chunks)
    assert finish.failure is not None and finish.failure.code == "STREAM_CLOSED"
    assert chunks[0] == TextDelta(0, "x")


async def test_nothing_after_finish_and_at_most_one_usage(lctx: Context) -> None:
    lctx.llm.register(
        ScriptedAdapter(
            responses=[
                raw(
                    UsageChunk(Usage(1)),
                    TextDelta(0, "a"),
                    UsageChunk(Usage(2)),
                    Finish("stop"),
                    TextDelta(0, "late"),
                    Finish("error"),
                )
            ]
        )
    )
    chunks = await collect(lctx, make_request())
    assert chunks == [TextDelta(0, "a"), UsageChunk(Usage(2)), Finish("stop")]


async def test_usage_before_a_failure_is_kept(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[raw(UsageChunk(Usage(5)), TextDelta(0, "a"))]))
    chunks = await collect(lctx, make_request())
    assert chunks[-2] == UsageChunk(Usage(5))
    assert only_one_final_finish(chunks).failure.code == "STREAM_CLOSED"  # type: ignore[union-attr]


async def test_error_finish_without_failure_gets_one(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[raw(Finish("error"))]))
    finish = only_one_final_finish(await collect(lctx, make_request()))
    assert finish.failure is not None and finish.failure.code == "UNKNOWN"


async def test_non_chunk_values_are_an_adapter_failure(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[raw("not a chunk")]))  # type: ignore[arg-type]
    finish = only_one_final_finish(await collect(lctx, make_request()))
    assert finish.failure is not None and "StreamChunk" in finish.failure.message


async def test_generate_assembles(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[text("Hi ", "there") + tool_call("c", "f", "{}")]))
    result = await lctx.llm.generate(make_request())
    assert result.message.text == "Hi there"
    assert result.finish == Finish("tool-calls")
    assert result.usage is None


# --- the llm/stream waterfall -----------------------------------------------------------------


async def test_listener_reroutes_by_replacing_the_request(lctx: Context) -> None:
    a, b = (
        ScriptedAdapter(name="a", responses=["from a"]),
        ScriptedAdapter(name="b", responses=["from b"]),
    )
    lctx.llm.register(a)
    lctx.llm.register(b)

    async def reroute(call: LlmStreamCall, next: Next) -> LlmAdapter:
        config = call.request.config
        call.request = GenerateRequest(
            LlmCallConfig("b", "bigger-model"), call.request.messages, call.request.system
        )
        assert config.provider == "a"
        return await next()

    lctx.on("llm/stream", reroute)
    result = await lctx.llm.generate(make_request("a"))
    assert result.message.text == "from b"
    assert a.requests == [] and b.requests[0].config == LlmCallConfig("b", "bigger-model")


async def test_listener_short_circuits_with_its_own_adapter(lctx: Context) -> None:
    registered = ScriptedAdapter(responses=["registered"])
    lctx.llm.register(registered)
    mine = ScriptedAdapter(name="cache", responses=["cached answer"])

    async def cache(call: LlmStreamCall, next: Next) -> LlmAdapter:
        return mine

    lctx.on("llm/stream", cache)
    assert (await lctx.llm.generate(make_request())).message.text == "cached answer"
    assert registered.requests == []


async def test_listener_wraps_the_adapter(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=["x"]))
    wrappers: list[Tracking] = []

    async def wrap(call: LlmStreamCall, next: Next) -> LlmAdapter:
        wrappers.append(Tracking(await next()))
        return wrappers[-1]

    lctx.on("llm/stream", wrap)
    await lctx.llm.generate(make_request())
    assert wrappers[0].events == ["open", "closed"]


async def test_listener_sees_no_adapter_as_an_adapter(lctx: Context) -> None:
    seen: list[str] = []

    async def look(call: LlmStreamCall, next: Next) -> LlmAdapter:
        adapter = await next()
        seen.append(adapter.name)
        return adapter

    lctx.on("llm/stream", look)
    finish = (await lctx.llm.generate(make_request("ghost"))).finish
    assert seen == ["ghost"] and finish.failure is not None and finish.failure.code == "NO_ADAPTER"


async def test_listener_errors_propagate_unchanged(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=["x"]))

    async def buggy(call: LlmStreamCall, next: Next) -> LlmAdapter:
        raise ValueError("plugin bug")

    lctx.on("llm/stream", buggy)
    with pytest.raises(ValueError, match="plugin bug"):
        async with lctx.llm.stream(make_request()):
            pytest.fail("the body must not run")


async def test_listener_returning_a_non_adapter_is_a_type_error(lctx: Context) -> None:
    async def wrong(call: LlmStreamCall, next: Next) -> Any:
        return "openai"

    lctx.on("llm/stream", wrong)
    with pytest.raises(TypeError, match="must return an LlmAdapter"):
        async with lctx.llm.stream(make_request()):
            pass


async def test_scoped_listener_applies_to_its_scope_only(lctx: Context) -> None:
    lctx.llm.register(ScriptedAdapter(responses=["global", "global again"]))
    lctx.llm.register(ScriptedAdapter(name="special", responses=["scoped"]))
    agent = lctx.scope_context("agent-1")

    async def route(call: LlmStreamCall, next: Next) -> LlmAdapter:
        call.request = GenerateRequest(LlmCallConfig("special", "m"), call.request.messages)
        return await next()

    agent.on("llm/stream", route)
    assert (await agent.llm.generate(make_request())).message.text == "scoped"
    assert (await lctx.llm.generate(make_request())).message.text == "global"
    other = lctx.scope_context("agent-2")
    assert (await other.llm.generate(make_request())).message.text == "global again"


# --- consumer behaviour, cancellation ---------------------------------------------------------


async def test_consumer_exception_propagates_and_closes_the_adapter(lctx: Context) -> None:
    tracked = Tracking(ScriptedAdapter(responses=[hang("partial")]))
    lctx.llm.register(tracked)

    async def consume() -> None:
        async with lctx.llm.stream(make_request()) as chunks:
            await chunks.receive()
            raise KeyError("consumer")

    with assert_no_leaked_tasks(), pytest.raises(KeyError, match="consumer"):
        await consume()
    assert tracked.events == ["open", "closed"]


async def test_leaving_early_closes_the_adapter(lctx: Context) -> None:
    tracked = Tracking(ScriptedAdapter(responses=[text("a", "b", "c")]))
    lctx.llm.register(tracked)
    with assert_no_leaked_tasks():
        async with lctx.llm.stream(make_request()) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    break
    assert tracked.events == ["open", "closed"]


class SlowClose:
    """A pump-guarded adapter whose close waits for ``release`` and records how it ended."""

    name = "slow-close"

    def __init__(self) -> None:
        self.release = trio.Event()
        self.close: str | None = None

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        send, receive = trio.open_memory_channel[StreamChunk](4)
        send.send_nowait(TextDelta(0, "a"))
        send.send_nowait(Finish("stop"))
        try:
            yield receive
        finally:
            try:
                await self.release.wait()
            except trio.Cancelled:
                self.close = "cancelled"
                raise
            self.close = "clean"


async def test_leaving_right_after_the_finish_lets_the_adapter_close(lctx: Context) -> None:
    # The loop stops reading at the Finish (nothing follows it): that is not leaving early, so
    # the adapter's close runs to its end as it would for a reader that waited for the end.
    adapter = SlowClose()
    lctx.llm.register(adapter)
    seen: list[StreamChunk] = []

    async def release_when_blocked() -> None:
        await trio.testing.wait_all_tasks_blocked()
        adapter.release.set()

    with assert_no_leaked_tasks():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(release_when_blocked)
            async with lctx.llm.stream(make_request(provider="slow-close")) as chunks:
                async for chunk in chunks:
                    seen.append(chunk)
                    if isinstance(chunk, Finish):
                        break
    assert seen == [TextDelta(0, "a"), Finish("stop")]
    assert adapter.close == "clean"


async def test_cancelling_the_caller_scope_raises_cancelled(lctx: Context) -> None:
    tracked = Tracking(ScriptedAdapter(responses=[hang("partial")]))
    lctx.llm.register(tracked)
    seen: list[StreamChunk] = []
    assembler = BlockAssembler()
    escaped: list[BaseException] = []
    with trio.CancelScope() as scope:
        try:
            async with lctx.llm.stream(make_request()) as chunks:
                async for chunk in chunks:
                    seen.append(chunk)
                    assembler.feed(chunk)
                    if isinstance(chunk, TextDelta):
                        scope.cancel()
        except BaseException as exc:
            escaped.append(exc)
            raise
        pytest.fail("Cancelled must not be swallowed by the stream")  # pragma: no cover
    assert len(escaped) == 1 and type(escaped[0]) is trio.Cancelled
    assert scope.cancelled_caught
    assert not any(isinstance(c, Finish) for c in seen)
    assert tracked.events == ["open", "closed"]
    partial = assembler.interrupted_message()
    assert partial is not None and partial.content == (TextBlock("partial"),)


async def test_cancel_from_another_task_while_the_model_hangs(lctx: Context) -> None:
    tracked = Tracking(ScriptedAdapter(responses=[hang()]))
    lctx.llm.register(tracked)
    scope = trio.CancelScope()
    outcome: list[str] = []

    async def consume() -> None:
        with scope:
            try:
                async with lctx.llm.stream(make_request()) as chunks:
                    async for _ in chunks:
                        outcome.append("chunk")
            except trio.Cancelled:
                outcome.append("cancelled")
                raise
            outcome.append("fell through")  # pragma: no cover

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert tracked.events == ["open"]
        scope.cancel()
    assert outcome == ["cancelled"]
    assert scope.cancelled_caught
    assert tracked.events == ["open", "closed"]


async def test_deadline_on_a_hanging_model(
    lctx: Context, autojump_clock: trio.testing.MockClock
) -> None:
    lctx.llm.register(ScriptedAdapter(responses=[hang("thinking...")]))
    start = trio.current_time()
    with trio.move_on_after(30) as scope:
        await collect(lctx, make_request())
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(30)


async def test_entering_a_stream_nobody_routes_is_a_cancellation_point(lctx: Context) -> None:
    opened: list[GenerateRequest] = []

    async def spy(call: LlmStreamCall, next: Next) -> LlmAdapter:
        opened.append(call.request)
        return await next()

    with trio.CancelScope() as scope:
        scope.cancel()
        async with lctx.llm.stream(make_request()):
            pytest.fail("must not open")  # pragma: no cover
    assert scope.cancelled_caught
    # With a listener the same request reaches the adapter through the waterfall.
    lctx.on("llm/stream", spy)
    async with lctx.llm.stream(make_request(text="routed")) as chunks:
        assert [c async for c in chunks]
    assert [r.messages[0].content for r in opened] == [Message.user("routed").content]


async def test_cancel_while_routing_propagates(lctx: Context) -> None:
    gate = trio.Event()

    async def slow(call: LlmStreamCall, next: Next) -> LlmAdapter:
        await gate.wait()
        return await next()

    lctx.on("llm/stream", slow)
    with trio.CancelScope() as scope:
        scope.cancel()
        async with lctx.llm.stream(make_request()):
            pytest.fail("must not open")  # pragma: no cover
    assert scope.cancelled_caught


async def test_service_is_exported_under_its_name(ctx: Context) -> None:
    await ctx.plugin(LlmService)
    assert isinstance(ctx.llm, LlmService)


class FailsOnClose:
    name = "closing"

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        async with ScriptedAdapter(responses=[text("done")]).stream(request) as chunks:
            yield chunks
        raise RuntimeError("close failed")


async def test_failure_while_closing_a_finished_stream_keeps_the_finish(
    lctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    lctx.llm.register(FailsOnClose())
    chunks = await collect(lctx, make_request("closing"))
    assert chunks[-1] == Finish("stop")
    assert "failed while closing a finished stream" in caplog.text


async def test_slow_consumer_gets_every_chunk_in_order(lctx: Context) -> None:
    pieces = [f"{i} " for i in range(300)]  # more than the pump's read-ahead
    lctx.llm.register(ScriptedAdapter(responses=[text(*pieces)]))
    got: list[str] = []
    async with lctx.llm.stream(make_request()) as chunks:
        async for chunk in chunks:
            await trio.lowlevel.checkpoint()
            if isinstance(chunk, TextDelta):
                got.append(chunk.text)
    assert got == pieces
