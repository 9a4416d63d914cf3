"""One stress run: a fresh trio loop (in a worker thread) with the harness, probes and observer.

Every run is its own ``trio.run`` under :class:`trio.testing.MockClock`, with the scheduler
seeded, on a worker thread. The thread is what lets the kit give up on a run that can never
finish (a task that shields itself forever): the observer detects it, the thread is parked, and
the run is reported as a hang instead of wedging the test session.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeAlias, final

import attrs
import trio
import trio.testing

from ...agent import Agent, AgentOptions
from ...llm import RetryPolicy
from ...loop import ReactLoopAgent
from ...lowlevel import Fiber, Plugin
from ...session import SessionEvent, TurnEnd, TurnStart
from ...subagents import SubagentError, subagent_info
from ...tools import Tool
from .. import ScriptItem, TestHarness, open_test_harness
from ._invariants import prompt_ids
from ._observer import Observer, io_waiters
from ._probes import install_probes
from ._records import Action, ActionRecord, AgentAtAction, LoggedError, RunRecord
from ._responses import QueueModel
from ._scheduling import seeded_scheduler

__all__ = [
    "HarnessSpec",
    "PerRun",
    "PluginSpec",
    "RunThread",
    "World",
    "open_world",
    "per_run",
    "run_world",
]

#: How long (wall seconds) a run may take before it is abandoned as a hang.
WALL_TIMEOUT = 120.0


@attrs.frozen
class PerRun:
    """A plugin config made fresh for every run: ``factory(directory)`` gets an empty
    temporary directory of that run (for a workspace root or a session store)."""

    factory: Callable[[Path], Any]


def per_run(factory: Callable[[Path], Any]) -> PerRun:
    """Mark ``factory`` as a per-run config: ``(BuiltinTools, per_run(lambda d: {"root":
    str(d)}))`` mounts the built-in tools on a fresh directory in every run."""
    return PerRun(factory)


#: A plugin the harness mounts: the plugin alone, or ``(plugin, config)``.
PluginSpec: TypeAlias = Plugin | tuple[Plugin, Any]


def _split(spec: PluginSpec) -> tuple[Plugin, Any]:
    if isinstance(spec, tuple):
        plugin, config = spec
        return plugin, config
    return spec, None


@attrs.frozen
class HarnessSpec:
    """The harness a run gets: ``open_test_harness`` arguments plus the plugins to mount."""

    responses: tuple[ScriptItem, ...] = ()
    tools: tuple[Tool, ...] = ()
    plugins: tuple[PluginSpec, ...] = ()
    retry: RetryPolicy | None = None
    persistence: Plugin | None = None
    persistence_config: Any = None
    max_parallel_tool_calls: int = 10
    teardown_timeout: float = 10.0
    #: Real seconds of quiet after which virtual time moves although real I/O is pending
    #: (``None``: never while it is pending). See :meth:`World.run_clock`.
    io_quiet: float | None = None

    @property
    def needs_directory(self) -> bool:
        """Whether a config is :class:`PerRun` (so the run needs a temporary directory)."""
        configs = [self.persistence_config, *(_split(p)[1] for p in self.plugins)]
        return any(isinstance(c, PerRun) for c in configs)


@final
@attrs.define(eq=False)
class World:
    """The live harness of one run, as scenarios and state-machine operations see it.

    Attributes:
        harness: The :class:`~trio_agent.testing.TestHarness` (``ctx``, ``model``, ``agent()``).
        fibers: The fibers of the spec's own plugins, in mount order.
        clock: The run's :class:`trio.testing.MockClock` (virtual time; it moves only by
            :meth:`wait`, by the kit's clock driver in explorations, or by ``clock.jump``).
        record: What the run observed so far.
        directory: The run's temporary directory (``None`` unless a config is per-run).
        agent: The agent operations act on (state machines; ``None`` before one is created).
        model: The state machine's model (``None`` in scenarios, which use ``harness.model``).
    """

    harness: TestHarness
    fibers: list[Fiber]
    clock: trio.testing.MockClock
    record: RunRecord
    directory: Path | None
    observer: Observer = attrs.field(repr=False)
    kit: trio.Nursery = attrs.field(repr=False)
    agent: ReactLoopAgent | None = None
    model: QueueModel | None = None
    agent_options: AgentOptions | None = None
    io_quiet: float | None = None
    _agents: int = 0
    _autojump: bool = False
    _autojump_on: trio.Event = attrs.field(factory=trio.Event)

    def new_agent(self) -> ReactLoopAgent:
        """Create the next agent (``agent-1``, ``agent-2`` ..., with :attr:`agent_options`)
        and make it :attr:`agent`."""
        self._agents += 1
        self.agent = self.harness.agent(f"agent-{self._agents}", self.agent_options)
        return self.agent

    def note_action(self, kind: Action, point: int | None = None) -> None:
        """Record that the kit is about to ``kind`` (cancel, close, unload) the agents: their
        open turns and logged prompts, for the ``cancel-*`` invariants. Call it right before."""
        record = self.record
        agents = []
        for agent in self.harness.ctx.agents.list():
            trace = record.trace_of(agent)
            events = agent.session.events
            agents.append(
                AgentAtAction(
                    agent_index=record.agents.index(trace),
                    agent_id=str(agent.id),
                    open_turn=_open_turn(events),
                    logged=frozenset(prompt_ids(events)),
                    nested=_is_subagent(agent),
                )
            )
        record.actions.append(
            ActionRecord(kind, point, trio.current_time(), record.mark(), tuple(agents))
        )

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """Note the tasks the enclosed code reschedules as cancel deliveries (for the
        ``cancel-swallowed`` check); wrap the moment you cancel something."""
        observer = self.observer
        task = trio.lowlevel.current_task()
        previous, observer.acting_task = observer.acting_task, task
        observer.acting = True
        try:
            yield
        finally:
            observer.acting_task = previous
            observer.acting = False

    async def slack(self, checkpoints: int) -> None:
        """Let the rest of the world run for ``checkpoints`` of this task's checkpoints."""
        for _ in range(checkpoints):
            await trio.lowlevel.checkpoint()

    async def wait(self, fn: Callable[[], Awaitable[object]], limit: float = 600.0) -> bool:
        """Await ``fn()`` with virtual time running (see :meth:`run_clock`), for at most
        ``limit`` virtual seconds; return whether it finished."""
        was = self._autojump
        self.run_clock(True)
        try:
            with trio.move_on_after(limit) as scope:
                await fn()
        finally:
            self.run_clock(was)
        return not scope.cancelled_caught

    def clock_running(self) -> bool:
        """Whether virtual time currently runs (see :meth:`run_clock`)."""
        return self._autojump

    def run_clock(self, running: bool) -> None:
        """Let virtual time run (or stand still): while it runs, whenever every task is blocked
        the clock jumps to the next deadline, unless a worker thread or real I/O is pending
        (their results come in real time, so the clock waits for them).

        A long-lived subprocess (an MCP server over stdio) keeps a read pending for as long as
        it lives, so with it the clock would never move: with :attr:`io_quiet` set, pending
        I/O holds the clock only until no task has woken for that many real seconds."""
        self._autojump = running
        if running:
            self._autojump_on.set()
        elif self._autojump_on.is_set():
            self._autojump_on = trio.Event()

    async def jump(self, seconds: float) -> None:
        """Move virtual time ``seconds`` ahead once every task waits and pending worker threads
        and real I/O are done (their results come in real time; a jump past them would fake a
        timeout)."""
        await trio.testing.wait_all_tasks_blocked()
        while _tasks_runnable() or not await self._outside_settled():
            await trio.testing.wait_all_tasks_blocked(_REAL_PAUSE)
        self.clock.jump(seconds)

    async def _outside_settled(self) -> bool:
        """Whether nothing outside the run can still answer: no worker thread is busy, and no
        real I/O is pending (or, with :attr:`io_quiet`, it has been quiet that long)."""
        if _threads_busy():
            return False
        if not _io_pending():
            return True
        if self.io_quiet is None:
            return False
        await trio.testing.wait_all_tasks_blocked(self.io_quiet)
        return not _threads_busy()

    async def _drive_clock(self) -> None:
        """The kit task behind :meth:`run_clock` (an autojump that waits for threads and I/O,
        which trio's own ``autojump_threshold`` does not)."""
        while True:
            if not self._autojump:
                await self._autojump_on.wait()
            await trio.testing.wait_all_tasks_blocked()
            if self._autojump:
                # That wake-up may be stale (an idle moment from before the world was frozen
                # and thawed, or a task woken in the same batch): confirm it before jumping.
                await trio.testing.wait_all_tasks_blocked()
            if not self._autojump or _tasks_runnable():
                continue
            if not await self._outside_settled():
                await trio.testing.wait_all_tasks_blocked(_REAL_PAUSE)
                continue
            jump = trio.lowlevel.current_statistics().seconds_to_next_deadline
            if 0 < jump < math.inf and self._autojump:
                self.clock.jump(jump)
            elif jump == math.inf:
                await trio.testing.wait_all_tasks_blocked(_REAL_PAUSE)


def _tasks_runnable() -> bool:
    """Whether a task waits to run. Every idle waiter is woken at the same idle moment, so a
    wake-up of the clock driver can be stale: the task woken with it (an operation that just
    ended) may have run and rescheduled others before the driver runs."""
    return trio.lowlevel.current_statistics().tasks_runnable > 0


def _threads_busy() -> bool:
    """Whether a worker thread (of trio's default limiter) is running."""
    return bool(trio.to_thread.current_default_thread_limiter().borrowed_tokens)


def _io_pending() -> bool:
    """Whether a task waits for real I/O."""
    return bool(io_waiters(trio.lowlevel.current_statistics().io_statistics))


#: Real seconds the clock driver lets pass while a thread or real I/O is pending.
_REAL_PAUSE = 0.002


def _is_subagent(agent: Agent) -> bool:
    try:
        return subagent_info(agent) is not None
    except SubagentError:  # a `subagent` record another version wrote: still a child
        return True


def _open_turn(events: Sequence[SessionEvent]) -> int | None:
    for event in reversed(events):
        if event.type == TurnEnd.event_type:
            return None
        if event.type == TurnStart.event_type:
            return event.payload_as(TurnStart).turn
    return None


def _resolve(config: Any, directory: Path | None) -> Any:
    if isinstance(config, PerRun):
        assert directory is not None
        return config.factory(directory)
    return config


@contextlib.asynccontextmanager
async def open_world(
    spec: HarnessSpec,
    record: RunRecord,
    observer: Observer,
    directory: Path | None,
    *,
    autojump: bool,
) -> AsyncIterator[World]:
    """Open the harness, install the probes, mount the spec's plugins (inside ``trio.run``).

    The kit's own tasks (the clock driver, an exploration's helper) live in a nursery around
    the harness, so they outlive its teardown and are not counted as the harness's tasks.
    """
    observer.main = trio.lowlevel.current_task()
    async with trio.open_nursery() as kit:
        observer.kit_nurseries.add(kit)
        async with open_test_harness(
            list(spec.responses),
            tools=spec.tools,
            retry=spec.retry,
            max_parallel_tool_calls=spec.max_parallel_tool_calls,
            teardown_timeout=spec.teardown_timeout,
            persistence=spec.persistence,
            persistence_config=_resolve(spec.persistence_config, directory),
        ) as harness:
            install_probes(harness.ctx, record, observer)
            fibers = []
            for plugin_spec in spec.plugins:
                plugin, config = _split(plugin_spec)
                fibers.append(await harness.ctx.plugin(plugin, _resolve(config, directory)))
            world = World(
                harness,
                fibers,
                observer.clock,
                record,
                directory,
                observer,
                kit,
                io_quiet=spec.io_quiet,
            )
            observer.clock_running = world.clock_running
            world.run_clock(autojump)
            kit.start_soon(world._drive_clock, name="stress clock")
            yield world
            world.run_clock(True)  # teardown budgets and backoffs run out in virtual time
        # The runtime is closed: whatever was spawned during the run and still lives escaped
        # its owner. Let finalizers that are just finishing run first.
        await trio.testing.wait_all_tasks_blocked()
        record.tasks_left = observer.left()
        kit.cancel_scope.cancel()


@final
class RunThread:
    """One seeded ``trio.run`` of ``await body(observer, directory)`` on a worker thread.

    :meth:`start` it, :meth:`wait` for it, then :meth:`finish` (which fills in the record's
    leftover children and restores the scheduler). ``record`` gets the ERROR records the run
    logs, the exception that escaped it, and the hang, if it could never finish.
    """

    def __init__(
        self,
        spec: HarnessSpec,
        body: Callable[[Observer, Path | None], Awaitable[None]],
        *,
        record: RunRecord,
        seed: int,
    ) -> None:
        self.record = record
        self.observer = Observer(record, trio.testing.MockClock())
        self.observer.on_hang = self._hung
        self.done = threading.Event()
        self._capture = _ErrorCapture(record)
        self._body = body
        self._seed = seed
        self._stack = contextlib.ExitStack()
        self._children: set[int] | None = None
        self._directory = (
            Path(tempfile.mkdtemp(prefix="trio-agent-stress-")) if spec.needs_directory else None
        )
        self._thread = threading.Thread(
            target=self._target, name="trio-agent stress run", daemon=True
        )

    def start(self) -> None:
        """Seed the scheduler and start the run."""
        self._children = child_pids()
        self._stack.enter_context(seeded_scheduler(self._seed))
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` wall seconds for the run to end (or hang); False on timeout."""
        return self.done.wait(timeout)

    def finish(self) -> None:
        """After the run: clean up, reap leftover children, restore the scheduler."""
        if not self.done.is_set() and self.record.hang is None:
            self.record.hang = "the run did not finish within the wall-clock limit"
        if self.record.hang is None:
            self._thread.join()
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
        self._stack.close()
        self.record.children_left = _reap_new_children(self._children)

    def _target(self) -> None:
        capture = self._capture
        capture.thread = threading.get_ident()
        logging.getLogger().addHandler(capture)
        observer = self.observer
        try:
            trio.run(
                self._body,
                observer,
                self._directory,
                clock=observer.clock,
                instruments=[observer],
            )
        except BaseException as exc:
            self.record.errors.append(LoggedError(None, _describe(exc), exc))
        finally:
            logging.getLogger().removeHandler(capture)
            self.done.set()

    def _hung(self, description: str) -> None:
        self.record.hang = description
        logging.getLogger().removeHandler(self._capture)
        self.done.set()
        threading.Event().wait()  # park this thread for good: the run can never finish


def run_world(
    spec: HarnessSpec,
    body: Callable[[Observer, Path | None], Awaitable[None]],
    *,
    record: RunRecord,
    seed: int,
    wall_timeout: float = WALL_TIMEOUT,
) -> None:
    """Run ``body`` as one :class:`RunThread` to the end (or to a hang)."""
    run = RunThread(spec, body, record=record, seed=seed)
    run.start()
    run.wait(wall_timeout)
    run.finish()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = "; ".join(_describe(e) for e in exc.exceptions)
        return f"{type(exc).__name__}: {exc.message} [{inner}]"
    return f"{type(exc).__name__}: {exc}"


@final
class _ErrorCapture(logging.Handler):
    """Collects the ERROR records one run's thread logs."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__(logging.ERROR)
        self.record = record
        self.thread: int | None = None

    def emit(self, log: logging.LogRecord) -> None:
        if log.thread != self.thread:
            return
        exception = log.exc_info[1] if log.exc_info else None
        self.record.errors.append(LoggedError(log.name, log.getMessage(), exception))


# --- child processes --------------------------------------------------------------------------


def child_pids() -> set[int] | None:
    """This process's child pids (Linux ``/proc``), or ``None`` where they cannot be listed."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    try:
        return {
            int(pid) for task in tasks.iterdir() for pid in (task / "children").read_text().split()
        }
    except OSError:
        return None


def _reap_new_children(before: set[int] | None) -> list[int] | None:
    """Children spawned during the run that are still there; they are killed (so they cannot
    disturb the next run) and reported."""
    after = child_pids()
    if before is None or after is None:
        return None
    left = sorted(after - before)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, os.WNOHANG)
    return left
