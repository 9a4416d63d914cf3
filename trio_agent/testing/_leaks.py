"""A leak check for trio tasks: nothing a block started may outlive it.

Structured concurrency makes a nursery wait for its children, so a task can only outlive the code
that started it by escaping to a nursery that lives longer: a system task
(``trio.lowlevel.spawn_system_task``), a nursery handed in from outside, or one held by an object
nobody closed. :func:`assert_no_leaked_tasks` catches exactly those.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import final

import attrs
import trio

from ..errors import TrioAgentError

__all__ = ["TaskLeakCheck", "TaskLeakError", "assert_no_leaked_tasks"]


class TaskLeakError(TrioAgentError, AssertionError):
    """Tasks started inside :func:`assert_no_leaked_tasks` were still running when it exited.

    Attributes:
        tasks: The leaked tasks, in the order they were spawned.
    """

    def __init__(self, tasks: list[trio.lowlevel.Task]) -> None:
        self.tasks = tasks
        names = ", ".join(_describe(task) for task in tasks)
        super().__init__(
            f"{len(tasks)} task(s) started inside the checked block still run after it exited: "
            f"{names}; expected every task to end before the block does - start it in a "
            "nursery the block owns, or close (aclose) the object that started it"
        )


def _describe(task: trio.lowlevel.Task) -> str:
    nursery = task.parent_nursery
    owner = "no nursery" if nursery is None else f"a nursery of {nursery.parent_task.name!r}"
    return f"{task.name!r} (in {owner})"


@final
@attrs.define(eq=False)
class TaskLeakCheck(trio.abc.Instrument):
    """The instrument behind :func:`assert_no_leaked_tasks`, which yields it.

    A task counts if it is spawned while the check is installed, by the checking task or a
    counted task, or into a nursery that a counted task owns or that the checking task opened
    inside the block. So tasks that other code starts into the block's nurseries count, and tasks
    that unrelated tasks start elsewhere meanwhile (other pytest-trio fixtures, say) do not.

    Attributes:
        owner: The checking task (the one that entered :func:`assert_no_leaked_tasks`).
    """

    owner: trio.lowlevel.Task
    # Counted tasks still running; a dict keeps spawn order for the error message.
    _live: dict[trio.lowlevel.Task, None] = attrs.field(init=False, factory=dict)
    # The owner's nurseries opened before the block: strangers may start tasks there.
    _outer_nurseries: frozenset[trio.Nursery] = attrs.field(init=False)

    @_outer_nurseries.default
    def _owner_nurseries_now(self) -> frozenset[trio.Nursery]:
        return frozenset(self.owner.child_nurseries)

    @property
    def live(self) -> list[trio.lowlevel.Task]:
        """The counted tasks that are still running, in spawn order."""
        return list(self._live)

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        """Count ``task`` if whoever spawned it, or the nursery it joins, is counted."""
        try:
            spawner: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        except RuntimeError:  # spawned by the run loop itself, outside any task
            spawner = None
        nursery = task.parent_nursery
        joins_ours = (
            nursery is not None
            and nursery not in self._outer_nurseries
            and self._counts(nursery.parent_task)
        )
        if joins_ours or self._counts(spawner):
            self._live[task] = None

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        """Forget ``task``: it ended."""
        self._live.pop(task, None)

    def _counts(self, task: trio.lowlevel.Task | None) -> bool:
        return task is self.owner or task in self._live


@contextlib.contextmanager
def assert_no_leaked_tasks() -> Iterator[TaskLeakCheck]:
    """Fail if a task started inside the block is still running when the block exits.

    Use it around anything that owns tasks, in any trio task::

        with assert_no_leaked_tasks():
            async with open_runtime() as ctx:
                ...

    Which tasks count is described on :class:`TaskLeakCheck` (the object this yields; its
    :attr:`~TaskLeakCheck.live` shows the counted tasks running now). A task that was cancelled
    but has not run yet to finish still counts as running: whoever cancelled it should have
    waited for it.

    The check runs only when the block exits normally, so that it never hides the block's own
    exception. Threads are not tasks: a thread left behind by
    ``trio.to_thread.run_sync(abandon_on_cancel=True)`` is not detected.

    Raises:
        TaskLeakError: counted tasks were still running (an ``AssertionError``, so pytest
            reports it as a failed assertion).
        RuntimeError: not called inside a trio task.
    """
    check = TaskLeakCheck(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(check)
    try:
        yield check
    finally:
        # Trio drops an instrument that raised; removing it again is harmless.
        with contextlib.suppress(KeyError):
            trio.lowlevel.remove_instrument(check)
    leaked = check.live
    if leaked:
        raise TaskLeakError(leaked)
