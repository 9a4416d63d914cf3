"""Counting schedule points: how often tasks yield to trio's scheduler inside a block.

``trio.testing.assert_checkpoints`` tells whether a block yielded at all; a hot path's cost is
also how *many* times it yields (each costs a trip through the scheduler), which
:func:`count_schedule_points` measures deterministically, with no clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import final

import trio

__all__ = ["ScheduleCount", "count_schedule_points"]


@final
class ScheduleCount(trio.abc.Instrument):
    """The task steps counted by :func:`count_schedule_points` so far.

    Attributes:
        steps: Task steps of the counted tasks since the block began (a task that yields once
            and resumes counts one step).
    """

    def __init__(self, task: trio.lowlevel.Task | None) -> None:
        self._task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self._task is None or task is self._task:
            self.steps += 1


@contextlib.contextmanager
def count_schedule_points(*, all_tasks: bool = False) -> Iterator[ScheduleCount]:
    """Count how often the current task (or, with ``all_tasks=True``, every task) is stepped
    by the scheduler inside the block::

        with count_schedule_points() as count:
            await tools.execute(invocation)
        assert count.steps == 0
    """
    count = ScheduleCount(None if all_tasks else trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(count)
    try:
        yield count
    finally:
        trio.lowlevel.remove_instrument(count)
