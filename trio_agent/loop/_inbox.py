"""The agent's inbox: queued prompts, steering and injected context (package-internal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

import trio

from .._buffers import appended
from ..llm import Message

__all__ = ["Inbox"]


@final
class Inbox:
    """Three FIFOs and a wake-up.

    * ``queued``: prompts for the next turn (several queued prompts are batched into one turn);
    * ``steering``: messages for the running turn, taken between steps;
    * ``injected``: context for the next request that must not start a turn.

    ``cancel()`` clears ``queued`` and ``steering``; injected context is not a prompt and stays.
    """

    __slots__ = ("_signalled", "_waiter", "injected", "queued", "steering")

    def __init__(self) -> None:
        # Lists, not deques: every take is of the whole buffer, and an empty deque costs ~760
        # bytes against a list's 56; and () while empty (trio_agent._buffers). Only these
        # methods write them.
        self.queued: Sequence[Message] = ()
        self.steering: Sequence[Message] = ()
        self.injected: Sequence[Message] = ()
        # The driver parks on its own task, not on a trio.Event: an idle agent (10,000 of them
        # wait here) holds no event object (#17's memory per agent).
        self._waiter: trio.lowlevel.Task | None = None
        self._signalled = False

    def _signal(self) -> None:
        waiter = self._waiter
        if waiter is None:
            self._signalled = True
        else:
            self._waiter = None
            trio.lowlevel.reschedule(waiter)

    def enqueue(self, message: Message) -> None:
        self.queued = appended(self.queued, message)
        self._signal()

    def steer(self, message: Message) -> None:
        self.steering = appended(self.steering, message)

    def inject(self, message: Message) -> None:
        self.injected = appended(self.injected, message)

    def requeue_steering(self) -> None:
        """Move leftover steering to the end of ``queued`` (it opens the next turn)."""
        if self.steering:
            self.queued = [*self.queued, *self.steering]
            self.steering = ()
            self._signal()

    def clear(self) -> None:
        """Drop queued prompts and steering."""
        self.queued = self.steering = ()

    def drop_steering(self) -> None:
        """Drop pending steering (a terminal stop, or the agent closing)."""
        self.steering = ()

    def take_queued(self) -> Sequence[Message]:
        taken, self.queued = self.queued, ()
        return taken

    def take_steering(self) -> Sequence[Message]:
        """The pending steering, emptied (once per step: nothing is allocated when empty)."""
        taken = self.steering
        if taken:
            self.steering = ()
        return taken

    def take_injected(self) -> Sequence[Message]:
        taken = self.injected
        if taken:
            self.injected = ()
        return taken

    def wake(self) -> None:
        """Wake a waiting driver without queuing anything (used to stop it)."""
        self._signal()

    async def wait(self) -> None:
        """Block until :meth:`enqueue`, :meth:`requeue_steering` or :meth:`wake` was called
        since the last wait. Callers re-check their condition in a loop."""
        if self._signalled:
            self._signalled = False
            await trio.lowlevel.checkpoint()
            return
        if self._waiter is not None:
            raise RuntimeError("an agent's inbox has one waiter: its driver")
        self._waiter = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort_wait)

    def _abort_wait(self, _: object) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED
