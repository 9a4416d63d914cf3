"""Scenarios: the async function a stress run drives, bundled with the harness it needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeAlias, overload

import attrs

from ...llm import RetryPolicy
from ...lowlevel import Plugin
from ...tools import Tool
from .. import ScriptItem, TestHarness
from ._invariants import UserCheck
from ._world import HarnessSpec, PluginSpec

__all__ = ["Scenario", "ScenarioFn", "as_scenario", "scenario"]

#: What a scenario runs: ``async def drive(h: TestHarness) -> None``.
ScenarioFn: TypeAlias = Callable[[TestHarness], Awaitable[None]]


@attrs.frozen
class Scenario:
    """A stress scenario: ``fn`` drives agents on a harness built from ``harness``.

    Build one with the :func:`scenario` decorator. ``fn`` gets a
    :class:`~trio_agent.testing.TestHarness` with the scenario's tools and plugins mounted and
    must end on its own (typically ``await agent.wait_idle()``); it should not assert outcomes a
    cancel changes (put those in ``checks``).

    Attributes:
        checks: Your own checks, each called with the run's :class:`RunRecord`.
        allowed_errors: Regexes of ERROR log messages that are expected, not violations.
        timeout: Virtual seconds the scenario may run.
        cancel_deadline: Virtual seconds a cancelled turn has to end.
    """

    fn: ScenarioFn
    harness: HarnessSpec = attrs.field(factory=HarnessSpec)
    checks: tuple[UserCheck, ...] = ()
    allowed_errors: tuple[str, ...] = ()
    timeout: float = 600.0
    cancel_deadline: float = 10.0

    @property
    def name(self) -> str:
        """The scenario function's qualified name."""
        return str(getattr(self.fn, "__qualname__", repr(self.fn)))

    async def __call__(self, harness: TestHarness) -> None:
        await self.fn(harness)


@overload
def scenario(fn: ScenarioFn, /) -> Scenario: ...


@overload
def scenario(
    *,
    responses: Iterable[ScriptItem] = (),
    tools: Sequence[Tool] = (),
    plugins: Sequence[PluginSpec] = (),
    retry: RetryPolicy | None = None,
    persistence: Plugin | None = None,
    persistence_config: Any = None,
    max_parallel_tool_calls: int = 10,
    checks: Sequence[UserCheck] = (),
    allowed_errors: Sequence[str] = (),
    timeout: float = 600.0,
    cancel_deadline: float = 10.0,
    io_quiet: float | None = None,
) -> Callable[[ScenarioFn], Scenario]: ...


def scenario(
    fn: ScenarioFn | None = None,
    /,
    *,
    responses: Iterable[ScriptItem] = (),
    tools: Sequence[Tool] = (),
    plugins: Sequence[PluginSpec] = (),
    retry: RetryPolicy | None = None,
    persistence: Plugin | None = None,
    persistence_config: Any = None,
    max_parallel_tool_calls: int = 10,
    checks: Sequence[UserCheck] = (),
    allowed_errors: Sequence[str] = (),
    timeout: float = 600.0,
    cancel_deadline: float = 10.0,
    io_quiet: float | None = None,
) -> Scenario | Callable[[ScenarioFn], Scenario]:
    """Turn ``async def fn(h)`` into a :class:`Scenario` run on a harness with ``responses``
    (the scripted model), ``tools`` and ``plugins`` (``Plugin`` or ``(Plugin, config)``; a
    :func:`per_run` config is made fresh per run). ``io_quiet``: real seconds of quiet after
    which virtual time moves although real I/O is pending (set it when a plugin keeps a
    subprocess or a socket open, such as an MCP server over stdio; ``None``: the clock waits
    for every pending I/O).

    Define scenarios at module level: a failure is reported as a snippet that imports the
    scenario by name and calls :func:`replay` on it. ::

        @scenario(tools=[lookup], responses=[tool_call("c1", "lookup", {"q": "x"}), text("ok")])
        async def one_lookup(h):
            agent = h.agent()
            agent.send("look it up")
            await agent.wait_idle()
    """

    def build(fn: ScenarioFn) -> Scenario:
        return Scenario(
            fn,
            HarnessSpec(
                responses=tuple(responses),
                tools=tuple(tools),
                plugins=tuple(plugins),
                retry=retry,
                persistence=persistence,
                persistence_config=persistence_config,
                max_parallel_tool_calls=max_parallel_tool_calls,
                io_quiet=io_quiet,
            ),
            checks=tuple(checks),
            allowed_errors=tuple(allowed_errors),
            timeout=timeout,
            cancel_deadline=cancel_deadline,
        )

    return build if fn is None else build(fn)


def as_scenario(target: Scenario | ScenarioFn) -> Scenario:
    """``target`` itself, or a plain scenario function on the default harness."""
    if isinstance(target, Scenario):
        return target
    if callable(target):
        return Scenario(target)
    raise TypeError(
        f"expected a Scenario (see @scenario) or an async function taking the harness, got "
        f"{type(target).__name__}"
    )
