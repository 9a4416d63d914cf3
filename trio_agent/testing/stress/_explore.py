"""``explore_cancellation``: one run per schedule point, each cancelling exactly there."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal, final

import attrs
import trio

from ...agent import Agent
from ...errors import TrioAgentError
from ._errors import ScenarioError, StressFailure
from ._invariants import check_run
from ._observer import Observer
from ._records import Action, LoggedError, RunRecord, Violation
from ._scenario import Scenario, ScenarioFn, as_scenario
from ._scheduling import can_seed_scheduler, scheduler_note
from ._snippet import scenario_name, scenario_snippet
from ._world import WALL_TIMEOUT, World, open_world, run_world

__all__ = ["ExplorationReport", "Failure", "explore_cancellation", "run_scenario"]

_ACTIONS = ("cancel", "close", "unload")
#: How many violations a failure prints (the record has them all).
_SHOWN = 8


@attrs.frozen
class Failure:
    """One failing run: where the kit acted (``point`` is ``None`` for the run without an
    action), what broke, and the snippet that replays it."""

    point: int | None
    action: Action
    seed: int
    violations: tuple[Violation, ...]
    snippet: str

    def __str__(self) -> str:
        where = (
            "without any action" if self.point is None else f"{self.action} at point {self.point}"
        )
        shown = [f"  - {v}" for v in self.violations[:_SHOWN]]
        if len(self.violations) > _SHOWN:
            shown.append(f"  ... and {len(self.violations) - _SHOWN} more")
        return "\n".join([f"{where}:", *shown, "replay with:", self.snippet])


@attrs.frozen
class ExplorationReport:
    """What :func:`explore_cancellation` did and found.

    Attributes:
        scenario: The scenario's name.
        action: What each run did at its point.
        points: The schedule points of the scenario's run without an action.
        explored: The points a run acted at, in order.
        failures: The failing runs (the first is the one at the smallest point).
        diverged: Runs whose schedule before their point differed from the first run's.
        replayable: Whether every run is an exact replay of its schedule (no threads, I/O or
            divergence, a seeded scheduler).
        notes: Why runs are not exactly replayable, and other caveats.
        seconds: Wall time of the whole exploration.
    """

    scenario: str
    action: Action
    seed: int
    points: int
    explored: tuple[int, ...]
    failures: tuple[Failure, ...]
    diverged: int
    replayable: bool
    notes: tuple[str, ...]
    seconds: float

    @property
    def violations(self) -> tuple[Violation, ...]:
        """The violations of every failing run."""
        return tuple(v for f in self.failures for v in f.violations)

    def summary(self) -> str:
        """One line: points, runs, violations, replayability."""
        exact = "exactly replayable" if self.replayable else "not exactly replayable"
        return (
            f"explore_cancellation({self.scenario}, action={self.action!r}): {self.points} "
            f"schedule points, {len(self.explored)} explored, {len(self.failures)} failing "
            f"run(s), {len(self.violations)} violation(s); {exact}"
        )

    def __str__(self) -> str:
        lines = [self.summary(), *(f"note: {n}" for n in self.notes)]
        if self.failures:
            lines.append(f"first failure, {self.failures[0]}")
        return "\n".join(lines)


@final
class _Actor:
    """Performs the run's action when the observer reaches its point."""

    def __init__(self, world: World, action: Action, point: int) -> None:
        self.world = world
        self.action = action
        self.point = point
        self.wake = trio.Event()
        self.done = trio.Event()

    def at_point(self, n: int) -> None:
        if n != self.point:
            return
        if self.action == "cancel":
            # Synchronous and safe from anywhere: it lands exactly between two steps.
            observer = self.world.observer
            observer.acting = True
            try:
                self._note()
                for agent in self.world.harness.ctx.agents.list():
                    agent.cancel(f"stress: cancel at point {n}")
            except Exception as exc:
                self.world.record.errors.append(
                    LoggedError(None, f"agent.cancel() raised {exc!r}", exc)
                )
            finally:
                observer.acting = False
            self.done.set()
        else:
            self.wake.set()

    async def injector(self) -> None:
        """Close the agents or unload the plugins once the point is reached (kit task)."""
        await self.wake.wait()
        try:
            with self.world.acting():
                self._note()
                if self.action == "close":
                    for agent in self.world.harness.ctx.agents.list():
                        await _closer(agent)()
                else:
                    for fiber in reversed(self.world.fibers):
                        await fiber.dispose()
        finally:
            self.done.set()

    def _note(self) -> None:
        self.world.note_action(self.action, self.point)


def _closer(agent: Agent) -> Callable[[], Awaitable[None]]:
    aclose = getattr(agent, "aclose", None)
    if not callable(aclose):
        raise ScenarioError(
            f"action='close' needs agents with an aclose() method; {agent!r} has none"
        )
    return aclose  # type: ignore[no-any-return]


def run_scenario(
    scenario: Scenario,
    *,
    action: Action | None = None,
    point: int | None = None,
    seed: int = 0,
    wall_timeout: float = WALL_TIMEOUT,
) -> RunRecord:
    """Run ``scenario`` once, acting at ``point`` (none: no action), and return the record."""
    record = RunRecord()

    async def body(observer: Observer, directory: Path | None) -> None:
        async with open_world(
            scenario.harness, record, observer, directory, autojump=True
        ) as world:
            # The helper task exists in every run (also without an action), so each run's
            # schedule is the same as the first run's up to its point.
            actor = _Actor(world, action or "cancel", point or 0)
            world.kit.start_soon(actor.injector, name="stress helper")
            if action is not None and point is not None:
                observer.on_point = actor.at_point
            observer.counting = True
            try:
                with trio.move_on_after(scenario.timeout) as guard:
                    await scenario.fn(world.harness)
            except Exception as exc:
                record.scenario_error = exc
            finally:
                observer.counting = False
                observer.on_point = None
            record.timed_out = guard.cancelled_caught
            if actor.wake.is_set():
                with trio.move_on_after(scenario.timeout):
                    await actor.done.wait()

    run_world(scenario.harness, body, record=record, seed=seed, wall_timeout=wall_timeout)
    record.complete = True
    return record


def scenario_violations(scenario: Scenario, record: RunRecord) -> list[Violation]:
    """Every invariant of one scenario run, plus the scenario's own errors and timeout."""
    out = check_run(
        record,
        cancel_deadline=scenario.cancel_deadline,
        allowed_errors=scenario.allowed_errors,
        checks=scenario.checks,
    )
    error = record.scenario_error
    acted = any(a.kind in ("close", "unload") for a in record.actions)
    if error is not None and not (acted and isinstance(error, TrioAgentError)):
        out.append(Violation("scenario-error", f"the scenario raised {error!r}"))
    if record.timed_out and record.hang is None:
        out.append(
            Violation(
                "scenario-timeout",
                f"the scenario did not finish within {scenario.timeout:g} virtual seconds",
            )
        )
    return out


def _choose(points: int, budget: int | None, sample: str, seed: int) -> list[int]:
    if budget is None or budget >= points:
        return list(range(1, points + 1))
    if budget < 1:
        raise ValueError(f"budget must be at least 1 (or None for every point), got {budget}")
    if sample == "stride":
        step = points / budget
        return sorted({1 + int(i * step) for i in range(budget)})
    if sample == "random":
        return sorted(random.Random(seed).sample(range(1, points + 1), budget))
    raise ValueError(f"sample must be 'stride' or 'random', got {sample!r}")


def explore_cancellation(
    target: Scenario | ScenarioFn,
    *,
    action: Action = "cancel",
    budget: int | None = None,
    sample: Literal["stride", "random"] = "stride",
    seed: int = 0,
    stop_on_failure: bool = True,
    raise_on_failure: bool = True,
    wall_timeout: float = WALL_TIMEOUT,
) -> ExplorationReport:
    """Run ``target`` once to count its schedule points, then once per point k, acting exactly
    at k, and check every run against the invariants.

    Args:
        target: A :class:`Scenario` (see :func:`scenario`), or a bare scenario function on the
            default harness.
        action: ``"cancel"`` cancels every agent's running turn (``agent.cancel()``, called
            between two task steps); ``"close"`` closes every agent (``aclose()``) and
            ``"unload"`` disposes the scenario's own plugins, both from a helper task that runs
            in the scheduler batch after point k.
        budget: At most this many runs (``None``: every point). ``sample`` picks which points:
            ``"stride"`` (evenly spread) or ``"random"`` (seeded by ``seed``).
        seed: Seeds trio's scheduler for every run (and the random sample).
        stop_on_failure: Stop at the first failing run (the one at the smallest point).
        raise_on_failure: Raise :class:`StressFailure` when a run fails (else only report it).
        wall_timeout: Wall seconds after which a run that does not finish is a hang.

    Returns:
        The :class:`ExplorationReport`.

    Raises:
        StressFailure: A run broke an invariant (``raise_on_failure``); its message ends with
            the snippet that replays the first failing run.
        ScenarioError: The scenario does not finish on its own, without any action.
    """
    if action not in _ACTIONS:
        raise ValueError(f"action must be one of {', '.join(_ACTIONS)}; got {action!r}")
    scenario = as_scenario(target)
    if action == "unload" and not scenario.harness.plugins:
        raise ScenarioError(
            f"action='unload' disposes the scenario's own plugins, but {scenario.name} mounts "
            "none; list them in @scenario(plugins=...)"
        )
    started = time.perf_counter()
    notes: list[str] = []
    note = scheduler_note()
    if note is not None:
        notes.append(note)
    failures: list[Failure] = []

    def judge(record: RunRecord, point: int | None) -> None:
        found = scenario_violations(scenario, record)
        if found:
            snippet = scenario_snippet(target, scenario.fn, action=action, point=point, seed=seed)
            failures.append(Failure(point, action, seed, tuple(found), snippet))

    baseline = run_scenario(scenario, seed=seed, wall_timeout=wall_timeout)
    if baseline.timed_out and baseline.hang is None:
        raise ScenarioError(
            f"scenario {scenario.name} did not finish within {scenario.timeout:g} virtual "
            "seconds without any cancel; explore_cancellation needs a scenario that ends on "
            "its own (send, then await agent.wait_idle())"
        )
    judge(baseline, None)
    explored: list[int] = []
    diverged = 0
    threads = baseline.threads_used
    io = baseline.io_used
    if not (failures and stop_on_failure):
        for point in _choose(baseline.points, budget, sample, seed):
            record = run_scenario(
                scenario, action=action, point=point, seed=seed, wall_timeout=wall_timeout
            )
            explored.append(point)
            threads = threads or record.threads_used
            io = io or record.io_used
            if record.trace[:point] != baseline.trace[:point]:
                diverged += 1
            judge(record, point)
            if failures and stop_on_failure:
                break
    if threads:
        notes.append("worker threads reported back into the runs (their timing is not replayed)")
    if io:
        notes.append("tasks waited for real I/O (sockets, pipes or processes are not replayed)")
    if diverged:
        notes.append(f"{diverged} run(s) diverged from the first run's schedule before their point")
    report = ExplorationReport(
        scenario=scenario_name(target, scenario.fn),
        action=action,
        seed=seed,
        points=baseline.points,
        explored=tuple(explored),
        failures=tuple(failures),
        diverged=diverged,
        replayable=not (threads or io or diverged) and can_seed_scheduler(),
        notes=tuple(notes),
        seconds=time.perf_counter() - started,
    )
    if failures and raise_on_failure:
        first = failures[0]
        raise StressFailure(str(report), snippet=first.snippet, violations=first.violations)
    return report
