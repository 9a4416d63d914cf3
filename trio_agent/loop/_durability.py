"""When the loop makes the session durable: its durability points (package-internal).

With ``AgentOptions.durability == "step"`` (the default) the driver flushes the session

* once the turn's prompts are accepted (``turn/start`` and the ``user/message`` s are on disk
  before the first model call),
* at every ``step/end`` after which the turn goes on (the last one goes out with the turn end),
* right before the body of a tool that may have effects runs, after ``tools/pre-execute``,
  approval and the guards allowed it (write-ahead: its ``tool/call`` is on disk before the side
  effect happens; the tools layer awaits :attr:`Durability.write_ahead` there),

besides the flush at every turn end. ``"turn"`` keeps only the turn-end flush.

Flushes are coalesced: one that finds every event logged so far already durable only
checkpoints, and one that waits for a flush in flight re-checks afterwards, so the calls of a
batch of concurrency-safe tools started together share one write-ahead flush. With nothing
listening to ``session/flush`` (no persistence mounted) a durability point does nothing, not
even a checkpoint (#17): the loop's own cancellation points are the model call and the tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, final

import trio

from .._locking import held
from ..session import Session, SessionStore

__all__ = ["Durability"]


@final
class Durability:
    """Flushes one agent's session at the durability points (see the module docs)."""

    __slots__ = ("_durable", "_hears", "_lock", "_session", "_sessions", "by_step")

    def __init__(
        self,
        sessions: SessionStore,
        session: Session,
        mode: Literal["step", "turn"],
        hears: Callable[[str], bool],
    ) -> None:
        self._sessions = sessions
        #: ``ctx.hears`` of the agent's context.
        self._hears = hears
        self._session = session
        #: Whether the step-level points apply (``"step"``), or only the turn end (``"turn"``).
        self.by_step = mode == "step"
        #: How many of the session's events a finished flush has made durable.
        self._durable = 0
        #: Built by the first flush that has work: an agent with no persistence never needs it.
        self._lock: trio.Lock | None = None

    @property
    def flushes(self) -> bool:
        """Whether a flush can have work: something listens to ``session/flush``."""
        return self._hears("session/flush")

    async def flush(self) -> None:
        """Make every event logged so far durable (at once if a flush already did).

        Raises:
            Exception: what ``sessions.flush`` raised (a persistence failure).
        """
        if not self._hears("session/flush"):
            return  # nothing would make the events durable
        target = len(self._session.events)
        if self._durable >= target:
            await trio.lowlevel.checkpoint()
            return
        if self._lock is None:
            self._lock = trio.Lock()
        waited = self._lock.locked()
        # Free, the lock is taken without a schedule point (#17): the store's flush is the
        # checkpoint.
        async with held(self._lock):
            if waited and self._durable >= target:  # the flush this one waited for covered it
                return
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        end = len(self._session.events)
        await self._sessions.flush(self._session)
        self._durable = max(self._durable, end)

    @property
    def write_ahead(self) -> Callable[[], Awaitable[None]] | None:
        """The hook the tool pipeline awaits before a body with effects runs
        (``ToolInvocation.before_effects``); ``None`` in ``"turn"`` mode."""
        return self.flush if self.by_step else None
