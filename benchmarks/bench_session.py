"""Session log: does a loop step cost the same with 100k events of history as with 1k?

A "step" is what the loop writes per model call: ``step/start``, three ``assistant/chunk``,
``assistant/message`` (text + one tool call), ``tool/call``, ``tool/result``, ``step/end``, then
``derive_messages()`` for the next request. Every append runs the real path (lossless-JSON
snapshot, payload validation, projection, ``session/event`` emit to a listener).

Floors: the plainest correct alternative in the same run: copy each event's data with
``json.loads(json.dumps(...))`` and rebuild the history tuple from a list on every derive. Its
cost grows with history (the tuple copy); ours must not: the target is a 100k/1k per-step ratio
of at most 1.5.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from typing import Any

import trio

from benchmarks._harness import Metric, best_of, print_table
from benchmarks._workloads import append_step, end_turn, start_turn
from trio_agent import _serde
from trio_agent.llm import Message
from trio_agent.runtime import open_runtime
from trio_agent.session import (
    ContextMessageEvent,
    Session,
    SessionStore,
    ToolResultEvent,
    snapshot_json,
)

__all__ = ["run"]

STEPS_PER_TURN = 4


class _Writer:
    """Writes loop-shaped turns and steps into a session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.turn = 0
        self.step = 0
        self.calls = 0

    def one_step(self) -> None:
        if self.step == STEPS_PER_TURN or self.turn == 0:
            if self.turn:
                end_turn(self.session, self.turn)
            self.turn += 1
            self.step = 0
            start_turn(self.session, self.turn)
        self.step += 1
        self.calls += 1
        append_step(self.session, self.turn, self.step, self.calls)
        self.session.derive_messages()


class _NaiveLog:
    """The floor: JSON round-trip copies and a history tuple rebuilt on every derive."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.messages: list[Any] = []

    def fill(self, step_data: list[tuple[str, dict[str, Any]]], events: int) -> None:
        while len(self.events) < events:
            self.one_step(step_data)

    def one_step(self, step_data: list[tuple[str, dict[str, Any]]]) -> tuple[Any, ...]:
        for kind, data in step_data:
            copy = json.loads(json.dumps(data, allow_nan=False))
            self.events.append({"seq": len(self.events), "type": kind, "data": copy})
            if kind in ("assistant/message", "tool/result", "user/message"):
                self.messages.append(copy)
        return tuple(self.messages)


def _step_data() -> list[tuple[str, dict[str, Any]]]:
    """One step's events as plain JSON (for the floor)."""

    async def capture() -> list[tuple[str, dict[str, Any]]]:
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            session = ctx.sessions.create("capture")
            writer = _Writer(session)
            writer.one_step()
            start = len(session.events)
            writer.one_step()
            return [(e.type, e.data) for e in session.events[start:]]

    return trio.run(capture)


def _per_step(step: Callable[[], object], steps: int, repeats: int) -> float:
    def timed() -> float:
        gc.disable()
        try:
            start = time.perf_counter()
            for _ in range(steps):
                step()
            return (time.perf_counter() - start) / steps
        finally:
            gc.enable()

    return best_of(repeats, timed) * 1e6


def run(smoke: bool) -> list[Metric]:
    """Measure per-step cost at three history sizes; see the module docstring."""
    sizes = (200, 1_000, 5_000) if smoke else (1_000, 10_000, 100_000)
    labels = ("small", "mid", "large") if smoke else ("1k", "10k", "100k")
    steps, repeats = (30, 3) if smoke else (200, 5)
    step_data = _step_data()
    ours: dict[int, float] = {}
    naive: dict[int, float] = {}
    derive_cost: float = 0.0
    tuple_cost: float = 0.0

    async def measure() -> None:
        nonlocal derive_cost, tuple_cost
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            heard = [0]

            def persistence_like(payload: object) -> None:
                heard[0] += 1

            ctx.on("session/event", persistence_like)
            for size in sizes:
                session = ctx.sessions.create(f"bench-{size}")
                writer = _Writer(session)
                while len(session.events) < size:
                    writer.one_step()
                ours[size] = _per_step(writer.one_step, steps, repeats)
                if size == sizes[-1]:
                    derive_cost, tuple_cost = _derive_costs(session, writer.turn, repeats)
                ctx.sessions.detach(session)

    trio.run(measure)
    for size in sizes:
        log = _NaiveLog()
        log.fill(step_data, size)
        naive[size] = _per_step(_bound(log.one_step, step_data), steps, repeats)

    metrics = [
        Metric(
            f"append+derive per step @{label} events",
            ours[size],
            "us",
            floor=naive[size],
            note="floor: json round-trip copies + history tuple rebuilt per derive",
        )
        for label, size in zip(labels, sizes, strict=True)
    ]
    growth = ours[sizes[-1]] / ours[sizes[0]]
    metrics.append(
        Metric(
            f"per-step cost {labels[-1]} vs {labels[0]}",
            ours[sizes[-1]],
            "us",
            floor=ours[sizes[0]],
            note=f"ratio = growth with history; target <= 1.5 (got {growth:.2f})",
        )
    )
    metrics.append(
        Metric(
            f"derive_messages after a change @{labels[-1]}",
            derive_cost,
            "us",
            floor=tuple_cost,
            note="both append one context/message; floor: + tuple(history), a cached-tuple design",
        )
    )
    sample = next(data for kind, data in step_data if kind == "tool/result")
    typed = _serde.structure(sample, ToolResultEvent)
    snap = best_of(repeats, lambda: _loop_time(lambda: snapshot_json(sample), 2_000)) * 1e6
    round_trip = (
        best_of(repeats, lambda: _loop_time(lambda: json.loads(json.dumps(sample)), 2_000)) * 1e6
    )
    metrics.append(
        Metric(
            "snapshot_json of a tool/result",
            snap,
            "us",
            floor=round_trip,
            note="floor: json.loads(json.dumps(data))",
        )
    )
    unstructure = (
        best_of(
            repeats,
            lambda: _loop_time(lambda: _serde.unstructure(typed), 2_000),
        )
        * 1e6
    )
    metrics.append(Metric("unstructure a ToolResultEvent", unstructure, "us"))
    return metrics


def _bound(fn: Callable[[Any], object], arg: Any) -> Callable[[], object]:
    return lambda: fn(arg)


def _derive_costs(session: Session, turn: int, repeats: int) -> tuple[float, float]:
    """Append one history message then derive_messages, vs the same append plus a tuple copy.

    The change is a public ``context/message`` append (what ``inject`` writes); both sides pay
    it, so the difference is the derive: ours is an O(1) snapshot, the floor copies the history.
    """
    message = Message.user("more context")
    event = ContextMessageEvent(turn=turn, message=message)
    messages = list(session.derive_messages())

    def derive_after_change() -> None:
        session.append("context/message", event)
        session.derive_messages()

    def copy_after_change() -> None:
        session.append("context/message", event)
        tuple(messages)

    derive = _per_step(derive_after_change, 1_000, repeats)
    copy = _per_step(copy_after_change, 100, repeats)
    return derive, copy


def _loop_time(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    import sys

    metrics = run(smoke="--smoke" in sys.argv)
    print_table(metrics)
    growth = next(m for m in metrics if m.name.startswith("per-step cost"))
    assert growth.ratio is not None
    print(
        f"\nper-step cost ratio {growth.name.removeprefix('per-step cost ')}: {growth.ratio:.2f} (target <= 1.5)"
    )


if __name__ == "__main__":
    main()
