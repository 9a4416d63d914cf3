"""Deterministic counts of one loop step: bytecodes and Python calls, by module and function.

``python -m benchmarks.step_counts [--floor] [--top N]`` runs ``bench_loop``'s 100- and
400-step workloads (``--floor``: the hand-written floor's) under an opcode tracer and prints
the difference divided by 300: what one step costs, with start-up and teardown cancelled out.
The counts repeat exactly from run to run, whatever else the machine is doing, so they show
a change of a few percent that wall-clock rows drown in noise; they are not a timing (the
tracer slows the run ~50x) and a bytecode is not a fixed cost (a call or an allocation in C
hides behind one). Instructions are counted with callgrind, as docs/performance.md says.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from benchmarks import bench_loop

#: (file, first line, qualified name) of a code object.
_Key = tuple[str, int, str]


def _count(
    run: Callable[[int], Awaitable[float]], steps: int
) -> tuple[Counter[_Key], Counter[_Key]]:
    """Bytecodes executed and calls made, by code object, in ``trio.run(run, steps)``."""
    opcodes: Counter[_Key] = Counter()
    calls: Counter[_Key] = Counter()

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        key = (code.co_filename, code.co_firstlineno, code.co_qualname)
        if event == "call":
            calls[key] += 1
        frame.f_trace_opcodes = True

        def local(frame: types.FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                opcodes[key] += 1
            return local

        return local

    sys.settrace(trace)
    try:
        trio.run(run, steps)
    finally:
        sys.settrace(None)
    return opcodes, calls


def _module(filename: str) -> str:
    for marker in ("trio_agent/", "site-packages/"):
        if marker in filename:
            tail = filename.rsplit(marker, 1)[1]
            return tail if marker == "trio_agent/" else tail.split("/")[0]
    return filename.rsplit("/", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", action="store_true", help="count the hand-written floor")
    parser.add_argument("--top", type=int, default=40, help="functions to list (default 40)")
    options = parser.parse_args()
    run = bench_loop._floor_steps if options.floor else bench_loop._harness_steps
    small_ops, small_calls = _count(run, 100)
    large_ops, large_calls = _count(run, 400)
    per_step = {k: (large_ops[k] - small_ops[k]) / 300 for k in large_ops}
    calls = {k: (large_calls[k] - small_calls[k]) / 300 for k in large_calls}
    print(
        f"per step: {sum(per_step.values()):,.0f} bytecodes, "
        f"{sum(calls.values()):,.0f} Python calls ({'floor' if options.floor else 'harness'})"
    )
    modules: dict[str, float] = {}
    for key, count in per_step.items():
        module = _module(key[0])
        modules[module] = modules.get(module, 0.0) + count
    print("\nby module (bytecodes)")
    for name in sorted(modules, key=modules.__getitem__, reverse=True)[:20]:
        print(f"  {modules[name]:8,.0f}  {name}")
    print("\nby function (bytecodes, calls)")
    for key in sorted(per_step, key=per_step.__getitem__, reverse=True)[: options.top]:
        print(
            f"  {per_step[key]:8,.0f}  {calls.get(key, 0.0):5.1f}  "
            f"{_module(key[0])}:{key[1]} {key[2]}"
        )


if __name__ == "__main__":
    main()
