"""#17: the in-task guard (adapters with ``streams_inline``) delivers exactly what the pump does."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio

from trio_agent.llm import (
    Finish,
    GenerateRequest,
    LlmCallConfig,
    LlmError,
    LlmFailure,
    LlmService,
    Message,
    ScriptedAdapter,
    TextDelta,
    Usage,
    UsageChunk,
)
from trio_agent.llm._scripted import error, raises, raw, text
from trio_agent.runtime import open_runtime


class _Pumped:
    """The same scripted adapter without ``streams_inline``: goes through the pump task."""

    def __init__(self, inner: ScriptedAdapter) -> None:
        self.inner = inner
        self.name = "pumped"

    def stream(self, request: GenerateRequest) -> contextlib.AbstractAsyncContextManager[Any]:
        return self.inner.stream(request)


SCRIPTS: dict[str, Any] = {
    "text": text("a", "b"),
    "error-finish": error("RATE_LIMIT", partial="x"),
    "raises-llm-error": raises(LlmError(LlmFailure("SERVER", "boom")), partial="x"),
    "raises-other": raises(ValueError("bad"), partial=["x", "y"]),
    "no-finish": raw(TextDelta(0, "x")),
    "usage-twice": raw(
        UsageChunk(Usage(1, 1)), TextDelta(0, "x"), UsageChunk(Usage(2, 2)), Finish("stop")
    ),
    "after-finish": raw(Finish("stop"), TextDelta(0, "late")),
    "bad-chunk": raw(TextDelta(0, "x"), "not a chunk"),  # type: ignore[arg-type]
    "error-without-failure": raw(Finish("error")),
}


def _shape(chunk: object) -> object:
    if isinstance(chunk, Finish) and chunk.failure is not None:
        return ("finish", chunk.reason, chunk.failure.code, chunk.failure.message)
    return chunk


async def _collect(ctx: Any, provider: str) -> list[object]:
    request = GenerateRequest(LlmCallConfig(provider, "m"), (Message.user("go"),))
    async with ctx.llm.stream(request) as chunks:
        return [_shape(chunk) async for chunk in chunks]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
async def test_inline_matches_pump(name: str) -> None:
    with trio.fail_after(30):
        async with open_runtime() as ctx:
            await ctx.plugin(LlmService)
            inline = ScriptedAdapter(name="inline", responses=[SCRIPTS[name]])
            ctx.llm.register(inline)
            ctx.llm.register(_Pumped(ScriptedAdapter(name="p", responses=[SCRIPTS[name]])))
            got = await _collect(ctx, "inline")
            want = await _collect(ctx, "pumped")
            # The adapter name appears in some messages; compare with it normalised.
            assert [
                str(c).replace("'p'", "'inline'").replace("'pumped'", "'inline'") for c in want
            ] == [str(c) for c in got]
            assert isinstance(got[-1], tuple | Finish)


async def test_inline_unknown_provider_is_one_error_finish() -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        got = await _collect(ctx, "nobody")
        assert len(got) == 1 and got[0][2] == "NO_ADAPTER"  # type: ignore[index]


async def test_inline_cancellation_propagates_and_closes_the_adapter_stream() -> None:
    from trio_agent.llm._scripted import hang

    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        ctx.llm.register(ScriptedAdapter(name="inline", responses=[hang(partial="x")]))
        request = GenerateRequest(LlmCallConfig("inline", "m"), (Message.user("go"),))
        seen: list[object] = []
        with trio.move_on_after(0.05) as scope:
            async with ctx.llm.stream(request) as chunks:
                async for chunk in chunks:
                    seen.append(chunk)
        assert scope.cancelled_caught
        assert TextDelta(0, "x") in seen
        assert not any(isinstance(c, Finish) for c in seen)


async def test_inline_body_error_propagates_as_itself() -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        ctx.llm.register(ScriptedAdapter(name="inline", responses=[text("a", "b")]))
        request = GenerateRequest(LlmCallConfig("inline", "m"), (Message.user("go"),))

        async def consume() -> None:
            async with ctx.llm.stream(request) as chunks:
                async for _ in chunks:
                    raise KeyError("mine")

        with pytest.raises(KeyError):
            await consume()


async def test_a_stream_context_is_entered_once() -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        ctx.llm.register(ScriptedAdapter(name="inline", responses=[text("a"), text("b")]))
        stream = ctx.llm.stream(GenerateRequest(LlmCallConfig("inline", "m"), ()))
        async with stream as chunks:
            assert [c async for c in chunks][-1] == Finish("stop")
        with pytest.raises(RuntimeError, match="entered once"):
            async with stream:
                pass
