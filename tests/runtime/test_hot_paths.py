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
