"""The agent's mutable state and its one owner, :class:`AgentControl` (package-internal)."""

from __future__ import annotations

from typing import final

import trio

from ..agent import Agent, AgentClosedError, AgentStatus, StatusChanged
from ..llm import Message
from ..runtime import Context
from ._inbox import Inbox

__all__ = ["AgentControl"]


@final
class AgentControl:
    """Everything about one agent that changes while it lives, behind public methods.

    The status, the inbox, the turn-scoped cancel marker, the cancel scope of the running phase,
    the closing and parked flags and the change notification ``wait_idle`` sleeps on. The facade
    (:class:`~trio_agent.loop.ReactLoopAgent`) turns the public verbs into requests here; the
    driver and the tool-call runner read the flags and move the status. No other object writes
    this state.

    The driver's check points are properties read once per decision (:attr:`cancel_requested`,
    :attr:`closing`, :attr:`stopping`); a check that must see a change made by an ``await`` in
    between is a new read in a new statement, so nothing depends on an earlier reading.
    """

    __slots__ = (
        "_agent",
        "_cancel_marker",
        "_changed",
        "_closing",
        "_ctx",
        "_inbox",
        "_parked",
        "_phase_scope",
        "_status",
    )

    def __init__(self, agent: Agent, ctx: Context) -> None:
        #: The payload of the ``agent/*`` events this object emits.
        self._agent = agent
        self._ctx = ctx
        self._inbox = Inbox()
        self._status: AgentStatus = "idle"
        #: Built by the first ``wait_idle`` caller (most agents are never waited on twice).
        self._changed: trio.Event | None = None
        #: The driver is parked in its idle wait.
        self._parked = False
        #: Set by a cancel; checked at the four points; reset once per loop iteration.
        self._cancel_marker = False
        #: The cancel scope of the running phase (prompt submission or a step).
        self._phase_scope: trio.CancelScope | None = None
        #: Close requested: the driver stops after the current turn (which ends "disposed").
        self._closing = False

    # --- reading ----------------------------------------------------------------------------

    @property
    def inbox(self) -> Inbox:
        """Queued prompts, steering and injected context."""
        return self._inbox

    @property
    def status(self) -> AgentStatus:
        """``"idle"``, ``"running"`` or ``"disposed"``."""
        return self._status

    @property
    def cancel_requested(self) -> bool:
        """The turn-scoped cancel marker: a cancel arrived since the loop iteration began."""
        return self._cancel_marker

    @property
    def closing(self) -> bool:
        """A close was requested (or the agent is disposed)."""
        return self._closing

    @property
    def stopping(self) -> bool:
        """The running turn is being stopped: a cancel or a close was requested."""
        return self._cancel_marker or self._closing

    def check_open(self) -> None:
        """Raise :class:`AgentClosedError` once a close was requested."""
        if self._closing:
            state = "disposed" if self._status == "disposed" else "closing"
            raise AgentClosedError(
                f"agent {self._agent.id!r} is {state}; create a new agent (or resume its "
                "session) to continue"
            )

    # --- requests (any task, never blocking) -------------------------------------------------

    def enqueue(self, message: Message) -> None:
        """Queue a prompt for the next turn and wake the driver (and ``wait_idle`` callers)."""
        self._inbox.enqueue(message)
        self.notify()

    def request_cancel(self) -> None:
        """Drop queued prompts and steering, set the marker and cancel the running phase."""
        self._inbox.clear()
        self._cancel_marker = True
        if self._phase_scope is not None:
            self._phase_scope.cancel()
        self.notify()

    def request_close(self) -> None:
        """Cancel, and make the driver stop after the current turn. Idempotent."""
        if self._closing:
            return
        self._closing = True
        self.request_cancel()
        self._inbox.wake()

    def discard(self) -> None:
        """Mark an agent that was never started as disposed (no event: nothing was announced)."""
        self._closing = True
        self._status = "disposed"

    # --- the driver's side ------------------------------------------------------------------

    def begin_iteration(self) -> None:
        """Reset the cancel marker: once per loop iteration, so a cancel governs one turn."""
        self._cancel_marker = False

    async def wait_for_prompts(self) -> bool:
        """Park until a prompt is queued; return ``False`` when the agent closes instead."""
        while not self._inbox.queued and not self._closing:
            self._parked = True
            self.notify()
            try:
                await self._inbox.wait()
            finally:
                self._parked = False
        return not self._closing

    def begin_turn(self) -> bool:
        """The first two check points: unless a cancel arrived right after the idle wait, flip
        to ``running``; return whether the turn starts (an ``agent/status("running")`` listener
        may cancel it, and then no turn runs)."""
        if not self._cancel_marker:
            self.set_status("running")
        if self._cancel_marker:
            self.settle()
            return False
        return True

    def phase(self) -> trio.CancelScope:
        """A fresh cancel scope for one phase of a turn - the prompt submission, or a run of
        steps with nothing awaited between them (already cancelled after a cancel)."""
        scope = trio.CancelScope()
        self._phase_scope = scope
        if self._cancel_marker:
            scope.cancel()
        return scope

    def settle(self) -> None:
        """After a turn (or a dropped one): go idle unless more is queued or the agent closes
        (then the status goes straight from running to disposed)."""
        self._phase_scope = None  # the turn's last scope has exited: an idle agent holds none
        if not self._inbox.queued and not self._closing:
            self.set_status("idle")

    def set_status(self, status: AgentStatus) -> None:
        """Move to ``status`` and emit ``agent/status`` (only on a real change; never after
        ``disposed``)."""
        if status == self._status or self._status == "disposed":
            return
        self._status = status
        self._ctx.emit("agent/status", StatusChanged(self._agent, status))
        self.notify()

    def mark_disposed(self) -> None:
        """The driver is gone: refuse further requests and report ``disposed``."""
        self._closing = True
        self.set_status("disposed")

    # --- waiting ----------------------------------------------------------------------------

    def notify(self) -> None:
        """Wake every :meth:`wait_idle` caller to re-check."""
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def wait_idle(self) -> None:
        """Wait until no turn runs and nothing is queued, or the agent is disposed."""
        while not self._quiescent():
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def _quiescent(self) -> bool:
        return self._status == "disposed" or (
            self._parked and not self._inbox.queued and self._status == "idle"
        )
