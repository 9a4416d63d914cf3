"""Built-in tools under hostile input: do the bounds hold?

Rows (each through the real tool pipeline, ``ctx.tools.execute``):

* the pathological glob ``"**/" * 12 + "x"`` over a deep tree; floor: the same walk with
  ``**/x``. Linear matching keeps the ratio near 1 (the old recursive matcher was exponential).
* ``read_file`` of a sparse 4 GiB file whose first line is everything; floor: ``read_file`` of
  a one-line file. The window is bounded, so the ratio stays small whatever the file size.
* ``grep`` with a catastrophic regex (``^(a+)+$`` on 64 ``a``\\ s and a ``!``) under a time
  limit; floor: the limit itself. A ratio near 1 means the search process is killed on time.
* ``grep`` over a small tree; floor: the same search with ``re`` in-process. The difference is
  the cost of starting the search process.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from trio_agent.ids import CallId
from trio_agent.runtime import open_runtime
from trio_agent.tools import ToolInvocation, ToolRegistry
from trio_agent.tools.builtin import BuiltinTools

__all__ = ["run"]

PATHOLOGICAL = "**/" * 12 + "x"


def _tree(top: Path, depth: int, width: int) -> None:
    here = top
    for level in range(depth):
        here = here / f"d{level}"
        here.mkdir(parents=True)
        for i in range(width):
            (here / f"f{i}.txt").write_text("needle\n" * 20)
    (here / "x").write_text("needle\n")


async def _timed(ctx: Any, name: str, arguments: str, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        await ctx.tools.execute(ToolInvocation(CallId("bench"), name, arguments))
        best = min(best, time.perf_counter() - start)
    return best


def run(smoke: bool) -> list[Metric]:
    """Measure the four rows; see the module docstring."""
    depth, width, repeats = (8, 3, 2) if smoke else (16, 10, 5)
    limit = 0.3 if smoke else 1.0
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _tree(root / "tree", depth, width)
        with (root / "huge.txt").open("wb") as f:
            f.write(b"a" * (1 << 20))
            f.truncate(4 << 30)
        (root / "small.txt").write_text("one line\n")
        (root / "trap.txt").write_text("a" * 64 + "!\n")

        async def measure() -> None:
            async with open_runtime() as ctx:
                await ctx.plugin(ToolRegistry)
                await ctx.plugin(BuiltinTools, {"root": tmp, "search_timeout": limit})
                results["glob"] = await _timed(
                    ctx, "glob", f'{{"pattern": "{PATHOLOGICAL}"}}', repeats
                )
                results["glob_floor"] = await _timed(ctx, "glob", '{"pattern": "**/x"}', repeats)
                results["read"] = await _timed(ctx, "read_file", '{"path": "huge.txt"}', repeats)
                results["read_floor"] = await _timed(
                    ctx, "read_file", '{"path": "small.txt"}', repeats
                )
                results["trap"] = await _timed(
                    ctx, "grep", '{"pattern": "^(a+)+$", "path": "trap.txt"}', 1
                )
                results["grep"] = await _timed(
                    ctx, "grep", '{"pattern": "need+le", "path": "tree"}', repeats
                )

        trio.run(measure)
        regex = re.compile("need+le")
        start = time.perf_counter()
        for path in sorted((root / "tree").rglob("*")):
            if path.is_file():
                for line in path.read_text().splitlines():
                    regex.search(line)
        results["grep_floor"] = time.perf_counter() - start
    ms = 1000.0
    return [
        Metric(
            "glob '**/'*12+'x' (deep tree)",
            results["glob"] * ms,
            "ms",
            results["glob_floor"] * ms,
            "floor: glob '**/x'; ~1x = linear",
        ),
        Metric(
            "read_file 4 GiB file, huge first line",
            results["read"] * ms,
            "ms",
            results["read_floor"] * ms,
            "floor: read_file of a 1-line file",
        ),
        Metric(
            f"grep catastrophic regex, {limit:g}s limit",
            results["trap"] * ms,
            "ms",
            limit * ms,
            "floor: the time limit; ~1x = killed on time",
        ),
        Metric(
            "grep small tree (search process)",
            results["grep"] * ms,
            "ms",
            results["grep_floor"] * ms,
            "floor: in-process re over the same files",
        ),
    ]


if __name__ == "__main__":
    print_table(run(smoke=False))
