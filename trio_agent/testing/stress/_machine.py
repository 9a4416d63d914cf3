"""``AgentStateMachine``: a Hypothesis state machine over one agent and your plugins.

This module imports Hypothesis; import it through ``trio_agent.testing.stress`` (which loads
it only when ``AgentStateMachine`` is first used).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ...llm import RetryPolicy, ToolSchema
from ...lowlevel import Plugin
from ...tools import Tool
from ._errors import StressFailure
from ._invariants import UserCheck
from ._ops import (
    Advance,
    Cancel,
    Close,
    Inject,
    MachineConfig,
    NewAgent,
    Op,
    OpsDriver,
    Respond,
    Send,
    Settle,
    Steer,
    WaitIdle,
)
from ._records import RunRecord, Violation
from ._snippet import machine_snippet
from ._strategies import model_responses
from ._world import HarnessSpec, PluginSpec

__all__ = ["AgentStateMachine"]

#: How many of its own checkpoints an operation lets the world run before the next one.
_SLACK = st.integers(0, 30)


def _open(machine: AgentStateMachine) -> bool:
    return machine.agent_open


def _closed(machine: AgentStateMachine) -> bool:
    return not machine.agent_open


class AgentStateMachine(RuleBasedStateMachine):
    """Subclass with your plugins and tools; Hypothesis then runs random operation sequences
    against an agent and checks every invariant after each step and at teardown.

    Rules: send / steer / inject / cancel / aclose (then a new agent) / advance the clock /
    settle / wait until idle, and *respond*: queue a random model response (text, reasoning,
    tool calls to the tools the agent sees with arguments drawn from their JSON schemas —
    sometimes broken, sometimes with duplicate or empty ids —, max-tokens, failures, hangs).
    Add plugin-specific rules that call :meth:`execute` with your own :class:`Op`.

    A failure raises :class:`StressFailure` whose message ends with a snippet that replays the
    (shrunk) operations with :func:`replay`. Run it with ``MyMachine.TestCase`` (unittest), or
    the ``stress`` fixture's ``run_machine``.

    Class attributes (the harness): ``tools``, ``plugins`` (``Plugin`` or ``(Plugin, config)``),
    ``retry``, ``persistence``/``persistence_config``, ``max_parallel_tool_calls``,
    ``checks`` (your callbacks on the :class:`RunRecord`, after every step and at teardown),
    ``allowed_errors`` (regexes of expected ERROR logs), ``duplicate_ids`` (whether responses
    repeat or leave out tool-call ids, which the loop rewrites, SPEC §12; on by default),
    ``chunk_delay`` (virtual seconds per stream chunk) and ``io_quiet`` (real seconds of quiet
    after which virtual time moves although real I/O is pending: set it for plugins that keep
    a subprocess or a socket open, such as MCP servers over stdio; see ``World.run_clock``).

    .. note:: Do not add ``@initialize`` rules: the first one starts the run.
    """

    tools: ClassVar[Sequence[Tool]] = ()
    plugins: ClassVar[Sequence[PluginSpec]] = ()
    retry: ClassVar[RetryPolicy | None] = None
    persistence: ClassVar[Plugin | None] = None
    persistence_config: ClassVar[Any] = None
    max_parallel_tool_calls: ClassVar[int] = 10
    checks: ClassVar[Sequence[UserCheck]] = ()
    allowed_errors: ClassVar[Sequence[str]] = ()
    duplicate_ids: ClassVar[bool] = True
    chunk_delay: ClassVar[float] = 0.0
    io_quiet: ClassVar[float | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []
        self.seed = 0
        self._driver: OpsDriver | None = None
        self._prompts = 0
        self._failed = False

    @classmethod
    def replay_config(cls) -> MachineConfig:
        """The machine's harness and checks (what :func:`replay` runs operations on)."""
        return MachineConfig(
            HarnessSpec(
                tools=tuple(cls.tools),
                plugins=tuple(cls.plugins),
                retry=cls.retry,
                persistence=cls.persistence,
                persistence_config=cls.persistence_config,
                max_parallel_tool_calls=cls.max_parallel_tool_calls,
                io_quiet=cls.io_quiet,
            ),
            checks=tuple(cls.checks),
            allowed_errors=tuple(cls.allowed_errors),
            chunk_delay=cls.chunk_delay,
        )

    # --- driving ----------------------------------------------------------------------------

    @property
    def record(self) -> RunRecord:
        """What the run observed so far."""
        return self._started().record

    @property
    def agent_open(self) -> bool:
        """Whether the current agent is still open."""
        return self._driver is not None and self._driver.state.agent_open

    @property
    def tool_schemas(self) -> tuple[ToolSchema, ...]:
        """The schemas of the tools the current agent sees."""
        return () if self._driver is None else self._driver.state.schemas

    def execute(self, op: Op) -> None:
        """Apply ``op`` to the run and check the invariants; raise :class:`StressFailure`."""
        self.ops.append(op)
        self._fail_on(self._started().execute(op))

    def _started(self) -> OpsDriver:
        if self._driver is None:
            raise RuntimeError(
                f"{type(self).__name__} has not started: it starts in its @initialize rule "
                "(do not add @initialize rules of your own)"
            )
        return self._driver

    def _fail_on(self, violations: list[Violation]) -> None:
        if not violations:
            return
        self._failed = True
        snippet = machine_snippet(type(self), self.ops, self.seed)
        lines = [f"{type(self).__name__} broke invariants:", *(f"  - {v}" for v in violations)]
        lines += ["replay with:", snippet]
        raise StressFailure("\n".join(lines), snippet=snippet, violations=tuple(violations))

    def _prompt(self, kind: str) -> str:
        self._prompts += 1
        return f"{kind}-{self._prompts}"

    # --- rules ------------------------------------------------------------------------------

    @initialize(seed=st.integers(0, 2**16 - 1))
    def start(self, seed: int) -> None:
        """Open the harness (scheduler seeded with ``seed``) and create the first agent."""
        self.seed = seed
        self._driver = OpsDriver(self.replay_config(), seed=seed)
        self._fail_on(list(self._driver.state.violations))

    @precondition(_open)
    @rule(slack=_SLACK)
    def send(self, slack: int) -> None:
        """Send a prompt."""
        self.execute(Send(self._prompt("send"), slack))

    @precondition(_open)
    @rule(slack=_SLACK)
    def steer(self, slack: int) -> None:
        """Steer the running turn."""
        self.execute(Steer(self._prompt("steer"), slack))

    @precondition(_open)
    @rule(slack=_SLACK)
    def inject(self, slack: int) -> None:
        """Inject context."""
        self.execute(Inject(self._prompt("inject"), slack))

    @rule(data=st.data())
    def respond(self, data: st.DataObject) -> None:
        """Queue a random model response."""
        strategy = model_responses(self.tool_schemas, duplicate_ids=self.duplicate_ids)
        self.execute(Respond(data.draw(strategy, label="response")))

    @precondition(_open)
    @rule(slack=_SLACK)
    def cancel(self, slack: int) -> None:
        """Cancel the running turn."""
        self.execute(Cancel(slack))

    @precondition(_open)
    @rule()
    def aclose(self) -> None:
        """Close the agent."""
        self.execute(Close())

    @precondition(_closed)
    @rule()
    def new_agent(self) -> None:
        """Create a fresh agent after a close."""
        self.execute(NewAgent())

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.0, 5.0, 30.0]), slack=_SLACK)
    def advance_clock(self, seconds: float, slack: int) -> None:
        """Move virtual time forward."""
        self.execute(Advance(seconds, slack))

    @rule()
    def settle(self) -> None:
        """Run until every task is blocked."""
        self.execute(Settle())

    @precondition(_open)
    @rule()
    def wait_idle(self) -> None:
        """Wait (in virtual time) until the agent is idle."""
        self.execute(WaitIdle())

    def teardown(self) -> None:
        """Close everything and check the whole run."""
        if self._driver is not None:
            found = self._driver.close()
            if not self._failed:  # a failed step has reported already
                self._fail_on(found)
