"""``ReactLoopAgent``: the concrete agent, a facade over its control, driver and host."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal, final

from ..agent import AgentOptions, AgentStatus, MessageContent, MessageQueued, to_user_message
from ..ids import AgentId, MessageId
from ..llm import LlmCallConfig, MessageSource
from ..runtime import Context, Disposer
from ..session import ContextMessageEvent, Session
from ._control import AgentControl
from ._driver import Driver, SharedServices
from ._host import AgentHost

__all__ = ["ReactLoopAgent"]

logger = logging.getLogger("trio_agent.loop")


@final
class ReactLoopAgent:
    """The concrete :class:`~trio_agent.agent.Agent`: call the model, run the tools, repeat.

    Create one with ``ctx.agent_loop.create(...)`` or ``await ctx.agents.create(...)``; never
    construct it directly. Everything it does is visible as session events and ``agent/*``
    events.

    The agent is a facade: its state (status, inbox, cancel marker, phase scope) has one owner,
    the package-internal ``AgentControl``; the loop is the driver (``trio_agent.loop._driver``);
    the lifecycle is the host (``trio_agent.loop._host``): the agent lives in a *host task* in
    its owner fiber's nursery, and its teardown order is written as nesting there::

        unwind the agent scope          (outermost: agent.ctx registrations, LIFO)
          detach the session            (session/disposed)
            unregister                  (agent/status "disposed", agent/disposed)
              stop the agent's tasks    (agent.ctx.start_soon tasks)
                stop / drain the loop   (the running turn ends "disposed", its flush awaited)
    """

    def __init__(
        self,
        *,
        agent_id: AgentId,
        session: Session,
        ctx: Context,
        options: AgentOptions,
        source: Literal["startup", "resume"],
        seed_config: Callable[[], LlmCallConfig],
        max_parallel_tool_calls: int,
        shared: SharedServices,
    ) -> None:
        """Internal: built by ``AgentLoop``, which publishes it through :meth:`start`."""
        self._id = agent_id
        self._session = session
        self._ctx = ctx
        self._options = options
        self._control = AgentControl(self, ctx)
        driver = Driver(
            self,
            self._control,
            source=source,
            seed_config=seed_config,
            max_parallel_tool_calls=max_parallel_tool_calls,
            shared=shared,
        )
        self._host = AgentHost(self, self._control, driver)

    def __repr__(self) -> str:
        return f"<ReactLoopAgent {self._id} {self._control.status} session={self._session.id}>"

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
        return self._control.status

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
        self._control.check_open()
        message = to_user_message(content, source or "user")
        self._control.enqueue(message)
        self._ctx.emit("agent/queued", MessageQueued(self, message, steering=False))
        return message.id

    def steer(self, content: MessageContent) -> MessageId:
        """Add a message to the running turn, taken between steps (like :meth:`send` when idle).

        A steered message earns the turn another step. Steering left when a turn ends normally
        opens the next turn; after a terminal stop (``agent/turn-stop``) it is dropped.
        """
        if self._control.status != "running":
            return self.send(content, source="user")
        self._control.check_open()
        message = to_user_message(content, "steering")
        self._control.inbox.steer(message)
        self._ctx.emit("agent/queued", MessageQueued(self, message, steering=True))
        return message.id

    def inject(self, content: MessageContent) -> MessageId:
        """Add context without starting a turn; the next model request contains it.

        While idle it is logged at once as ``context/message``; during a turn it is logged at the
        next step boundary (so it never splits a tool call from its result).
        """
        self._control.check_open()
        message = to_user_message(content, "context")
        if self._control.status == "running":
            self._control.inbox.inject(message)
        else:
            self._session.append(ContextMessageEvent(turn=self._session.last_turn, message=message))
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
        self._control.request_cancel()

    async def wait_idle(self) -> None:
        """Wait until no turn runs and nothing is queued, or the agent is disposed."""
        await self._control.wait_idle()

    # --- lifecycle --------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Dispose the agent: stop/drain → unregister → detach session → unwind scope.

        Idempotent; every caller waits for the one teardown. A running turn ends ``disposed``.
        Called from one of the agent's own tasks (a tool, a listener running in its loop) it
        only requests the close, because waiting would wait for itself.
        """
        await self._host.aclose()

    def start(self, owner: Context, registration: Disposer, closing: Sequence[Disposer]) -> None:
        """Package-internal (``AgentLoop`` calls it once, after publishing the agent): run the
        agent in ``owner``'s nursery; see ``AgentHost.start``."""
        self._host.start(owner, registration, closing)

    def discard(self) -> None:
        """Package-internal: roll back an agent ``AgentLoop`` failed to publish."""
        self._host.discard()

    async def adiscard(self) -> None:
        """Package-internal: roll back an agent whose setup or publication failed."""
        await self._host.adiscard()
