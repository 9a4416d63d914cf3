"""#17: dispatching an event nobody listens to allocates nothing."""

from __future__ import annotations

import tracemalloc

import trio

from trio_agent.runtime import open_runtime


async def test_emit_without_listener_allocates_nothing() -> None:
    with trio.fail_after(30):
        async with open_runtime() as ctx:
            payload = object()
            assert not ctx.hears("bench/nobody")
            ctx.emit("bench/nobody", payload)  # warm up
            tracemalloc.start()
            try:
                before = tracemalloc.take_snapshot()
                for _ in range(1_000):
                    ctx.emit("bench/nobody", payload)
                after = tracemalloc.take_snapshot()
            finally:
                tracemalloc.stop()
            grown = [
                stat
                for stat in after.compare_to(before, "filename")
                if stat.size_diff > 0 and "trio_agent" in str(stat.traceback)
            ]
            assert grown == []


async def test_hears_follows_registration() -> None:
    with trio.fail_after(30):
        async with open_runtime() as ctx:
            heard: list[object] = []
            assert not ctx.hears("x/y")
            off = ctx.on("x/y", heard.append)
            assert ctx.hears("x/y")
            ctx.emit("x/y", 1)
            off()
            assert not ctx.hears("x/y")
            ctx.emit("x/y", 2)
            assert heard == [1]


async def test_waterfall_and_serial_without_listeners_stay_cancellation_points() -> None:
    ran: list[str] = []

    async def default() -> str:
        ran.append("default")
        return "d"

    with trio.fail_after(30):
        async with open_runtime() as ctx:
            assert await ctx.waterfall("x/nobody", None, default) == "d"
            assert await ctx.serial("x/nobody", None) is None
            for dispatch in (
                lambda: ctx.waterfall("x/nobody", None, default),
                lambda: ctx.serial("x/nobody", None),
            ):
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await dispatch()
                    raise AssertionError("the dispatch did not raise Cancelled")  # pragma: no cover
                assert scope.cancelled_caught
    assert ran == ["default"]  # a cancelled waterfall never runs its default
