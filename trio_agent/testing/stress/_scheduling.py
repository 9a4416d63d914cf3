"""Deterministic trio scheduling: seed the generator trio shuffles each batch of runnable tasks with.

trio runs the tasks that became runnable in one scheduler pass as a *batch*, in a random order
(so no code comes to rely on scheduling order). The order comes from one module-level
``random.Random`` in ``trio._core._run``. When trio's Hypothesis integration is active it also
sorts each batch by spawn order before shuffling, which makes the order a pure function of that
generator's state. This module turns both on for the duration of a run and seeds the generator,
so a run under :class:`trio.testing.MockClock` replays exactly (as long as no thread, process or
socket feeds it outside events).

Both hooks are trio internals. They are checked for when a run starts, and the trio versions the
kit was verified with are pinned in :data:`TESTED_TRIO`; ``tests/stress`` proves that runs are
still deterministic on the installed trio.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import trio

__all__ = ["TESTED_TRIO", "can_seed_scheduler", "scheduler_note", "seeded_scheduler"]

#: The trio versions (``(major, minor)``, inclusive) whose scheduler the kit was verified to seed.
TESTED_TRIO: tuple[tuple[int, int], tuple[int, int]] = ((0, 30), (0, 35))


def _trio_version() -> tuple[int, int]:
    major, minor = trio.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def _run_module() -> Any:
    from trio._core import _run  # the one trio internal this module touches

    return _run


def can_seed_scheduler() -> bool:
    """Whether this trio has the scheduler hooks :func:`seeded_scheduler` needs."""
    run = _run_module()
    return isinstance(getattr(run, "_r", None), random.Random) and hasattr(
        run, "_ALLOW_DETERMINISTIC_SCHEDULING"
    )


def scheduler_note() -> str | None:
    """Why runs on this trio may not replay exactly, or ``None`` (for reports)."""
    if not can_seed_scheduler():
        return (
            f"trio {trio.__version__} has no seedable scheduler (trio._core._run._r and "
            "_ALLOW_DETERMINISTIC_SCHEDULING are gone): runs are explored but not replayable"
        )
    low, high = TESTED_TRIO
    if not low <= _trio_version() <= high:
        return (
            f"trio {trio.__version__} is outside the versions the kit was verified with "
            f"({low[0]}.{low[1]} to {high[0]}.{high[1]}); determinism is still checked per run"
        )
    return None


@contextlib.contextmanager
def seeded_scheduler(seed: int) -> Iterator[None]:
    """Make trio's batch order a function of ``seed`` until the block exits (then restore it).

    Not thread-safe: the generator is process-wide, so run one seeded trio loop at a time.
    """
    if not can_seed_scheduler():
        yield
        return
    run = _run_module()
    generator: random.Random = run._r
    state = generator.getstate()
    flag = run._ALLOW_DETERMINISTIC_SCHEDULING
    run._ALLOW_DETERMINISTIC_SCHEDULING = True
    generator.seed(seed)
    try:
        yield
    finally:
        run._ALLOW_DETERMINISTIC_SCHEDULING = flag
        generator.setstate(state)
