"""The tiny contract every ``benchmarks/bench_*.py`` module follows.

Each module defines ``run(smoke: bool) -> list[Metric]``. ``smoke=True`` means tiny sizes (the
whole suite in well under 30 s; CI runs only this). A metric carries its own floor: the same work
done the plainest possible way in the same process, in the same run, so ``ratio`` means something
on any machine. Running a module directly prints its table.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Metric", "best_of", "print_table"]


@dataclass(frozen=True)
class Metric:
    """One measured number next to its floor. ``ratio = value / floor`` (lower is better for
    costs; the module says which direction is good in ``note``)."""

    name: str
    value: float
    unit: str
    floor: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.floor is None or self.floor == 0:
            return None
        return self.value / self.floor


def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """Run ``fn`` (which returns a duration) ``repeats`` times; return the smallest result."""
    results = []
    for _ in range(repeats):
        gc.collect()
        results.append(fn())
    return min(results)


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn()`` took (perf_counter)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def print_table(metrics: list[Metric]) -> None:
    """Print metrics as an aligned table: metric, value, floor, ratio."""
    rows = [("metric", "value", "floor", "ratio", "note")]
    for m in metrics:
        rows.append(
            (
                m.name,
                f"{m.value:,.2f} {m.unit}",
                "-" if m.floor is None else f"{m.floor:,.2f} {m.unit}",
                "-" if m.ratio is None else f"{m.ratio:.2f}x",
                m.note,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + ("  " + r[4] if r[4] else ""))
