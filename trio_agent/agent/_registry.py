"""``ctx.agents``: the registry of live agents, the factory seam and owned handles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, final

import trio

from ..ids import AgentId
from ..runtime import Context, Disposer, Service
from ._errors import AgentExistsError, NoAgentFactoryError
from ._events import AgentCreated, AgentDisposed
from ._types import Agent, AgentOptions

if TYPE_CHECKING:
    from ..session import SessionEvent

__all__ = ["AgentFactory", "AgentHandle", "AgentRegistry", "AgentSetup"]

#: Called with the new agent before it is published; it may register scoped tools, listeners,
#: prompt sections through ``agent.ctx``. If it raises, nothing is published and everything it
#: made is rolled back.
AgentSetup = Callable[[Agent], Awaitable[None] | None]


@final
class AgentHandle:
    """Owns one agent's teardown: ``await handle.aclose()`` or ``async with handle:``.

    Teardown always runs stop/drain (the running turn ends ``disposed``, its flush is awaited) →
    unregister (``agent/disposed``) → detach the session → unwind the agent scope. ``aclose`` is
    idempotent and safe to call from several tasks; all of them wait for the one teardown.
    """

    __slots__ = ("_close", "agent")

    def __init__(self, agent: Agent, close: Callable[[], Awaitable[None]]) -> None:
        self.agent = agent
        self._close = close

    def __repr__(self) -> str:
        return f"<AgentHandle {self.agent.id} {self.agent.status}>"

    async def aclose(self) -> None:
        """Dispose the agent (idempotent)."""
        await self._close()

    async def __aenter__(self) -> AgentHandle:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with trio.CancelScope(shield=True):
            await self.aclose()


class AgentFactory(Protocol):
    """What an agent loop plugin implements so ``ctx.agents.create/resume`` can build agents."""

    async def create_agent(
        self,
        owner: Context,
        *,
        agent_id: str,
        session_id: str,
        meta: Mapping[str, Any] | None,
        seed: Sequence[SessionEvent] | None,
        agent_options: AgentOptions | None,
        setup: AgentSetup | None,
    ) -> AgentHandle:
        """Create, set up and publish an agent owned by ``owner``'s fiber."""
        ...

    async def resume_agent(
        self,
        owner: Context,
        *,
        agent_id: str,
        resume_session_id: str,
        agent_options: AgentOptions | None,
        setup: AgentSetup | None,
    ) -> AgentHandle:
        """Load a persisted session and publish an agent continuing it."""
        ...


class AgentRegistry(Service, name="agents"):
    """Tracks live agents so UIs, hooks and orchestrators find them without importing a loop.

    ``register`` is what agent implementations call; ``create``/``resume`` delegate to the
    factory an agent loop plugin installed with ``set_factory``; ``wait_for`` waits for an
    agent someone else creates (a configured agent, a resumed one).
    """

    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)
        self._agents: dict[str, Agent] = {}
        self._factory: list[AgentFactory] = []
        #: One event per agent id someone waits for; ``register`` sets and drops it.
        self._arrivals: dict[str, trio.Event] = {}

    def register(self, agent: Agent) -> Disposer:
        """Publish ``agent`` and emit ``agent/created``; the disposer emits ``agent/disposed``.

        The registration is an effect of the calling context's fiber.

        Raises:
            AgentExistsError: an agent with the same id is live.
        """
        if agent.id in self._agents:
            raise AgentExistsError(
                f"an agent with id {agent.id!r} is already registered; dispose it first or pick "
                "another id"
            )
        self._agents[agent.id] = agent
        arrival = self._arrivals.pop(agent.id, None)
        if arrival is not None:
            arrival.set()
        registry = self._agents

        def unregister() -> None:
            if registry.get(agent.id) is agent:
                del registry[agent.id]
                agent.ctx.emit("agent/disposed", AgentDisposed(agent))

        disposer = self.caller.fiber.add(Disposer(unregister, label=f"agent {agent.id}"))
        agent.ctx.emit("agent/created", AgentCreated(agent))
        return disposer

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with this id, or ``None``."""
        return self._agents.get(agent_id)

    async def wait_for(self, agent_id: str) -> Agent:
        """Wait until an agent with id ``agent_id`` is live; return it.

        Returns at once (after a checkpoint) if it is live already; otherwise it wakes when
        :meth:`register` publishes it. Always a checkpoint. It waits for as long as it takes:
        bound it with :func:`trio.fail_after` or :func:`trio.move_on_after` when the agent
        may never come (a configured agent whose session failed to resume starts no agent).
        """
        await trio.lowlevel.checkpoint()
        while (agent := self._agents.get(agent_id)) is None:
            arrival = self._arrivals.setdefault(agent_id, trio.Event())
            try:
                await arrival.wait()
            finally:
                # The last cancelled waiter takes the event along, so waits that give up
                # leave nothing behind.
                if self._arrivals.get(agent_id) is arrival and not (
                    arrival.is_set() or arrival.statistics().tasks_waiting
                ):
                    del self._arrivals[agent_id]
        return agent

    def list(self) -> tuple[Agent, ...]:
        """Live agents in registration order."""
        return tuple(self._agents.values())

    def set_factory(self, factory: AgentFactory) -> Disposer:
        """Install the factory behind :meth:`create`/:meth:`resume` (one at a time)."""
        if self._factory:
            raise ValueError(
                "an agent factory is already registered; only one agent loop plugin can serve "
                "ctx.agents.create/resume at a time"
            )
        self._factory.append(factory)
        slots = self._factory
        return self.caller.fiber.add(Disposer(slots.clear, label="agent factory"))

    def _require_factory(self) -> AgentFactory:
        if not self._factory:
            raise NoAgentFactoryError(
                "no agent factory registered: mount an agent loop plugin "
                "(trio_agent.loop.AgentLoop) before calling ctx.agents.create/resume"
            )
        return self._factory[0]

    async def create(
        self,
        *,
        agent_id: str,
        session_id: str,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        agent_options: AgentOptions | None = None,
        setup: AgentSetup | None = None,
    ) -> AgentHandle:
        """Create an agent on a fresh session ``session_id``, owned by the calling context.

        ``meta`` goes into the session header, except ``meta["cwd"]`` and
        ``meta["parent_session"]``, which become the header's ``cwd`` and ``parent_session``;
        ``seed`` is the history the session starts from (a fork's prefix).

        ``setup`` runs against the unpublished agent; if it raises, nothing is published, what
        was made is rolled back, and the error propagates.
        """
        return await self._require_factory().create_agent(
            self.caller,
            agent_id=agent_id,
            session_id=session_id,
            meta=meta,
            seed=seed,
            agent_options=agent_options,
            setup=setup,
        )

    async def resume(
        self,
        *,
        agent_id: str,
        resume_session_id: str,
        agent_options: AgentOptions | None = None,
        setup: AgentSetup | None = None,
    ) -> AgentHandle:
        """Load the persisted session ``resume_session_id`` and continue it with a new agent.

        Turn numbering and the derived history continue from the log; a last turn that never
        closed is repaired first. Requires a ``session_persistence`` service.
        """
        return await self._require_factory().resume_agent(
            self.caller,
            agent_id=agent_id,
            resume_session_id=resume_session_id,
            agent_options=agent_options,
            setup=setup,
        )

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents

    def ids(self) -> tuple[AgentId, ...]:
        """Ids of the live agents."""
        return tuple(a.id for a in self._agents.values())
