"""``ctx.agent_loop``: creates ReactLoopAgents, serves ``ctx.agents.create/resume``."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import trio

from ..agent import (
    AgentExistsError,
    AgentHandle,
    AgentOptions,
    AgentRegistry,
    AgentSetup,
    PersistenceUnavailableError,
)
from ..ids import AgentId, validate_session_id
from ..llm import LlmCallConfig, LlmService
from ..persistence import SESSION_PERSISTENCE
from ..prompt import SystemPrompt
from ..runtime import Context, Disposer, Service
from ..session import SessionEvent, SessionHeader, SessionStore, repair_events
from ..tools import ToolRegistry
from ._agent import ReactLoopAgent
from ._driver import SharedServices

__all__ = ["AgentConfig", "AgentLoop"]

logger = logging.getLogger("trio_agent.loop")


@attrs.frozen
class AgentConfig:
    """One configured agent, created when the loop loads.

    ``resume_session_id`` (non-empty) continues that persisted session instead of starting a
    fresh ``{id}-session-{uuid}``; it waits for a ``session_persistence`` service, and a missing,
    unreadable or busy session logs a warning and starts no agent. ``durability`` is
    ``AgentOptions.durability`` (``None``: the default, ``"step"``); ``max_steps`` is
    ``AgentOptions.max_steps``.
    """

    id: str
    provider: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    cwd: str | None = None
    resume_session_id: str | None = None
    durability: Literal["step", "turn"] | None = None
    max_steps: int | None = 50

    @property
    def options(self) -> AgentOptions:
        """The :class:`AgentOptions` this row describes."""
        options = AgentOptions(
            provider=self.provider,
            model=self.model,
            max_tokens=self.max_tokens,
            max_steps=self.max_steps,
        )
        if self.durability is None:
            return options
        return attrs.evolve(options, durability=self.durability)


class AgentLoop(Service, name="agent_loop"):
    """The agent loop plugin: ``ctx.agent_loop.create(...)`` and the factory behind
    ``ctx.agents.create/resume``.

    It registers the ``model`` and ``cwd`` prompt variables (resolved per agent) and creates
    the agents listed in its config when it loads; those are owned by the loop's fiber. Every
    agent it made is closed when the loop unloads, whoever owns it: the loop is the code that
    drives them, and its ``inject`` services are what they run on.
    """

    inject = ("agents", "sessions", "llm", "tools", "system_prompt")

    @attrs.frozen
    class Config:
        """``agents``: rows created at startup; ``provider``/``model``: defaults for agents whose
        options leave them unset; ``max_parallel_tool_calls``: the bound on concurrency-safe tool
        calls running at once."""

        agents: tuple[AgentConfig, ...] = ()
        provider: str | None = None
        model: str | None = None
        max_tokens: int | None = None
        max_parallel_tool_calls: int = attrs.field(default=10, validator=attrs.validators.ge(1))

    config: AgentLoop.Config

    def __init__(self, ctx: Context, config: AgentLoop.Config) -> None:
        super().__init__(ctx, config)
        self._llm = ctx.require(LlmService)
        ctx.require(AgentRegistry).set_factory(self)
        prompt = ctx.require(SystemPrompt)
        self._shared = SharedServices(prompt=prompt, tools=ctx.require(ToolRegistry))
        prompt.variable("model", self._model_variable)
        prompt.variable("cwd", self._cwd_variable)
        for row in config.agents:
            if row.resume_session_id:
                ctx.start_soon(self._resume_configured, row, name=f"resume {row.id}")
            else:
                self.create(row.id, row.options, {"cwd": row.cwd} if row.cwd else None)

    # --- creation ---------------------------------------------------------------------------

    def create(
        self,
        id: str,
        options: AgentOptions | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> ReactLoopAgent:
        """Create an agent on a fresh session ``f"{id}-session-{uuid4()}"``, owned by the calling
        context's fiber (it is disposed when that fiber unloads). Synchronous.

        ``meta`` is stored in the session header; ``meta["cwd"]`` becomes the session's cwd
        and ``meta["parent_session"]`` its ``parent_session``.
        """
        owner = self.caller
        agent = self._prepare(
            owner, id, f"{id}-session-{uuid.uuid4()}", options, "startup", meta=meta
        )
        try:
            self._publish(owner, agent)
        except BaseException:
            agent.discard()
            raise
        return agent

    def _prepare(
        self,
        owner: Context,
        agent_id: str,
        session_id: str,
        options: AgentOptions | None,
        source: Literal["startup", "resume"],
        *,
        meta: Mapping[str, Any] | None = None,
        seed: Sequence[SessionEvent] | None = None,
        header: SessionHeader | None = None,
    ) -> ReactLoopAgent:
        """Build an unpublished agent: its scope and its (unpublished) session.

        The session is prepared through the agent scope, so ``session/*`` events are aimed at
        the agent and listeners registered through ``agent.ctx`` hear them.
        """
        if owner.require(AgentRegistry).get(agent_id) is not None:
            raise AgentExistsError(
                f"an agent with id {agent_id!r} is already live; dispose it first or pick another id"
            )
        scope = owner.scope_context(agent_id)
        try:
            sessions = scope.require(SessionStore)
            if header is not None:
                session = sessions.prepare(session_id, seed=seed, header=header)
            else:
                meta = dict(meta or {})
                cwd = meta.pop("cwd", None)
                parent = meta.pop("parent_session", None)
                session = sessions.prepare(
                    session_id, meta=meta or None, seed=seed, cwd=cwd, parent_session=parent
                )
            return ReactLoopAgent(
                agent_id=AgentId(agent_id),
                session=session,
                ctx=scope,
                options=options or AgentOptions(),
                source=source,
                seed_config=self.seed_source(options or AgentOptions()),
                max_parallel_tool_calls=self.config.max_parallel_tool_calls,
                shared=self._shared,
            )
        except BaseException:
            scope.fiber.discard()
            raise

    def _publish(self, owner: Context, agent: ReactLoopAgent) -> None:
        """Publish session then agent, and hand the agent to its host task in ``owner``.

        The agent is closed by whichever unloads first: its owner, or this loop.
        """
        label = f"agent {agent.id}"
        closing: list[Disposer] = []
        try:
            closing.append(owner.defer(agent.aclose, label=label))
            if owner.fiber is not self.ctx.fiber:
                closing.append(self.ctx.defer(agent.aclose, label=label))
            agent.ctx.require(SessionStore).publish(agent.session)
            registration = owner.require(AgentRegistry).register(agent)
        except BaseException:
            for effect in closing:
                effect.release()
            raise
        agent.start(owner, registration, closing)

    async def _setup_and_publish(
        self, owner: Context, agent: ReactLoopAgent, setup: AgentSetup | None
    ) -> AgentHandle:
        try:
            if setup is not None:
                result = setup(agent)
                if result is not None:
                    await result
            self._publish(owner, agent)
        except BaseException:
            with trio.CancelScope(shield=True):
                await agent.adiscard()
            raise
        return AgentHandle(agent, agent.aclose)

    @contextlib.asynccontextmanager
    async def _claimed(self, owner: Context, session_id: str) -> AsyncIterator[None]:
        """Claim ``session_id`` from the persistence service (if one is mounted) before anything
        is published, and give the claim up again if the body fails (nothing was published).

        Raises:
            SessionBusyError: another process holds the session.
        """
        persistence = owner.get(SESSION_PERSISTENCE)
        if persistence is None:
            await trio.lowlevel.checkpoint()
            yield
            return
        await persistence.acquire(session_id)
        try:
            yield
        except BaseException:
            with trio.move_on_after(owner.teardown_timeout) as budget:
                budget.shield = True
                await persistence.release(session_id)
            raise

    # --- the AgentFactory seam --------------------------------------------------------------

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
        """Create an agent on session ``session_id``; see ``AgentRegistry.create``. The session
        is claimed first (``session_persistence.acquire``): one another process holds fails
        with ``SessionBusyError`` and publishes nothing."""
        async with self._claimed(owner, validate_session_id(session_id)):
            agent = self._prepare(
                owner, agent_id, session_id, agent_options, "startup", meta=meta, seed=seed
            )
            return await self._setup_and_publish(owner, agent, setup)

    async def resume_agent(
        self,
        owner: Context,
        *,
        agent_id: str,
        resume_session_id: str,
        agent_options: AgentOptions | None,
        setup: AgentSetup | None,
    ) -> AgentHandle:
        """Continue the persisted session ``resume_session_id``; see ``AgentRegistry.resume``.

        The session is claimed before it is read (``session_persistence.acquire``, which also
        cuts a torn tail under the claim): one another process holds fails with
        ``SessionBusyError`` and publishes nothing."""
        persistence = owner.get(SESSION_PERSISTENCE)
        if persistence is None:
            raise PersistenceUnavailableError(
                f"cannot resume session {resume_session_id!r}: no 'session_persistence' service "
                "is mounted; mount a persistence plugin (JsonlPersistence, SqlitePersistence, "
                "MemoryPersistence) first"
            )
        session_id = validate_session_id(resume_session_id)
        async with self._claimed(owner, session_id):
            stored = await persistence.load(session_id)
            events = [*stored.events, *repair_events(stored.events)]
            agent = self._prepare(
                owner,
                agent_id,
                session_id,
                agent_options,
                "resume",
                seed=events,
                header=stored.header,
            )
            return await self._setup_and_publish(owner, agent, setup)

    async def _resume_configured(self, row: AgentConfig) -> None:
        ctx = self.ctx
        await ctx.wait_for_service(SESSION_PERSISTENCE)
        assert row.resume_session_id is not None
        try:
            await self.resume_agent(
                ctx,
                agent_id=row.id,
                resume_session_id=row.resume_session_id,
                agent_options=row.options,
                setup=None,
            )
        except Exception as exc:
            logger.warning(
                "agent %r: could not resume session %r (%s); the agent was not started",
                row.id,
                row.resume_session_id,
                exc,
            )

    # --- per-agent facts --------------------------------------------------------------------

    def seed_source(self, options: AgentOptions) -> Callable[[], LlmCallConfig]:
        """What gives an agent's requests their seed config: computed once when a provider is
        named (nothing it depends on can change), else at each request, because the registered
        adapters decide (and a missing choice fails that request, not the agent's creation)."""
        if options.provider or self.config.provider:
            seed = self.seed_config(options)
            return lambda: seed
        return functools.partial(self.seed_config, options)

    def seed_config(self, options: AgentOptions) -> LlmCallConfig:
        """The model call config an agent starts each request from (before ``agent/request``)."""
        provider = options.provider or self.config.provider
        if provider is None:
            names = self._llm.names()
            if len(names) != 1:
                raise ValueError(
                    "no model provider chosen: set AgentOptions(provider=...) or the agent_loop "
                    f"config 'provider' (registered adapters: {', '.join(names) or 'none'})"
                )
            provider = names[0]
        return LlmCallConfig(
            provider=provider,
            model=options.model or self.config.model or "default",
            max_tokens=options.max_tokens or self.config.max_tokens,
            temperature=options.temperature,
        )

    def _model_variable(self, agent: Any) -> str | None:
        options = getattr(agent, "options", None)
        if not isinstance(options, AgentOptions):
            return self.config.model
        return options.model or self.config.model

    def _cwd_variable(self, agent: Any) -> str | None:
        session = getattr(agent, "session", None)
        cwd = getattr(getattr(session, "header", None), "cwd", None)
        return cwd if isinstance(cwd, str) else os.getcwd()
