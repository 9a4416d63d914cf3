"""Event dispatch cost: ns per emit / waterfall / serial with 0, 1 and 10 listeners.

Floors: the same number of listener functions called by a plain Python loop (sync for emit,
``await`` for waterfall and serial), in the same process and run.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from trio_agent.runtime import Context, Next, open_runtime


def _emit_listener(payload: object) -> None:
    return None


async def _serial_listener(payload: object) -> None:
    return None


async def _waterfall_listener(payload: object, next: Next) -> Any:
    return await next()


async def _default() -> int:
    return 0


async def _measure(ctx: Context, listeners: int, iterations: int) -> list[Metric]:
    offs = []
    for _ in range(listeners):
        offs.append(ctx.on("bench/emit", _emit_listener))
        offs.append(ctx.on("bench/serial", _serial_listener))
        offs.append(ctx.on("bench/waterfall", _waterfall_listener))
    fns = [_emit_listener] * listeners
    afns = [_serial_listener] * listeners

    def per_op(seconds: float) -> float:
        return seconds / iterations * 1e9

    start = time.perf_counter()
    for _ in range(iterations):
        ctx.emit("bench/emit", None)
    emit = per_op(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(iterations):
        for fn in fns:
            fn(None)
    emit_floor = per_op(time.perf_counter() - start)

    start = time.perf_counter()
    for _ in range(iterations):
        await ctx.serial("bench/serial", None)
    serial = per_op(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(iterations):
        for afn in afns:
            await afn(None)
    serial_floor = per_op(time.perf_counter() - start)

    start = time.perf_counter()
    for _ in range(iterations):
        await ctx.waterfall("bench/waterfall", None, _default)
    waterfall = per_op(time.perf_counter() - start)

    for off in offs:
        off()
    tag = f"{listeners} listener{'s' if listeners != 1 else ''}"
    return [
        Metric(f"emit, {tag}", emit, "ns/op", emit_floor, "floor: plain call loop"),
        Metric(f"serial, {tag}", serial, "ns/op", serial_floor, "floor: plain await loop"),
        Metric(f"waterfall, {tag}", waterfall, "ns/op", serial_floor, "floor: as serial"),
    ]


def run(smoke: bool) -> list[Metric]:
    iterations = 2_000 if smoke else 100_000
    metrics: list[Metric] = []

    async def main() -> None:
        async with open_runtime() as ctx:
            for listeners in (0, 1, 10):
                metrics.extend(await _measure(ctx, listeners, iterations))

    trio.run(main)
    return metrics


if __name__ == "__main__":
    import sys

    print_table(run(smoke="--smoke" in sys.argv))
