"""Bounded tools: hostile patterns and files finish within their bounds, and a cancelled call
leaves nothing running.

The bounds themselves are benchmark rows (``benchmarks/bench_tools.py``); the guards here are
deliberately generous, so that a slow machine passes and an unbounded tool (minutes, or
forever) fails.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from security_helpers import call

from trio_agent.runtime import Context
from trio_agent.tools import TOOL_TIMEOUT
from trio_agent.tools.builtin._globs import GlobPattern

PATHOLOGICAL_GLOB = "**/" * 12 + "x"
CATASTROPHIC_REGEX = r"^(a+)+$"
GUARD = 60  # seconds: generous; the real bounds are benchmark rows


def _children() -> list[int]:
    """Pids of this process's live children."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.append(int(entry))
    return found


def _deep_tree(top: Path, depth: int) -> None:
    top.mkdir()
    here = top
    for level in range(depth):
        here = here / f"d{level}"
        here.mkdir()
        (here / "a.txt").write_text("needle\n")
    (here / "x").write_text("needle at the bottom\n")


def test_pathological_glob_is_linear() -> None:
    pattern = GlobPattern.compile(PATHOLOGICAL_GLOB.split("/"))
    assert pattern.parts == ("**", "x")  # runs of ** collapse
    # An uncollapsible pattern: every * pair could split the path many ways.
    many = GlobPattern.compile(["**", "a*"] * 30 + ["b"])
    names = ["a"] * 200
    with_deadline = time.perf_counter()
    assert not many.match(names)
    assert many.match([*names, "b"])
    assert time.perf_counter() - with_deadline < GUARD


async def test_pathological_glob_in_grep_and_glob(
    ctx: Context, tools: Callable[..., Any], root: Path
) -> None:
    _deep_tree(root / "tree", 16)
    await tools(search_timeout=GUARD)
    with trio.fail_after(GUARD):
        found = await call(ctx, "grep", pattern="needle", glob=PATHOLOGICAL_GLOB)
        listed = await call(ctx, "glob", pattern=PATHOLOGICAL_GLOB)
    bottom = "tree/" + "/".join(f"d{i}" for i in range(16)) + "/x"
    assert found.text == f"{bottom}:1: needle at the bottom"
    assert listed.text == bottom


@pytest.fixture
def huge(root: Path) -> Path:
    """A sparse 4 GiB file whose first line is everything (1 MiB of text, then zeros)."""
    path = root / "huge.txt"
    with path.open("wb") as f:
        f.write(b"a" * (1 << 20))
        f.truncate(4 << 30)
    return path


async def test_read_file_with_a_huge_first_line(
    ctx: Context, tools: Callable[..., Any], huge: Path
) -> None:
    await tools()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with trio.fail_after(GUARD):
        first = await call(ctx, "read_file", path="huge.txt")
        second = await call(ctx, "read_file", path="huge.txt", start_line=2)
    assert first.text.startswith("a" * 1000)
    assert "[line 1 is longer than 262144 bytes and was cut; use grep to search it]" in first.text
    assert "of a 4294967296-byte file" in first.text
    assert second.is_error and "beyond the first 256 MiB" in second.text
    # Kilobytes: far below the 4 GiB a whole read would need.
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 512 * 1024


async def test_catastrophic_regex_is_stopped_at_the_time_limit(
    ctx: Context, tools: Callable[..., Any], root: Path
) -> None:
    (root / "trap.txt").write_text("ok\n" + "a" * 64 + "!\n")
    await tools(search_timeout=1)
    with trio.fail_after(GUARD):
        result = await call(ctx, "grep", pattern=CATASTROPHIC_REGEX, path="trap.txt")
    assert result.is_error and result.code == TOOL_TIMEOUT
    assert "grep stopped after the 1s time limit" in result.text
    assert _children() == []


async def test_grep_on_a_huge_line_is_bounded(
    ctx: Context, tools: Callable[..., Any], huge: Path
) -> None:
    await tools(search_timeout=2)
    with trio.fail_after(GUARD):
        result = await call(ctx, "grep", pattern="needle", path="huge.txt")
    # Either it finished scanning or it hit the time limit; it never runs on.
    assert result.code in (None, TOOL_TIMEOUT), result.text
    assert _children() == []


async def test_a_cancelled_grep_stops_using_the_cpu(
    ctx: Context, tools: Callable[..., Any], root: Path
) -> None:
    (root / "trap.txt").write_text("a" * 64 + "!\n")
    await tools(search_timeout=600)
    with trio.move_on_after(1) as cancelled:  # cancel the call from outside, mid-search
        await call(ctx, "grep", pattern=CATASTROPHIC_REGEX, path="trap.txt")
    assert cancelled.cancelled_caught
    assert _children() == []  # the search process was killed and reaped
    # No thread of ours keeps a core busy: over a second of wall time, well under a second of
    # CPU (generous: a spinning thread would use the whole second).
    used = time.process_time()
    await trio.sleep(1)
    assert time.process_time() - used < 0.5
