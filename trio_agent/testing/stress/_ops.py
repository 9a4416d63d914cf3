"""State-machine operations as values, and the driver that applies them to a live, frozen world.

Between two operations the run is *frozen*: the driver task blocks its thread while it waits for
the next operation, so no task runs and no time passes. An operation acts, then lets the world
run for ``slack`` of its own checkpoints (so a later cancel can land mid-turn), and the
invariants are checked. Replaying the same operations on the same seed reproduces the run
exactly, because freezing changes nothing but wall time.
"""

from __future__ import annotations

import queue
from collections.abc import Sequence
from pathlib import Path
from typing import Any, final

import attrs
import trio
import trio.testing

from ...agent import AgentOptions
from ...llm import ToolSchema
from ...loop import ReactLoopAgent
from ._invariants import UserCheck, check_run
from ._observer import Observer
from ._records import RunRecord, Violation
from ._responses import QueueModel, ResponseSpec
from ._snippet import short_repr
from ._world import WALL_TIMEOUT, HarnessSpec, RunThread, World, open_world

__all__ = [
    "Advance",
    "Cancel",
    "Close",
    "Inject",
    "MachineConfig",
    "NewAgent",
    "Op",
    "OpsDriver",
    "Respond",
    "Send",
    "Settle",
    "Steer",
    "WaitIdle",
    "run_ops",
]


class Op:
    """A state-machine operation. Subclass it (``@attrs.frozen(repr=False)``, so the replay
    snippet prints it short) and implement :meth:`apply` for plugin-specific steps."""

    async def apply(self, world: World) -> None:
        """Act on ``world`` (inside the run)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return short_repr(self) if attrs.has(type(self)) else f"{type(self).__name__}()"


def _agent(world: World) -> ReactLoopAgent:
    if world.agent is None:
        raise RuntimeError("no agent: create one with NewAgent() first")
    return world.agent


@attrs.frozen(repr=False)
class Send(Op):
    """``agent.send(text)``, then ``slack`` checkpoints."""

    text: str
    slack: int = 0

    async def apply(self, world: World) -> None:
        _agent(world).send(self.text)
        await world.slack(self.slack)


@attrs.frozen(repr=False)
class Steer(Op):
    """``agent.steer(text)``, then ``slack`` checkpoints."""

    text: str
    slack: int = 0

    async def apply(self, world: World) -> None:
        _agent(world).steer(self.text)
        await world.slack(self.slack)


@attrs.frozen(repr=False)
class Inject(Op):
    """``agent.inject(text)``, then ``slack`` checkpoints."""

    text: str
    slack: int = 0

    async def apply(self, world: World) -> None:
        _agent(world).inject(self.text)
        await world.slack(self.slack)


@attrs.frozen(repr=False)
class Cancel(Op):
    """``agent.cancel()``, then ``slack`` checkpoints."""

    slack: int = 0

    async def apply(self, world: World) -> None:
        agent = _agent(world)
        with world.acting():
            world.note_action("cancel")
            agent.cancel("stress: Cancel()")
        await world.slack(self.slack)


@attrs.frozen(repr=False)
class Close(Op):
    """``await agent.aclose()`` (with virtual time running)."""

    async def apply(self, world: World) -> None:
        agent = _agent(world)
        with world.acting():
            world.note_action("close")
            await world.wait(agent.aclose)


@attrs.frozen(repr=False)
class NewAgent(Op):
    """Create the next agent; later operations act on it."""

    async def apply(self, world: World) -> None:
        world.new_agent()


@attrs.frozen(repr=False)
class Advance(Op):
    """Once every task waits (and threads and I/O are done), move the virtual clock ``seconds``
    ahead, then ``slack`` checkpoints."""

    seconds: float
    slack: int = 0

    async def apply(self, world: World) -> None:
        await world.jump(self.seconds)
        await world.slack(self.slack)


@attrs.frozen(repr=False)
class Settle(Op):
    """Run until every task is blocked (virtual time stands still)."""

    async def apply(self, world: World) -> None:
        await trio.testing.wait_all_tasks_blocked()


@attrs.frozen(repr=False)
class WaitIdle(Op):
    """``await agent.wait_idle()`` with virtual time running, for at most ``limit`` virtual
    seconds (a hanging model keeps a turn running: that is not a failure)."""

    limit: float = 600.0

    async def apply(self, world: World) -> None:
        await world.wait(_agent(world).wait_idle, self.limit)


@attrs.frozen(repr=False)
class Respond(Op):
    """Queue ``response`` for the model's next unanswered request."""

    response: ResponseSpec

    async def apply(self, world: World) -> None:
        assert world.model is not None
        world.model.push(self.response)


@attrs.frozen
class MachineConfig:
    """What a state machine runs on: the harness, your checks and allowed errors."""

    harness: HarnessSpec = attrs.field(factory=HarnessSpec)
    checks: tuple[UserCheck, ...] = ()
    allowed_errors: tuple[str, ...] = ()
    chunk_delay: float = 0.0


@attrs.frozen
class _State:
    """What the driver reports after an operation."""

    violations: tuple[Violation, ...]
    schemas: tuple[ToolSchema, ...] = ()
    agent_open: bool = True


_STOP = object()


@final
class OpsDriver:
    """Applies operations, one at a time, to a live world running on its own thread."""

    def __init__(self, config: MachineConfig, *, seed: int, wall_timeout: float = WALL_TIMEOUT):
        self.config = config
        self.record = RunRecord()
        self._wall_timeout = wall_timeout
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[_State] = queue.SimpleQueue()
        self._run = RunThread(config.harness, self._body, record=self.record, seed=seed)
        self._closed = False
        self._run.start()
        self.state = self._receive()

    def execute(self, op: Op) -> list[Violation]:
        """Apply ``op``; return the violations found right after it."""
        if self._closed:
            raise RuntimeError("the driver is closed")
        self._inbox.put(op)
        self.state = self._receive()
        return list(self.state.violations)

    def close(self) -> list[Violation]:
        """Close the agents and the runtime; return every violation of the whole run."""
        if not self._closed:
            self._closed = True
            self._inbox.put(_STOP)
            self._run.wait(self._wall_timeout)
            self._run.finish()
            self.record.complete = True
        config = self.config
        return check_run(self.record, checks=config.checks, allowed_errors=config.allowed_errors)

    def _receive(self) -> _State:
        deadline = self._wall_timeout
        waited = 0.0
        while True:
            try:
                return self._outbox.get(timeout=0.05)
            except queue.Empty:
                waited += 0.05
            if self._run.done.is_set() or waited >= deadline:
                hang = self.record.hang or "the operation did not finish (the run is stuck)"
                self.record.hang = hang
                return _State((Violation("hang", hang),), agent_open=False)

    def _check(self, error: BaseException | None) -> tuple[Violation, ...]:
        config = self.config
        found = check_run(
            self.record,
            complete=False,
            checks=config.checks,
            allowed_errors=config.allowed_errors,
        )
        if error is not None:
            found.append(Violation("operation-error", f"the operation raised {error!r}"))
        return tuple(found)

    def _state(self, world: World, error: BaseException | None) -> _State:
        agent = world.agent
        agent_open = agent is not None and agent.status != "disposed"
        schemas = world.harness.ctx.tools.schemas(agent if agent_open else None)
        return _State(self._check(error), tuple(schemas), agent_open)

    async def _body(self, observer: Observer, directory: Path | None) -> None:
        async with open_world(
            self.config.harness, self.record, observer, directory, autojump=False
        ) as world:
            world.model = QueueModel(delay=self.config.chunk_delay)
            world.harness.ctx.llm.register(world.model)
            world.agent_options = AgentOptions(provider=world.model.name)
            world.new_agent()
            self._outbox.put(self._state(world, None))
            while True:
                op = self._inbox.get()  # blocks the thread: the world stays frozen meanwhile
                if op is _STOP:
                    break
                error = None
                try:
                    await op.apply(world)
                except Exception as exc:
                    error = exc
                self._outbox.put(self._state(world, error))


def run_ops(
    config: MachineConfig, ops: Sequence[Op], *, seed: int
) -> tuple[RunRecord, list[Violation]]:
    """Apply ``ops`` on a fresh world (stopping at the first violation), then close it; return
    the record and every violation found."""
    driver = OpsDriver(config, seed=seed)
    found: list[Violation] = []
    for op in ops:
        found = driver.execute(op)
        if found:
            break
    return driver.record, list(dict.fromkeys([*found, *driver.close()]))
