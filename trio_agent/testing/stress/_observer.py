"""The run's trio instrument: schedule points, task ownership, cancel delivery and hangs."""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from typing import final

import trio
import trio.testing

from ._records import RunRecord

__all__ = ["Observer"]

#: trio's system task that runs ``TrioToken.run_sync_soon`` callbacks: worker threads (and
#: signal handlers) report back through it, so its steps mean events from outside the run.
_ENTRY_QUEUE_TASK = "<TrioToken.run_sync_soon task>"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_TRIO_DIR = os.path.dirname(trio.__file__)


def _name(task: trio.lowlevel.Task) -> str:
    return _ADDRESS.sub("", task.name)


def io_waiters(stats: object) -> int:
    """Tasks waiting for real I/O, leaving out trio's own wake-up socket reader."""
    names = ("tasks_waiting_read", "tasks_waiting_write", "tasks_waiting", "monitors")
    return max(0, sum(int(getattr(stats, name, 0) or 0) for name in names) - 1)


@final
class Observer(trio.abc.Instrument):
    """Counts the schedule points of the harness's tasks and watches the run.

    * A *schedule point* is one step of a task the run's main task owns (directly, or through
      the runtime's nurseries), or a moment where every task is blocked (the clock is about to
      jump: a tool sleeping, a model hanging), counted while :attr:`counting` is on.
      ``on_point(n)`` is called right before the n-th one, so an action taken there lands
      between two steps, or while everything waits.
    * Tasks spawned in ``kit_nurseries`` (the kit's own helpers) are neither counted nor
      reported as left over, and their steps are not activity (for idle points and hangs).
    * While :attr:`acting` is on, or while :attr:`acting_task` runs, every task that gets
      rescheduled is noted in :attr:`deliveries`: an action that cancels a scope reschedules
      exactly the blocked tasks it delivers ``trio.Cancelled`` to.
    * Before the scheduler waits for I/O it checks for a hang: nothing runnable (but kit
      tasks), no deadline that can arrive, no I/O, no worker thread, for ``hang_grace`` wall
      seconds. Then it calls ``on_hang(description)``.
    """

    def __init__(self, record: RunRecord, clock: trio.testing.MockClock) -> None:
        self.record = record
        self.clock = clock
        self.main: trio.lowlevel.Task | None = None
        self.kit_nurseries: set[trio.Nursery] = set()
        self._kit_tasks: set[trio.lowlevel.Task] = set()
        self.counting = False
        self.on_point: Callable[[int], None] | None = None
        self.on_hang: Callable[[str], None] | None = None
        #: Whether virtual time moves when everything waits (else a deadline never arrives).
        self.clock_running: Callable[[], bool] = lambda: True
        self.acting = False
        self.acting_task: trio.lowlevel.Task | None = None
        self.deliveries: dict[trio.lowlevel.Task, int] = {}
        self.hang_grace = 0.5
        self._counted: set[trio.lowlevel.Task] = set()
        self._spawned: dict[trio.lowlevel.Task, None] = {}
        self._idle_since: float | None = None
        self._idle_counted = False
        self._entry_queue_steps = 0
        self._main_done = False

    # --- tasks ------------------------------------------------------------------------------

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if self.main is None:  # trio's own tasks, spawned before the run's main task runs
            return
        nursery = task.parent_nursery
        if nursery in self.kit_nurseries:
            self._kit_tasks.add(task)
            return
        parent = None if nursery is None else nursery.parent_task
        if parent is self.main or parent in self._counted:
            self._counted.add(task)
        self._spawned[task] = None

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._kit_tasks.discard(task)
        if task is self.main:
            self.main = None
            self._main_done = True
        self._counted.discard(task)
        self._spawned.pop(task, None)
        self.deliveries.pop(task, None)

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if self.acting:
            self.deliveries[task] = self.deliveries.get(task, 0) + 1

    def _point(self, name: str) -> None:
        record = self.record
        record.points += 1
        record.trace.append(name)
        if self.on_point is not None:
            self.on_point(record.points)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.acting_task:
            self.acting = True
        if task in self._kit_tasks:
            return
        self._idle_since = None
        self._idle_counted = False
        if task in self._counted:
            if self.counting:
                self._point(_name(task))
        elif task.name == _ENTRY_QUEUE_TASK:
            # Its first step starts it; any later one (before shutdown) runs a callback that a
            # worker thread or a signal handler queued.
            self._entry_queue_steps += 1
            if self._entry_queue_steps > 1 and not self._main_done:
                self.record.threads_used = True

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.acting_task:
            self.acting = False

    def left(self) -> list[str]:
        """The names of the tasks spawned during the run that are still alive."""
        return [_name(task) for task in self._spawned]

    # --- hangs ------------------------------------------------------------------------------

    def before_io_wait(self, timeout: float) -> None:
        stats = trio.lowlevel.current_statistics()
        if self.counting and not stats.tasks_runnable and not self._idle_counted:
            self._idle_counted = True
            self._point("<idle>")
            stats = trio.lowlevel.current_statistics()
        if io_waiters(stats.io_statistics):
            self.record.io_used = True
            self._idle_since = None
            return
        if (
            stats.tasks_runnable
            or stats.run_sync_soon_queue_size
            or (stats.seconds_to_next_deadline != math.inf and self.clock_running())
            or trio.to_thread.current_default_thread_limiter().borrowed_tokens
        ):
            self._idle_since = None
            return
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        elif now - self._idle_since >= self.hang_grace and self.on_hang is not None:
            self.on_hang(self._describe())

    def _describe(self) -> str:
        stuck = []
        for task in [*self._spawned, self.main]:
            if task is None:
                continue
            frames = [
                (frame, line)
                for frame, line in task.iter_await_frames()
                if not frame.f_code.co_filename.startswith(_TRIO_DIR)
            ]
            if frames:
                frame, line = frames[-1]
                where = f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{line})"
            else:
                where = "trio"
            stuck.append(f"{_name(task)!r} waits in {where}")
        return (
            "every task is blocked and nothing can wake one (no deadline, I/O or thread): "
            + "; ".join(stuck)
        )
