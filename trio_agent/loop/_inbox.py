"""The agent's inbox: queued prompts, steering and injected context (package-internal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

import trio

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

    __slots__ = ("_wake", "injected", "queued", "steering")

    def __init__(self) -> None:
        # Lists, not deques: every take is of the whole buffer, and an empty deque costs ~760
        # bytes against a list's 56 (three per agent; #17's memory per agent).
        self.queued: list[Message] = []
        self.steering: list[Message] = []
        self.injected: list[Message] = []
        self._wake = trio.Event()

    def enqueue(self, message: Message) -> None:
        self.queued.append(message)
        self._wake.set()

    def steer(self, message: Message) -> None:
        self.steering.append(message)

    def inject(self, message: Message) -> None:
        self.injected.append(message)

    def requeue_steering(self) -> None:
        """Move leftover steering to the end of ``queued`` (it opens the next turn)."""
        if self.steering:
            self.queued.extend(self.steering)
            self.steering.clear()
            self._wake.set()

    def clear(self) -> None:
        """Drop queued prompts and steering."""
        self.queued.clear()
        self.steering.clear()

    def drop_steering(self) -> None:
        """Drop pending steering (a terminal stop, or the agent closing)."""
        self.steering.clear()

    def take_queued(self) -> list[Message]:
        taken, self.queued = self.queued, []
        return taken

    def take_steering(self) -> Sequence[Message]:
        """The pending steering, emptied (once per step: nothing is allocated when empty)."""
        taken = self.steering
        if not taken:
            return ()
        self.steering = []
        return taken

    def take_injected(self) -> Sequence[Message]:
        taken = self.injected
        if not taken:
            return ()
        self.injected = []
        return taken

    def wake(self) -> None:
        """Wake a waiting driver without queuing anything (used to stop it)."""
        self._wake.set()

    async def wait(self) -> None:
        """Block until :meth:`enqueue`, :meth:`requeue_steering` or :meth:`wake` was called
        since the last wait. Callers re-check their condition in a loop."""
        await self._wake.wait()
        self._wake = trio.Event()
