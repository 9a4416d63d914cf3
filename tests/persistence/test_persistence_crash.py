"""SIGKILL a process that runs multi-step turns whose tools leave marker files, at seeded random
moments; after every kill the log must hold up:

* it loads (only the last turn may be open);
* every marker file on disk has its ``tool/call`` in the log (write-ahead);
* every ``step/end`` the child saw pass a durability point is there, and so is every turn the
  child reported durable;
* the repair resume applies answers each unfinished call by what the log shows:
  ``TOOL_OUTCOME_UNKNOWN`` exactly for the calls with effects that were running, ``INTERRUPTED``
  for read-only ones and for calls that never started.

At the end a resume and one more turn leave a balanced log in which no call ran twice. The
default run kills a few times per backend; the ``slow`` marker runs the full counts (100 for
JSONL, 30 for SQLite): ``pytest -m slow``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
from crash_child import answer_pieces, script
from persistence_helpers import JSONL, SQLITE, BackendKind

from trio_agent.session import (
    INTERRUPTED_NOT_STARTED_TEXT,
    INTERRUPTED_OUTCOME_UNKNOWN_TEXT,
    INTERRUPTED_READ_ONLY_TEXT,
    AssistantMessageEvent,
    SessionEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
    repair_events,
)
from trio_agent.testing import open_test_harness
from trio_agent.tools import TOOL_OUTCOME_UNKNOWN, ToolCallContext, tool

CHILD = Path(__file__).with_name("crash_child.py")
SEED = 20240607

#: What a kill waits for, in turn: the kinds of moments a crash can hit (a progress word, and
#: the end of its argument). ``marking -c`` is inside a tool with effects of step 2, whose
#: write-ahead flush also took the ``tool/call`` of the read-only call running beside it.
TRIGGERS = (
    ("marking", ""),
    ("step", ""),
    ("marking", "-c"),
    ("flushed", ""),
    ("start", ""),
    ("now", ""),
    ("looking", ""),
    ("looking", "-r3"),
)


@attrs.define
class Seen:
    """What the children reported before they died, and what the repairs must say."""

    flushed: set[int] = attrs.field(factory=set)
    #: (turn, step) of every agent/step-start a child reported.
    stepped: set[tuple[int, int]] = attrs.field(factory=set)
    #: Calls whose repair must be TOOL_OUTCOME_UNKNOWN / a read-only INTERRUPTED.
    unknown: set[str] = attrs.field(factory=set)
    read_only: set[str] = attrs.field(factory=set)


class ForkServer:
    """Drives ``crash_child.py --serve``: forks children, kills them, reaps them."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""

    async def line(self) -> list[str]:
        while b"\n" not in self.buffer:
            data = await self.stdout.receive_some()
            assert data, "the fork server exited early"
            self.buffer += data
        raw, self.buffer = self.buffer.split(b"\n", 1)
        words = raw.decode().split()
        assert words and words[0] in _WORDS, f"not a progress line: {raw!r}"
        return words

    def note(self, words: list[str], seen: Seen) -> None:
        if words[0] == "flushed":
            seen.flushed.add(int(words[1]))
        elif words[0] == "step":
            seen.stepped.add((int(words[1]), int(words[2])))

    async def run_child(self, rng: random.Random, trigger: tuple[str, str], seen: Seen) -> None:
        """Fork a child and SIGKILL it: once it has flushed 0-2 turns, on its next progress
        line that matches ``trigger`` (or right away, for ``now``), after a random 0-5 ms (none
        inside a tool body)."""
        word, suffix = trigger
        wait_for = rng.randint(0, 2)
        in_a_body = word in ("marking", "looking")
        delay = 0.0 if in_a_body else rng.choice([0.0, rng.uniform(0, 0.005)])
        flushed = 0
        pid = -1
        ready = armed = False
        await self.stdin.send_all(b"run\n")
        with trio.fail_after(60):
            while True:
                words = await self.line()
                assert words[0] not in ("reaped", "error"), words
                self.note(words, seen)
                if words[0] == "pid":
                    pid = int(words[1])
                elif words[0] == "ready":
                    ready = True
                elif words[0] == "flushed":
                    flushed += 1
                if armed and words[0] == word and words[-1].endswith(suffix):
                    break
                armed = armed or (pid > 0 and ready and flushed >= wait_for)
                if armed and word == "now":
                    break
            # A random moment to kill at (not a wait for anything to settle).
            await trio.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            await self.stdin.send_all(f"reap {pid}\n".encode())
            # The child is gone once reaped; its lines written before the kill still count.
            while (words := await self.line()) != ["reaped", str(pid)]:
                assert words[0] != "error", words
                self.note(words, seen)


_WORDS = {"pid", "ready", "start", "step", "marking", "looking", "flushed", "reaped", "error"}


def calls_of(events: tuple[SessionEvent, ...]) -> dict[str, ToolCallEvent]:
    return {
        e.payload_as(ToolCallEvent).call_id: e.payload_as(ToolCallEvent)
        for e in events
        if e.type == "tool/call"
    }


def results_of(events: tuple[SessionEvent, ...]) -> list[ToolResultEvent]:
    return [e.payload_as(ToolResultEvent) for e in events if e.type == "tool/result"]


def check_flushed_turn(turn: int, events: list[SessionEvent]) -> None:
    """Turn ``turn`` was reported durable: every one of its events must be there."""
    types = [e.type for e in events if e.type not in ("assistant/chunk", "request/header")]
    assert types == [
        "turn/start",
        "user/message",
        *("step/start", "assistant/message", "tool/call", "tool/result"),
        *("tool/call", "tool/call", "tool/result", "tool/result", "step/end"),
        *("step/start", "assistant/message", "tool/call", "tool/call", "tool/call"),
        *("tool/result", "tool/result", "tool/result", "step/end"),
        *("step/start", "assistant/message", "step/end"),
        "turn/end",
    ], types
    results = {
        r.call_id: r.result for r in (e.payload for e in events) if isinstance(r, ToolResultEvent)
    }
    assert sorted(results) == sorted(f"t{turn}-{x}" for x in ("a", "r1", "r2", "b", "c", "r3"))
    assert not any(result.is_error for result in results.values())
    answers = [e.payload for e in events if e.type == "assistant/message"]
    assert answers[-1].message.text == "".join(answer_pieces(turn))  # type: ignore[attr-defined]
    (end,) = [e.payload for e in events if e.type == "turn/end"]
    assert end == TurnEnd(turn=turn, reason="completed")


def turns_of(events: tuple[SessionEvent, ...]) -> dict[int, list[SessionEvent]]:
    grouped: dict[int, list[SessionEvent]] = {}
    for event in events:
        turn = event.data.get("turn")
        if isinstance(turn, int) and turn > 0:
            grouped.setdefault(turn, []).append(event)
    return grouped


def check_after_kill(events: tuple[SessionEvent, ...], markers: set[str], seen: Seen) -> None:
    """Everything the module docs promise of the log a kill left."""
    assert [e.seq for e in events] == list(range(len(events)))
    calls = calls_of(events)
    # Write-ahead: a marker is a body that ran, and its call was on disk first.
    assert markers <= set(calls), sorted(markers - set(calls))
    for call in calls.values():
        assert call.read_only == (call.name == "look"), call
    # Everything a child saw pass a durability point.
    grouped = turns_of(events)
    kinds = {(e.type, e.data.get("turn"), e.data.get("step")) for e in events}
    for turn, step in seen.stepped:
        prompts = [e for e in grouped.get(turn, []) if e.type == "user/message"]
        assert [p.payload_as(UserMessageEvent).message.text for p in prompts] == [f"prompt {turn}"]
        if step > 1:
            assert ("step/end", turn, step - 1) in kinds, (turn, step)
    for turn in seen.flushed:
        check_flushed_turn(turn, grouped[turn])
    starts = [e.payload_as(TurnStart).turn for e in events if e.type == "turn/start"]
    ends = [e.payload_as(TurnEnd).turn for e in events if e.type == "turn/end"]
    assert ends in (starts, starts[:-1])  # only the last turn can be open
    # The repair: each unfinished call answered by what the log shows.
    answered = {r.call_id for r in results_of(events)}
    repaired = {
        r.call_id: (r.result.code, r.result.text)
        for r in (e.payload for e in repair_events(events))
        if isinstance(r, ToolResultEvent)
    }
    for call_id, outcome in repaired.items():
        logged = calls.get(call_id)
        if logged is None:
            assert outcome == ("INTERRUPTED", INTERRUPTED_NOT_STARTED_TEXT)
        elif logged.read_only:
            assert outcome == ("INTERRUPTED", INTERRUPTED_READ_ONLY_TEXT)
            seen.read_only.add(call_id)
        else:
            assert outcome == (TOOL_OUTCOME_UNKNOWN, INTERRUPTED_OUTCOME_UNKNOWN_TEXT)
            seen.unknown.add(call_id)
    running = {c for c in calls if c not in answered}
    assert set(repaired) >= running
    assert markers - answered <= seen.unknown  # a body that ran unanswered: outcome unknown
    if ends != starts:
        assert repair_events(events)[-1].payload_as(TurnEnd).reason == "interrupted"
    else:
        assert repaired == {}


async def load(kind: BackendKind, root: Path) -> tuple[SessionEvent, ...] | None:
    async with open_test_harness(
        persistence=kind.plugin, persistence_config=kind.config(root)
    ) as h:
        if not await h.ctx.session_persistence.exists("crashy"):
            return None
        return (await h.ctx.session_persistence.load("crashy")).events


@pytest.mark.parametrize(
    ("kind", "kills"),
    [
        pytest.param(JSONL, 12, id="jsonl"),
        pytest.param(SQLITE, 6, id="sqlite"),
        # 100 kills take about a minute on an idle 2-core machine: the full counts get a
        # generous deadline (a guard against a hang, not a timing assertion).
        pytest.param(
            JSONL, 100, id="jsonl-full", marks=[pytest.mark.slow, pytest.mark.trio_timeout(900)]
        ),
        pytest.param(
            SQLITE, 30, id="sqlite-full", marks=[pytest.mark.slow, pytest.mark.trio_timeout(900)]
        ),
    ],
)
async def test_sigkill_at_random_points_loses_at_most_the_step_in_flight(
    tmp_path: Path, kind: BackendKind, kills: int
) -> None:
    rng = random.Random(SEED + kills)
    markers = tmp_path / "markers"
    markers.mkdir()
    stderr = tmp_path / "child-stderr.txt"
    seen = Seen()
    with stderr.open("wb") as errors:
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                str(CHILD),
                "--serve",
                kind.name,
                str(tmp_path),
                "crashy",
                str(markers),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
    try:
        server = ForkServer(process)
        for number in range(kills):
            await server.run_child(rng, TRIGGERS[number % len(TRIGGERS)], seen)
            events = await load(kind, tmp_path)
            on_disk = set(os.listdir(markers))
            if events is None:  # killed before its first durability point
                assert not on_disk and not seen.flushed and not seen.stepped
                continue
            check_after_kill(events, on_disk, seen)
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
    assert seen.flushed, "no turn was ever flushed: the test exercised nothing"
    assert seen.read_only, "no kill landed in a started read-only call"
    assert seen.unknown, "no kill landed in a tool with effects: the test exercised too little"
    await resume_and_check(kind, tmp_path, markers, seen)


async def resume_and_check(kind: BackendKind, root: Path, markers: Path, seen: Seen) -> None:
    """A last resume and turn: the log is balanced, every repair is the one predicted, and no
    call ran twice."""

    @tool
    async def mark(*, call: ToolCallContext) -> str:
        """Leave a marker."""
        await (trio.Path(markers) / call.call_id).touch(exist_ok=False)
        return "marked"

    @tool(concurrency_safe=True)
    async def mark_safe(*, call: ToolCallContext) -> str:
        """Leave a marker."""
        await (trio.Path(markers) / call.call_id).touch(exist_ok=False)
        return "marked"

    @tool(concurrency_safe=True, read_only=True)
    async def look() -> str:
        """Only read."""
        return "looked"

    async with open_test_harness(
        tools=[mark, mark_safe, look], persistence=kind.plugin, persistence_config=kind.config(root)
    ) as h:
        async with await h.ctx.agents.resume(agent_id="a", resume_session_id="crashy") as handle:
            agent = handle.agent
            turn = agent.session.last_turn + 1
            h.model.push(*script(turn))  # type: ignore[arg-type]
            agent.send(f"prompt {turn}")
            await agent.wait_idle()
        events = (await h.ctx.session_persistence.load("crashy")).events
    assert repair_events(events) == []
    check_flushed_turn(turn, turns_of(events)[turn])
    for flushed in seen.flushed:
        check_flushed_turn(flushed, turns_of(events)[flushed])
    calls = calls_of(events)
    results = results_of(events)
    # Balanced: every call the model asked for answered exactly once (started or not), every
    # step and turn closed.
    asked = [
        block.id
        for e in events
        if e.type == "assistant/message"
        for block in e.payload_as(AssistantMessageEvent).message.tool_calls
    ]
    assert sorted(r.call_id for r in results) == sorted(asked)
    assert set(calls) <= set(asked)
    kinds = [e.type for e in events]
    assert kinds.count("step/start") == kinds.count("step/end")
    assert kinds.count("turn/start") == kinds.count("turn/end")
    # The repairs each resume wrote are exactly the ones predicted after the kills.
    by_code: dict[str, set[str]] = {}
    for result in results:
        by_code.setdefault(result.result.code or "", set()).add(result.call_id)
    assert by_code.get(TOOL_OUTCOME_UNKNOWN, set()) == seen.unknown
    assert seen.read_only <= by_code.get("INTERRUPTED", set())
    # No call ran twice (a second run of a marker call fails), and every marker was written
    # ahead.
    assert by_code.get("TOOL_ERROR", set()) == set()
    assert set(os.listdir(markers)) <= set(calls)
