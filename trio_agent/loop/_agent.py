"""``ReactLoopAgent``: the concrete agent, its inbox and its structural teardown."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Literal, final

import trio

from ..agent import (
    AgentClosedError,
    AgentOptions,
    AgentStatus,
    MessageContent,
    MessageQueued,
    StatusChanged,
    to_user_message,
)
from ..ids import AgentId, MessageId
from ..llm import LlmCallConfig, MessageSource
from ..runtime import Context, Disposer
from ..session import ContextMessageEvent, Session
from ._driver import CLOSE_BUDGET, Driver
from ._inbox import Inbox

if TYPE_CHECKING:
    from ._service import AgentLoop

__all__ = ["ReactLoopAgent"]

logger = logging.getLogger("trio_agent.loop")


@final
class ReactLoopAgent:
    """The concrete :class:`~trio_agent.agent.Agent`: call the model, run the tools, repeat.

    Create one with ``ctx.agent_loop.create(...)`` or ``await ctx.agents.create(...)``; never
    construct it directly. Everything it does is visible as session events and ``agent/*``
    events; the loop itself is in ``trio_agent.loop._driver``.

    Lifecycle: the agent lives in a *host task* in its owner fiber's nursery. Its teardown is
    written as nesting in :meth:`_host`, so the order cannot drift::

        unwind the agent scope          (outermost: agent.ctx registrations, LIFO)
          detach the session            (session/disposed)
            unregister                  (agent/status "disposed", agent/disposed)
              stop / drain the loop     (the running turn ends "disposed", its flush awaited)
    """

    def __init__(
        self,
        *,
        loop: AgentLoop,
        agent_id: AgentId,
        session: Session,
        ctx: Context,
        options: AgentOptions,
        source: Literal["startup", "resume"],
    ) -> None:
        self._loop = loop
        self._id = agent_id
        self._session = session
        self._ctx = ctx
        self._options = options
        self._source: Literal["startup", "resume"] = source
        self._max_parallel_tool_calls = loop.config.max_parallel_tool_calls
        self._inbox = Inbox()
        self._status: AgentStatus = "idle"
        self._changed = trio.Event()
        #: The driver is parked in its idle wait.
        self._parked = False
        #: Set by cancel(); checked at the four points; reset once per loop iteration.
        self._marker = False
        self._phase_scope: trio.CancelScope | None = None
        #: Close requested: the driver stops after the current turn (which ends "disposed").
        self._closing = False
        self._host_done = trio.Event()
        self._host_started = False
        self._host_task: trio.lowlevel.Task | None = None
        self._registration: Disposer | None = None
        self._closing_effect: Disposer | None = None
        self._driver = Driver(self)

    def __repr__(self) -> str:
        return f"<ReactLoopAgent {self._id} {self._status} session={self._session.id}>"

    # --- the Agent protocol -----------------------------------------------------------------

    @property
    def id(self) -> AgentId:
        """The agent id."""
        return self._id

    @property
    def session(self) -> Session:
        """The session this agent writes."""
        return self._session

    @property
    def status(self) -> AgentStatus:
        """``"idle"``, ``"running"`` or ``"disposed"``."""
        return self._status

    @property
    def options(self) -> AgentOptions:
        """The frozen options the agent was created with."""
        return self._options

    @property
    def ctx(self) -> Context:
        """The agent scope: registrations through it apply to this agent only."""
        return self._ctx

    def send(self, content: MessageContent, *, source: MessageSource | None = None) -> MessageId:
        """Queue a prompt; it starts a turn when the agent is idle, else the next one.

        Prompts queued while a turn runs are batched into the next turn.
        """
        self._check_open()
        message = to_user_message(content, source or "user")
        self._inbox.enqueue(message)
        self._ctx.emit("agent/queued", MessageQueued(self, message, steering=False))
        self._notify()
        return message.id

    def steer(self, content: MessageContent) -> MessageId:
        """Add a message to the running turn, taken between steps (like :meth:`send` when idle).

        A steered message earns the turn another step. Steering left when a turn ends normally
        opens the next turn; after a terminal stop (``agent/turn-stop``) it is dropped.
        """
        if self._status != "running":
            return self.send(content, source="user")
        self._check_open()
        message = to_user_message(content, "steering")
        self._inbox.steer(message)
        self._ctx.emit("agent/queued", MessageQueued(self, message, steering=True))
        return message.id

    def inject(self, content: MessageContent) -> MessageId:
        """Add context without starting a turn; the next model request contains it.

        While idle it is logged at once as ``context/message``; during a turn it is logged at the
        next step boundary (so it never splits a tool call from its result).
        """
        self._check_open()
        message = to_user_message(content, "context")
        if self._status == "running":
            self._inbox.inject(message)
        else:
            self._session.append(
                ContextMessageEvent.event_type,
                ContextMessageEvent(turn=self._session.last_turn, message=message),
            )
        return message.id

    def cancel(self, reason: str | None = None) -> None:
        """Stop the running turn: it ends ``aborted``; queued prompts and steering are dropped.

        Safe to call at any time and from any task (it never blocks). A cancel while idle only
        clears the queue; one cancel governs at most one turn and never leaks onto a later
        prompt. The in-flight model stream and tool bodies are cancelled through trio; partial
        visible text is kept as an interrupted ``assistant/message``, unstarted tool calls get
        synthetic results, and ``step/end``, ``turn/end`` and the flush still happen.
        """
        if reason:
            logger.info("agent %r: cancel requested (%s)", self._id, reason)
        self._inbox.clear()
        self._marker = True
        if self._phase_scope is not None:
            self._phase_scope.cancel()
        self._notify()

    async def wait_idle(self) -> None:
        """Wait until no turn runs and nothing is queued, or the agent is disposed."""
        while not self._quiescent():
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    # --- lifecycle --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Dispose the agent: stop/drain → unregister → detach session → unwind scope.

        Idempotent; every caller waits for the one teardown. A running turn ends ``disposed``.
        Called from one of the agent's own tasks (a tool, a listener running in its loop) it
        only requests the close, because waiting would wait for itself.
        """
        self._request_close()
        if not self._host_started:
            await trio.lowlevel.checkpoint()
            return
        if self._in_own_task():
            await trio.lowlevel.checkpoint()
            return
        await self._host_done.wait()

    def _request_close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self.cancel()
        self._inbox.wake()

    def _check_open(self) -> None:
        if self._closing:
            raise AgentClosedError(
                f"agent {self._id!r} is {'disposed' if self._status == 'disposed' else 'closing'}; "
                "create a new agent (or resume its session) to continue"
            )

    def _discard_unpublished(self) -> None:
        """Roll back an agent whose publication failed (synchronous create path)."""
        self._forget_unpublished()
        self._ctx.fiber.discard()

    async def _discard_unpublished_async(self) -> None:
        """Roll back an agent whose setup or publication failed."""
        self._forget_unpublished()
        await self._ctx.fiber.dispose()

    def _forget_unpublished(self) -> None:
        self._closing = True
        self._status = "disposed"
        if self._session.live:
            self._ctx.sessions.detach(self._session)

    def start(self, owner: Context, registration: Disposer, closing: Disposer) -> None:
        """Hand the published agent to its host task in ``owner``'s nursery (package-internal).

        ``registration`` unregisters it; ``closing`` is the owner's effect that closes it, released
        once the agent is gone so a long-lived owner does not accumulate them.
        """
        self._registration = registration
        self._closing_effect = closing
        owner.start_soon(self._host, name=f"agent {self._id}")
        self._host_started = True

    async def _host(self) -> None:
        self._host_task = trio.lowlevel.current_task()
        try:
            async with self._scope_unwound():
                with self._session_detached(), self._unregistered():
                    await self._driver.run()
        finally:
            if self._closing_effect is not None:
                self._closing_effect.release()
            self._host_done.set()

    @contextlib.asynccontextmanager
    async def _scope_unwound(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with trio.move_on_after(CLOSE_BUDGET) as budget:
                budget.shield = True
                await self._ctx.fiber.dispose()

    @contextlib.contextmanager
    def _session_detached(self) -> Iterator[None]:
        try:
            yield
        finally:
            self._ctx.sessions.detach(self._session)

    @contextlib.contextmanager
    def _unregistered(self) -> Iterator[None]:
        try:
            yield
        finally:
            self._closing = True
            self._set_status("disposed")
            if self._registration is not None:
                self._registration()

    def _in_own_task(self) -> bool:
        """Whether the current task is the host task or runs in a nursery below it."""
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            if task is self._host_task:
                return True
            nursery = task.parent_nursery
            task = nursery.parent_task if nursery is not None else None
        return False

    # --- status and notifications -----------------------------------------------------------

    def _close_requested(self) -> bool:
        """Whether a close was requested (a method, for the same reason as the next one)."""
        return self._closing

    def _cancel_requested(self) -> bool:
        """The turn-scoped cancel marker (a method, so checks after an await are not "narrowed")."""
        return self._marker

    def _set_status(self, status: AgentStatus) -> None:
        if status == self._status or self._status == "disposed":
            return
        self._status = status
        self._ctx.emit("agent/status", StatusChanged(self, status))
        self._notify()

    def _settle(self) -> None:
        """After a turn (or a dropped one): go idle unless more is queued or the agent closes
        (then the status goes straight from running to disposed)."""
        if not self._inbox.queued and not self._closing:
            self._set_status("idle")

    def _quiescent(self) -> bool:
        return self._status == "disposed" or (
            self._parked and not self._inbox.queued and self._status == "idle"
        )

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # --- model selection --------------------------------------------------------------------

    def _seed_config(self) -> LlmCallConfig:
        """The call config before ``agent/request``: options, then the loop's defaults."""
        return self._loop.seed_config(self._options)
