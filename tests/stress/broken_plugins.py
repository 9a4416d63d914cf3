"""Deliberately broken plugins: the mutation check proves the kit finds each one.

Each fixture behaves when nothing is cancelled and breaks one rule of structured concurrency
on cancellation, the way real plugins do. ``test_mutations.py`` gives each a scenario that
``explore_cancellation`` must fail, with a replayable schedule.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import trio

from trio_agent.agent import TurnEnded
from trio_agent.llm import GenerateRequest, StreamChunk
from trio_agent.runtime import Context
from trio_agent.testing import text
from trio_agent.tools import tool


@tool
async def swallowing(seconds: float) -> str:
    """Sleep; when cancelled, report success anyway (swallows trio.Cancelled)."""
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        return "finished anyway"
    return "finished"


@tool
async def never_returns(seconds: float) -> str:
    """Sleep; when cancelled, wait (shielded) for a result that never comes."""
    try:
        await trio.sleep(seconds)
    except trio.Cancelled:
        with trio.CancelScope(shield=True):
            await trio.Event().wait()
        raise
    return "done"


class GlobalNurseryPlugin:
    """After an aborted turn, starts its clean-up in trio's system nursery (a global nursery)
    instead of its own fiber's, so the task outlives the runtime."""

    def __init__(self, ctx: Context, config: Any = None) -> None:
        ctx.on("agent/turn-end", self._on_turn_end)

    def _on_turn_end(self, event: TurnEnded) -> None:
        if event.reason == "aborted":
            trio.lowlevel.spawn_system_task(self._clean_up, name="global clean-up")

    async def _clean_up(self) -> None:
        while True:
            await trio.sleep(1)


class MisnestingPlugin:
    """Wraps every tool call in a cancel scope of its own (a ``tools/execute`` listener); when
    the call is cancelled it leaves the scope to a clean-up task to exit (another task)."""

    def __init__(self, ctx: Context, config: Any = None) -> None:
        self._ctx = ctx
        ctx.on("tools/execute", self._around)

    async def _around(self, execution: Any, next: Any) -> Any:
        scope = trio.CancelScope()
        scope.__enter__()
        try:
            result = await next()
        except trio.Cancelled:
            self._ctx.start_soon(self._exit_elsewhere, scope)
            raise
        scope.__exit__(None, None, None)
        return result

    async def _exit_elsewhere(self, scope: trio.CancelScope) -> None:
        scope.__exit__(None, None, None)


class LeakyAdapter:
    """A model adapter that closes its channel when the stream completes, but not when the
    stream is cancelled (no ``finally``)."""

    name = "leaky"

    @contextlib.asynccontextmanager
    async def stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.MemoryReceiveChannel[StreamChunk]]:
        send, receive = trio.open_memory_channel[StreamChunk](100)
        for chunk in text("a ", "leaking ", "answer").chunks():
            send.send_nowait(chunk)
        send.close()
        await trio.lowlevel.checkpoint()
        yield receive
        receive.close()  # skipped when the consumer is cancelled


class LeakyAdapterPlugin:
    """Registers :class:`LeakyAdapter`."""

    inject = ("llm",)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        ctx.llm.register(LeakyAdapter())
