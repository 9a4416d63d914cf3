"""The agent's lifecycle: its host task and the teardown order, written as nesting (package-internal)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import final

import trio

from ..agent import Agent
from ..runtime import Context, Disposer
from ..session import SessionStore
from ._control import AgentControl
from ._driver import Driver

__all__ = ["AgentHost"]


@final
class AgentHost:
    """Runs one agent's driver in a *host task* in its owner's nursery and tears it down.

    The teardown order is the nesting in :meth:`_run`, so it cannot drift::

        unwind the agent scope          (outermost: agent.ctx registrations, LIFO)
          detach the session            (session/disposed)
            unregister                  (agent/status "disposed", agent/disposed)
              stop the agent's tasks    (agent.ctx.start_soon tasks: background sub-agents)
                stop / drain the loop   (the running turn ends "disposed", its flush awaited)
    """

    __slots__ = (
        "_agent",
        "_closing",
        "_control",
        "_done",
        "_driver",
        "_finished",
        "_registration",
        "_sessions",
        "_started",
        "_task",
    )

    def __init__(self, agent: Agent, control: AgentControl, driver: Driver) -> None:
        self._agent = agent
        self._control = control
        self._driver = driver
        self._sessions = agent.ctx.require(SessionStore)
        #: Built by the first ``aclose`` that has to wait (an agent's teardown is rarely awaited
        #: from outside: #17's memory per agent).
        self._done: trio.Event | None = None
        self._finished = False
        self._started = False
        self._task: trio.lowlevel.Task | None = None
        self._registration: Disposer | None = None
        self._closing: tuple[Disposer, ...] = ()

    def start(self, owner: Context, registration: Disposer, closing: Sequence[Disposer]) -> None:
        """Start the host task in ``owner``'s nursery.

        ``registration`` unregisters the agent; ``closing`` are the effects (of its owner, and of
        the loop) that close it, released once the agent is gone so long-lived owners do not
        accumulate them.
        """
        self._registration = registration
        self._closing = tuple(closing)
        owner.start_soon(self._run, name=f"agent {self._agent.id}")
        self._started = True

    async def aclose(self) -> None:
        """Request the close and wait for the one teardown (see ``ReactLoopAgent.aclose``)."""
        self._control.request_close()
        if not self._started or self._finished or self._in_own_task():
            await trio.lowlevel.checkpoint()
            return
        if self._done is None:
            self._done = trio.Event()
        await self._done.wait()

    def discard(self) -> None:
        """Roll back an agent whose publication failed (synchronous create path)."""
        self._forget_unpublished()
        self._agent.ctx.fiber.discard()

    async def adiscard(self) -> None:
        """Roll back an agent whose setup or publication failed."""
        self._forget_unpublished()
        await self._agent.ctx.fiber.dispose()

    def _forget_unpublished(self) -> None:
        if self._started:
            raise RuntimeError(
                f"agent {self._agent.id!r} is running; close it with aclose(), not a rollback"
            )
        self._control.discard()
        session = self._agent.session
        if session.live:
            self._sessions.detach(session)

    async def _run(self) -> None:
        # Plain try/finally rather than context managers: the nesting is the same, and an idle
        # agent's parked stack holds no generator objects (#17's memory per agent).
        self._task = trio.lowlevel.current_task()
        fiber = self._agent.ctx.fiber
        try:
            try:  # unwind the agent scope
                try:  # detach the session
                    try:  # unregister
                        try:  # stop the agent's tasks
                            await self._driver.run()
                        finally:
                            # While still registered: what those tasks own (sub-agents)
                            # closes before the agent does.
                            await self._shielded(fiber.stop_tasks)
                    finally:
                        self._control.mark_disposed()
                        if self._registration is not None:
                            self._registration()
                finally:
                    self._sessions.detach(self._agent.session)
            finally:
                await self._shielded(fiber.dispose)
        finally:
            for effect in self._closing:
                effect.release()
            self._finished = True
            if self._done is not None:
                self._done.set()

    async def _shielded(self, cleanup: Callable[[], Awaitable[None]]) -> None:
        """Run ``cleanup`` shielded under the teardown budget."""
        with trio.move_on_after(self._agent.ctx.teardown_timeout) as budget:
            budget.shield = True
            await cleanup()

    def _in_own_task(self) -> bool:
        """Whether the current task is the host task or runs in a nursery below it (waiting
        for the teardown there would wait for itself)."""
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            if task is self._task:
                return True
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return False
