"""The cancellation stress kit: what an ``explore_cancellation`` budget buys.

1. Runs per second of ``explore_cancellation`` on a one-tool turn (higher is better). Floor: the
   same scenario as a plain ``trio.run`` on the test harness under ``MockClock`` (no instrument,
   no probes, no worker thread, no checks), so the ratio is the kit's own cost per run.
2. Seconds to find each deliberately broken plugin of the mutation check
   (``tests/stress/test_mutations.py``), with the points it explored on the way.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import trio
import trio.testing

from benchmarks._harness import Metric, print_table
from trio_agent.testing import open_test_harness
from trio_agent.testing.stress import Scenario, StressFailure, explore_cancellation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "stress"))

from stress_scenarios import one_tool
from test_mutations import MUTANTS


def _plain_runs(scenario: Scenario, runs: int) -> float:
    """Runs per second of the scenario without the kit."""
    spec = scenario.harness

    async def once() -> None:
        async with open_test_harness(list(spec.responses), tools=spec.tools) as h:
            await scenario.fn(h)

    start = time.perf_counter()
    for _ in range(runs):
        trio.run(once, clock=trio.testing.MockClock(autojump_threshold=0))
    return runs / (time.perf_counter() - start)


def _explore_rate(scenario: Scenario, repeats: int) -> tuple[float, int]:
    runs = 0
    start = time.perf_counter()
    for _ in range(repeats):
        report = explore_cancellation(scenario)
        runs += len(report.explored) + 1  # + the run that counts the points
    return runs / (time.perf_counter() - start), report.points


def run(smoke: bool) -> list[Metric]:
    rate, points = _explore_rate(one_tool, 1 if smoke else 5)
    floor = _plain_runs(one_tool, 20 if smoke else 200)
    metrics = [
        Metric(
            f"explore_cancellation, one-tool turn ({points} points)",
            rate,
            "runs/s",
            floor,
            "higher is better; floor: plain trio.run of the scenario",
        )
    ]
    for param in MUTANTS:
        mutant, invariant = param.values
        start = time.perf_counter()
        try:
            explore_cancellation(mutant)  # type: ignore[arg-type]
        except StressFailure as failure:
            point = failure.snippet.split("point=")[1].split(",")[0]
            note = f"found {invariant} at point {point}"
        else:
            note = "NOT FOUND"
        metrics.append(
            Metric(f"mutation found: {param.id}", time.perf_counter() - start, "s", note=note)
        )
    return metrics


if __name__ == "__main__":
    print_table(run(smoke="--smoke" in sys.argv))
