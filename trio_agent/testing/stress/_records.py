"""What one stress run observed, as values the invariants read."""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import attrs

from ...agent import Agent
from ...session import Session

__all__ = [
    "Action",
    "ActionRecord",
    "AgentAtAction",
    "AgentTrace",
    "LoggedError",
    "QueuedPrompt",
    "RunRecord",
    "Violation",
]

#: What the kit does at a schedule point: cancel the running turns, close the agents, or unload
#: the scenario's own plugins.
Action: TypeAlias = Literal["cancel", "close", "unload"]


@attrs.frozen
class Violation:
    """One broken invariant: the invariant's name and what was wrong."""

    invariant: str
    message: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.message}"


@attrs.frozen
class QueuedPrompt:
    """A prompt an agent announced with ``agent/queued``; ``mark`` orders it among observations."""

    message_id: str
    steering: bool
    mark: int


@final
@attrs.define(eq=False)
class AgentTrace:
    """What the probes saw of one agent: its status changes, prompts and turn starts/ends."""

    agent: Agent
    statuses: list[str] = attrs.field(factory=list)
    queued: list[QueuedPrompt] = attrs.field(factory=list)
    #: The observation mark of every ``agent/turn-start``.
    turn_starts: list[int] = attrs.field(factory=list)
    #: Turn number → (reason, trio time) of every ``agent/turn-end``.
    turn_ends: dict[int, tuple[str, float]] = attrs.field(factory=dict)

    @property
    def id(self) -> str:
        """The agent's id."""
        return str(self.agent.id)


@attrs.frozen
class AgentAtAction:
    """One agent as it stood when the kit acted: its open turn and the prompts logged so far
    (``agent_index`` is its position in :attr:`RunRecord.agents`)."""

    agent_index: int
    agent_id: str
    open_turn: int | None
    logged: frozenset[str]
    #: A sub-agent: it runs inside its parent's tool call, so a close reaches its turn first
    #: as that call's cancellation (the turn ends ``aborted``), then closes it.
    nested: bool = False


@attrs.frozen
class ActionRecord:
    """A cancel, close or unload the kit performed (``point`` is ``None`` outside an
    exploration), at trio time ``time``."""

    kind: Action
    point: int | None
    time: float
    mark: int
    agents: tuple[AgentAtAction, ...] = ()


@attrs.frozen
class LoggedError:
    """An ERROR log record, or an exception that escaped the run (``logger`` is ``None``)."""

    logger: str | None
    message: str
    exception: BaseException | None = attrs.field(default=None, eq=False)


@final
@attrs.define(eq=False)
class RunRecord:
    """Everything one run observed; the invariants (and your own callbacks) read it.

    Attributes:
        sessions: Every session created during the run, in creation order.
        agents: Every agent published during the run, with its statuses and prompts.
        actions: The cancels, closes and unloads the kit performed, in order.
        errors: ERROR log records of the run and exceptions that escaped it.
        swallowed: Tool calls whose body kept running after ``trio.Cancelled`` reached it.
        open_streams: Model streams whose channel was still open after ``stream()`` exited.
        tasks_left: Tasks spawned during the run that were alive after the runtime closed.
        children_left: Child processes spawned during the run and alive after it (``None`` when
            the platform cannot list children).
        hang: Why the run could not finish (every task blocked for good), or ``None``.
        scenario_error: What the scenario (or an operation) raised, or ``None``.
        timed_out: Whether the scenario ran out of its virtual time.
        points: The schedule points counted while the scenario ran.
        trace: The task name of every counted schedule point, in order.
        threads_used: Whether worker threads reported back into the run.
        io_used: Whether a task waited for real I/O (sockets, pipes, processes).
        complete: Whether the run is over (``False`` while a state machine is between steps).
    """

    sessions: list[Session] = attrs.field(factory=list)
    agents: list[AgentTrace] = attrs.field(factory=list)
    actions: list[ActionRecord] = attrs.field(factory=list)
    errors: list[LoggedError] = attrs.field(factory=list)
    swallowed: list[str] = attrs.field(factory=list)
    open_streams: list[str] = attrs.field(factory=list)
    tasks_left: list[str] = attrs.field(factory=list)
    children_left: list[int] | None = attrs.field(factory=list)
    hang: str | None = None
    scenario_error: BaseException | None = None
    timed_out: bool = False
    points: int = 0
    trace: list[str] = attrs.field(factory=list)
    threads_used: bool = False
    io_used: bool = False
    complete: bool = False
    _marks: int = 0

    def mark(self) -> int:
        """The next observation mark (a counter that orders what the probes saw)."""
        self._marks += 1
        return self._marks

    def trace_of(self, agent: Agent) -> AgentTrace:
        """The trace of ``agent`` (created on first use)."""
        for trace in self.agents:
            if trace.agent is agent:
                return trace
        trace = AgentTrace(agent)
        self.agents.append(trace)
        return trace
