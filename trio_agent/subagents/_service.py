"""``ctx.subagents``: definitions, the ``subagent`` tools, and children nested in their callers."""

from __future__ import annotations

import logging
from typing import final

import attrs
import trio

from ..agent import Agent, AgentDisposed, AgentOptions, AgentRegistry
from ..ids import AgentId, SessionId, validate_session_id
from ..persistence import SESSION_PERSISTENCE
from ..runtime import Context, Disposer, Service
from ..session import SessionStore
from ..tools import AgentLike, ToolRegistry
from ._config import SubagentsConfig
from ._errors import (
    SubagentConfigError,
    SubagentDepthError,
    SubagentError,
    UnknownHandleError,
    UnknownSubagentError,
)
from ._run import ChildPlan, ChildRun, fork_prefix
from ._tools import subagent_tools
from ._types import (
    SubagentDefinition,
    SubagentRequest,
    SubagentResult,
    SubagentState,
    SubagentStatus,
    output_schema,
    subagent_info,
)

__all__ = ["SubagentService"]

logger = logging.getLogger("trio_agent.subagents")


@final
@attrs.define(eq=False)
class _Background:
    """One background child: its plan, its holder's cancel scope, and (once done) its result."""

    plan: ChildPlan
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    state: SubagentState = "pending"
    result: SubagentResult | None = None
    #: It holds one of the parent's slots (borrowed on its own behalf).
    slot: bool = False

    def status(self) -> SubagentStatus:
        plan = self.plan
        return SubagentStatus(
            plan.agent_id, plan.definition.name, plan.session_id, self.state, self.result
        )


@final
@attrs.define(eq=False)
class _Parent:
    """What the service keeps per parent agent: its slots and its background children."""

    agent: Agent
    slots: trio.CapacityLimiter
    background: dict[str, _Background] = attrs.field(factory=dict)


@final
@attrs.define(eq=False)
class _State:
    """The service's mutable state (one object, shared by every view of the service)."""

    definitions: dict[str, SubagentDefinition] = attrs.field(factory=dict)
    tools: list[Disposer] = attrs.field(factory=list)
    parents: dict[str, _Parent] = attrs.field(factory=dict)
    #: The next ``n`` to try per (parent session id, definition name).
    counters: dict[tuple[str, str], int] = attrs.field(factory=dict)
    #: How many ``forward_progress()`` holds are live.
    progress: list[int] = attrs.field(factory=lambda: [0])


class SubagentService(Service, name="subagents"):
    """Plugin: ``ctx.subagents``, sub-agents whose lifetimes nest inside their caller's.

    Definitions come from the config and from :meth:`register`; while there is at least one,
    the ``subagent`` tool (plus ``subagent_wait`` and ``subagent_status`` when background
    children are enabled) is registered globally, its description listing them.

    A child is created with ``ctx.agents.create`` (so it is owned by this plugin and closed
    with it at the latest), gets its definition's instructions as an agent-scoped system
    prompt section, and runs *inside the call that asked for it*: cancelling the call cancels
    the child's turn (``aborted``), and the call returns only once the child is closed.
    Background children are held by tasks in the *parent agent's* scope nursery, which the
    parent's stop/drain phase cancels and awaits before the parent is unregistered.

    Mount it after the agent registry, the session store, the tools and the system prompt
    (and an agent loop for ``ctx.agents.create``)::

        await ctx.plugin(SubagentService, SubagentService.Config(definitions=(
            SubagentDefinition("reviewer", "Reviews diffs.", "You review code ..."),
        )))
    """

    inject = ("agents", "sessions", "tools", "system_prompt")
    Config = SubagentsConfig

    config: SubagentsConfig

    def __init__(self, ctx: Context, config: SubagentsConfig) -> None:
        super().__init__(ctx, config)
        self._state = _State()
        ctx.on("agent/disposed", self._forget_parent)
        ctx.defer(self._cancel_background, label="cancel background sub-agents")
        for definition in config.definitions:
            self.register(definition)

    # --- definitions ------------------------------------------------------------------------

    def register(self, definition: SubagentDefinition) -> Disposer:
        """Add a definition (for every agent); the disposer removes it. Owned by the calling
        context's fiber. The ``subagent`` tool is re-registered so its description lists it.

        Raises:
            SubagentConfigError: a definition of that name is registered already.
            ToolConflictError: another plugin registered a global tool named ``subagent``,
                ``subagent_wait`` or ``subagent_status``.
        """
        if not isinstance(definition, SubagentDefinition):
            raise TypeError(
                f"register() takes a SubagentDefinition, got {type(definition).__name__}"
            )
        definitions = self._state.definitions
        if definition.name in definitions:
            raise SubagentConfigError(
                f"a sub-agent named {definition.name!r} is registered already; dispose it "
                "first or choose another name",
                key="name",
            )
        disposer = self.caller.defer(
            lambda: self._unregister(definition), label=f"subagent {definition.name}"
        )
        definitions[definition.name] = definition
        try:
            self._refresh_tools()
        except Exception:
            # Another plugin holds a tool name of ours: publish nothing of this definition.
            del definitions[definition.name]
            disposer.release()
            self._refresh_tools()
            raise
        return disposer

    def _unregister(self, definition: SubagentDefinition) -> None:
        if self._state.definitions.get(definition.name) is definition:
            del self._state.definitions[definition.name]
            self._refresh_tools()

    def get(self, name: str) -> SubagentDefinition | None:
        """The definition called ``name``, or None."""
        return self._state.definitions.get(name)

    def list(self) -> tuple[SubagentDefinition, ...]:
        """Every definition, in registration order."""
        return tuple(self._state.definitions.values())

    def _refresh_tools(self) -> None:
        registered = self._state.tools
        for disposer in registered:
            disposer()
        registered.clear()
        if not self._state.definitions or not self.ctx.fiber.active:
            return
        registry = self.ctx.require(ToolRegistry)
        for made in subagent_tools(self.list(), background=self.config.background):
            registered.append(registry.register(made))

    # --- running ----------------------------------------------------------------------------

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Run a child for ``request`` and return how it ended.

        The child runs inside this call: it is created here, gets ``request.task`` as its
        prompt, and is closed before this returns. A child that fails, runs out of steps or
        never gives its structured output still *returns* (``result.ok`` is False and
        ``result.error`` says why). With ``background=True`` the child is started in the
        parent's scope nursery and this returns at once (``reason == "running"``; the handle
        is ``result.agent_id``), to be collected with :meth:`wait`.

        Cancellation: the child's turn is cancelled (it ends ``aborted``) and the child is
        closed, under the teardown budget, before :class:`trio.Cancelled` propagates.

        Raises:
            UnknownSubagentError: no definition ``request.agent`` (or none named while several
                exist).
            SubagentDepthError: the parent is at the depth limit.
            ValueError: an empty task or an unknown mode.
            SubagentSchemaError: ``request.output_schema`` is not supported.
            SubagentError: the parent is not a live agent, or the child could not be created
                (the message names its session).
        """
        if request.background and not self.config.background:
            raise SubagentError(
                "background sub-agents are disabled (subagents config background: false)"
            )
        plan = await self._plan(request)
        parent = self._parent_state(plan.parent)
        if plan.background:
            return self._start_background(parent, plan)
        async with parent.slots:
            return await ChildRun(plan, self._agents(), self._wants_progress).execute()

    async def _plan(self, request: SubagentRequest) -> ChildPlan:
        parent = request.parent
        if self.live_agent(parent) is not parent:
            raise SubagentError(
                f"the parent {getattr(parent, 'id', parent)!r} is not a live agent of this "
                "runtime; pass the agent (from ctx.agents) that delegates the task"
            )
        definition = self._choose(request.agent)
        if not isinstance(request.task, str) or not request.task.strip():
            raise ValueError("the task is empty: say what the sub-agent should do")
        if request.mode not in ("spawn", "fork"):
            raise ValueError(f"unknown mode {request.mode!r}; expected 'spawn' or 'fork'")
        if request.output_schema is not None:
            schema = output_schema(request.output_schema)
        else:
            schema = definition.output_schema
        depth, max_depth = self._depth(parent)
        agent_id, session_id = await self._allocate(parent, definition.name)
        return ChildPlan(
            parent=parent,
            definition=definition,
            task=request.task,
            mode=request.mode,
            schema=schema,
            background=request.background,
            call_id=request.call_id,
            agent_id=agent_id,
            session_id=session_id,
            depth=depth,
            max_depth=max_depth,
            options=_options(definition, parent.options),
            seed=fork_prefix(parent.session) if request.mode == "fork" else None,
        )

    def _choose(self, name: str | None) -> SubagentDefinition:
        definitions = self._state.definitions
        known = ", ".join(definitions) or "none are registered"
        if name is None:
            if len(definitions) == 1:
                return next(iter(definitions.values()))
            raise UnknownSubagentError(
                f"no sub-agent named: choose one of {known}"
                if definitions
                else "no sub-agents are registered; register a SubagentDefinition first"
            )
        found = definitions.get(name)
        if found is None:
            raise UnknownSubagentError(f"unknown sub-agent {name!r}; choose one of {known}")
        return found

    def _depth(self, parent: Agent) -> tuple[int, int]:
        """The child's depth and the limit it inherits; refuse a level beyond the limit."""
        info = subagent_info(parent)
        limit = self.config.max_depth
        where = "the subagents config max_depth"
        if info is not None and info.max_depth < limit:
            limit, where = info.max_depth, "recorded in its session header"
        depth = 1 if info is None else info.depth + 1
        if depth > limit:
            raise SubagentDepthError(
                f"agent {parent.id!r} is a sub-agent at depth {depth - 1} and the sub-agent depth "
                f"limit is {limit} ({where}); it cannot start another level of sub-agents, so do "
                "this task yourself"
            )
        return depth, limit

    async def _allocate(self, parent: Agent, name: str) -> tuple[AgentId, SessionId]:
        """The first ``n`` whose ids are free among live agents, live sessions and stored
        sessions (so numbering continues after the parent resumes in a new process)."""
        agents = self._agents()
        sessions = self.ctx.require(SessionStore)
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        key = (parent.session.id, name)
        counters = self._state.counters
        while True:
            # Taken before the await: concurrent calls never try the same n.
            n = counters.get(key, 1)
            counters[key] = n + 1
            agent_id = f"{parent.id}.{name}-{n}"
            session_id = f"{parent.session.id}.{name}-{n}"
            try:
                validate_session_id(session_id)
            except ValueError:
                raise SubagentError(
                    f"the child session id {session_id!r} would be invalid (too long: the "
                    "parent's session id and nesting leave no room); use a shorter parent "
                    "session id or a shorter definition name"
                ) from None
            if agents.get(agent_id) is not None or sessions.get(session_id) is not None:
                continue
            if persistence is not None and await persistence.exists(session_id):
                continue
            await trio.lowlevel.checkpoint()
            return AgentId(agent_id), SessionId(session_id)

    # --- background children ----------------------------------------------------------------

    def _start_background(self, parent: _Parent, plan: ChildPlan) -> SubagentResult:
        record = _Background(plan)
        try:
            plan.parent.ctx.start_soon(self._hold, parent, record, name=f"subagent {plan.agent_id}")
        except Exception as exc:
            raise SubagentError(plan.failure(f"could not be started: {exc}")) from exc
        parent.background[plan.agent_id] = record
        plan.record_start()
        # A free slot is taken now, so children start in the order they were asked for.
        try:
            parent.slots.acquire_on_behalf_of_nowait(record)
            record.slot = True
        except trio.WouldBlock:
            pass
        return plan.result("running")

    async def _hold(self, parent: _Parent, record: _Background) -> None:
        """A background child's holder, a task in the parent's scope nursery."""
        run = ChildRun(record.plan, self._agents(), self._wants_progress)
        try:
            with record.scope:
                if not record.slot:
                    await parent.slots.acquire_on_behalf_of(record)
                    record.slot = True
                if self.ctx.fiber.active:  # else this plugin is unloading: it never starts
                    record.state = "running"
                    await run.execute()
        except Exception as exc:
            # Never crash the parent's scope: the failure is the child's result.
            logger.warning("background sub-agent %s failed", record.plan.agent_id, exc_info=exc)
            if run.result is None:
                run.result = record.plan.result("error", error=str(exc))
        finally:
            if record.slot:
                parent.slots.release_on_behalf_of(record)
                record.slot = False
            record.result = run.result or record.plan.result(
                "aborted", error=record.plan.failure("was cancelled before it started")
            )
            record.state = "done"
            record.done.set()

    async def wait(self, parent: Agent, handle: str) -> SubagentResult:
        """Wait until ``parent``'s background child ``handle`` is done; return its result.

        Raises:
            UnknownHandleError: ``parent`` started no background child ``handle``.
        """
        record = self._record(parent, handle)
        await record.done.wait()
        assert record.result is not None
        return record.result

    def status(self, parent: Agent, handle: str | None = None) -> tuple[SubagentStatus, ...]:
        """The state of ``parent``'s background children (or of the one ``handle``).

        Raises:
            UnknownHandleError: ``parent`` started no background child ``handle``.
        """
        if handle is not None:
            return (self._record(parent, handle).status(),)
        state = self._state.parents.get(parent.id)
        if state is None or state.agent is not parent:
            return ()
        return tuple(record.status() for record in state.background.values())

    def _record(self, parent: Agent, handle: str) -> _Background:
        state = self._state.parents.get(parent.id)
        record = None
        if state is not None and state.agent is parent:
            record = state.background.get(handle)
        if record is None:
            mine = ", ".join(state.background) if state is not None else ""
            raise UnknownHandleError(
                f"no background sub-agent {handle!r} was started by agent {parent.id!r}"
                + (f"; its handles are: {mine}" if mine else "; it started none")
            )
        return record

    # --- progress ---------------------------------------------------------------------------

    def forward_progress(self) -> Disposer:
        """Forward every child's stream chunks to its parent as ``agent/subagent`` ``progress``
        notices until the returned disposer runs (owned by the calling context's fiber).

        Forwarding is off while nobody holds it, so listeners that only want ``started`` /
        ``ended`` (a status line) are not flooded with chunks.
        """
        counter = self._state.progress
        counter[0] += 1

        def release() -> None:
            counter[0] -= 1

        return self.caller.defer(release, label="subagent progress")

    def _wants_progress(self) -> bool:
        return self._state.progress[0] > 0

    # --- lookups and bookkeeping ------------------------------------------------------------

    def live_agent(self, agent: AgentLike | None) -> Agent | None:
        """The live registered :class:`~trio_agent.agent.Agent` that ``agent`` is, or None."""
        if agent is None:
            return None
        live = self._agents().get(agent.id)
        return live if live is agent else None

    def _agents(self) -> AgentRegistry:
        # Bound to this plugin's context: children created through it are owned by it.
        return self.ctx.require(AgentRegistry)

    def _parent_state(self, agent: Agent) -> _Parent:
        parents = self._state.parents
        state = parents.get(agent.id)
        if state is None or state.agent is not agent:
            state = parents[agent.id] = _Parent(
                agent, trio.CapacityLimiter(self.config.max_parallel)
            )
        return state

    def _forget_parent(self, payload: AgentDisposed) -> None:
        agent = payload.agent
        state = self._state.parents.get(agent.id)
        if state is not None and state.agent is agent:
            del self._state.parents[agent.id]
        session = agent.session.id
        for key in [k for k in self._state.counters if k[0] == session]:
            del self._state.counters[key]

    def _cancel_background(self) -> None:
        for state in self._state.parents.values():
            for record in state.background.values():
                record.scope.cancel()


def _options(definition: SubagentDefinition, parent: AgentOptions) -> AgentOptions:
    """The child's model: the definition's, else the parent's (a definition naming another
    provider does not inherit the parent's model name); its step limit is the definition's
    ``max_steps``."""
    steps = definition.max_steps
    if definition.provider is not None:
        return attrs.evolve(
            parent, provider=definition.provider, model=definition.model, max_steps=steps
        )
    return attrs.evolve(parent, model=definition.model or parent.model, max_steps=steps)
