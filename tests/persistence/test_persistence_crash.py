"""SIGKILL a process that appends and flushes turn after turn; every reload must hold up."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from crash_child import answer_pieces
from persistence_helpers import BACKENDS, open_store

from trio_agent.session import (
    AssistantMessageEvent,
    SessionEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    repair_events,
)
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ToolCallContext, tool

CHILD = Path(__file__).with_name("crash_child.py")
JSONL = BACKENDS[0]
ITERATIONS = 20
SEED = 20240607


class Lines:
    """Reads a process's stdout line by line."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> str:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some()
            assert data, "the fork server exited early"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def turns_of(events: tuple[SessionEvent, ...]) -> dict[int, list[SessionEvent]]:
    """Events grouped by the turn they belong to (by their ``turn`` field)."""
    grouped: dict[int, list[SessionEvent]] = {}
    for event in events:
        turn = event.data.get("turn")
        if isinstance(turn, int) and turn > 0:
            grouped.setdefault(turn, []).append(event)
    return grouped


def check_flushed_turn(turn: int, events: list[SessionEvent]) -> None:
    """Turn ``turn`` was reported durable: every one of its events must be there."""
    # request/header is logged only when it changed (the first turn of each process).
    types = [e.type for e in events if e.type not in ("assistant/chunk", "request/header")]
    assert types == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ], types
    by_type: dict[str, list[Any]] = {}
    for event in events:
        by_type.setdefault(event.type, []).append(event.payload)
    assert by_type["turn/start"] == [TurnStart(turn=turn)]
    (prompt,) = by_type["user/message"]
    assert isinstance(prompt, UserMessageEvent) and prompt.message.text == f"prompt {turn}"
    (result,) = by_type["tool/result"]
    assert isinstance(result, ToolResultEvent)
    assert result.call_id == f"c{turn}" and not result.result.is_error
    assert result.result.text == f"done {turn}"
    answers = [m.message.text for m in by_type["assistant/message"]]
    assert isinstance(by_type["assistant/message"][-1], AssistantMessageEvent)
    assert answers[-1] == "".join(answer_pieces(turn))
    (end,) = by_type["turn/end"]
    assert end == TurnEnd(turn=turn, reason="completed")


class ForkServer:
    """Drives ``crash_child.py --serve``: forks children, kills them, reaps them."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.lines = Lines(process.stdout)

    async def run_child(self, rng: random.Random) -> tuple[int, set[int]]:
        """Fork a child and SIGKILL it at a random point: once it has flushed 0-3 turns, on its
        next progress line of a random kind (or right away), after a random 0-5 ms. Return its
        first turn and the turns it reported flushed."""
        wait_for = rng.randint(0, 3)
        trigger = rng.choice(["now", "start", "checkpoint", "flushed"])
        delay = rng.choice([0.0, rng.uniform(0, 0.005)])
        flushed: set[int] = set()
        first = pid = -1
        armed = False
        await self.stdin.send_all(b"run\n")
        with trio.fail_after(30):
            while True:
                word, _, number = (await self.lines.next()).partition(" ")
                assert word in ("pid", "ready", "start", "checkpoint", "flushed"), (word, number)
                if word == "pid":
                    pid = int(number)
                elif word == "ready":
                    first = int(number) + 1
                elif word == "flushed":
                    flushed.add(int(number))
                if armed and word == trigger:
                    break
                armed = armed or (pid > 0 and first > 0 and len(flushed) >= wait_for)
                if armed and trigger == "now":
                    break
            # A random moment to kill at (not a wait for anything to settle).
            await trio.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            await self.stdin.send_all(f"reap {pid}\n".encode())
            # The child is gone once reaped; its lines written before the kill still count.
            while (line := await self.lines.next()) != f"reaped {pid}":
                word, _, number = line.partition(" ")
                if word == "flushed":
                    flushed.add(int(number))
        return first, flushed


async def test_sigkill_at_random_points_never_loses_a_flushed_turn(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    directory = tmp_path / "sessions"
    stderr = tmp_path / "child-stderr.txt"
    all_flushed: set[int] = set()
    with stderr.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            [sys.executable, str(CHILD), "--serve", str(directory), "crashy"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    try:
        await kill_repeatedly(ForkServer(process), rng, tmp_path, all_flushed)
    except BaseException:
        print(stderr.read_text(), file=sys.stderr)
        raise
    finally:
        process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.aclose()
        await process.stdout.aclose()
    assert all_flushed, "no turn was ever flushed: the test exercised nothing"
    await resume_and_continue(tmp_path, all_flushed)


async def kill_repeatedly(
    server: ForkServer, rng: random.Random, tmp_path: Path, all_flushed: set[int]
) -> None:
    for _ in range(ITERATIONS):
        first, flushed = await server.run_child(rng)
        assert first >= 1
        all_flushed |= flushed
        async with open_store(JSONL, tmp_path) as ctx:
            if not await ctx.session_persistence.exists("crashy"):
                assert not all_flushed
                continue
            stored = await ctx.session_persistence.load("crashy")  # every reload succeeds
        events = stored.events
        assert [e.seq for e in events] == list(range(len(events)))
        grouped = turns_of(events)
        for turn in all_flushed:
            check_flushed_turn(turn, grouped[turn])
        # Only the last turn can be open; the repair closes it.
        starts = [e.payload_as(TurnStart).turn for e in events if e.type == "turn/start"]
        ends = [e.payload_as(TurnEnd).turn for e in events if e.type == "turn/end"]
        assert ends in (starts, starts[:-1])
        if ends != starts:
            closers = repair_events(events)
            assert closers[-1].type == "turn/end"
            assert closers[-1].payload_as(TurnEnd).reason == "interrupted"


async def resume_and_continue(tmp_path: Path, all_flushed: set[int]) -> None:
    """The log resumes: a turn can be appended after the repair."""

    @tool
    async def work(n: int, *, call: ToolCallContext) -> str:
        """Do turn ``n``'s work."""
        return f"done {n}"

    async with open_test_harness(
        tools=[work], persistence=JSONL.plugin, persistence_config=JSONL.config(tmp_path)
    ) as h:
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="crashy")
        turn = handle.agent.session.last_turn + 1
        h.model.push(tool_call(f"c{turn}", "work", {"n": turn}), text(*answer_pieces(turn)))
        handle.agent.send(f"prompt {turn}")
        await handle.agent.wait_idle()
        await handle.aclose()
        stored = await h.ctx.session_persistence.load("crashy")
    assert repair_events(stored.events) == []
    check_flushed_turn(turn, turns_of(stored.events)[turn])
    for flushed_turn in all_flushed:
        check_flushed_turn(flushed_turn, turns_of(stored.events)[flushed_turn])
