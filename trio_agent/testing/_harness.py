"""A complete in-process harness on a scripted model, for testing plugins, tools and agents."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, final

import attrs

from ..agent import AgentOptions, AgentRegistry, RetryPlugin
from ..llm import LlmService, RetryPolicy, ScriptedAdapter
from ..llm._scripted import ScriptItem
from ..loop import AgentConfig, AgentLoop, ReactLoopAgent
from ..prompt import SystemPrompt
from ..runtime import Context, Plugin, open_runtime
from ..session import Session, SessionStore, TurnEnd
from ..tools import Tool, ToolRegistry

__all__ = ["TestHarness", "event_types", "open_test_harness", "turn_end_reasons"]


@final
@attrs.define(eq=False)
class TestHarness:
    """What :func:`open_test_harness` yields: the root context and the scripted model."""

    __test__ = False  # not a pytest test class

    ctx: Context
    model: ScriptedAdapter

    def agent(self, id: str = "agent", options: AgentOptions | None = None) -> ReactLoopAgent:
        """Create an agent owned by the root context (``ctx.agent_loop.create``)."""
        return self.ctx.require(AgentLoop).create(id, options)


@contextlib.asynccontextmanager
async def open_test_harness(
    responses: Iterable[ScriptItem] = (),
    *,
    tools: Sequence[Tool] = (),
    persona: str = "",
    retry: RetryPolicy | None = None,
    max_parallel_tool_calls: int = 10,
    teardown_timeout: float = 10.0,
    persistence: Plugin | None = None,
    persistence_config: Any = None,
    agents: Sequence[AgentConfig] = (),
) -> AsyncIterator[TestHarness]:
    """Open a runtime with every core service on a :class:`ScriptedAdapter` named ``scripted``.

    ``responses`` is the model's script; ``tools`` are registered globally; ``retry`` mounts the
    retry plugin with that policy (omit it for no retries); ``persistence`` mounts a
    ``session_persistence`` plugin (``MemoryPersistence``, ``JsonlPersistence`` ...) with
    ``persistence_config``, so ``ctx.agents.resume`` works; ``agents`` are the loop's
    configured agent rows. Agents created with :meth:`TestHarness.agent` use the scripted model.

    ::

        async with open_test_harness([text("hi")]) as h:
            agent = h.agent()
            agent.send("hello")
            await agent.wait_idle()
    """
    async with open_runtime(teardown_timeout=teardown_timeout) as ctx:
        await ctx.plugin(LlmService)
        model = ScriptedAdapter(name="scripted", responses=list(responses))
        ctx.require(LlmService).register(model, retry_policy=retry)
        await ctx.plugin(SessionStore)
        if persistence is not None:
            await ctx.plugin(persistence, persistence_config)
        await ctx.plugin(ToolRegistry)
        await ctx.plugin(SystemPrompt, {"persona": persona})
        await ctx.plugin(AgentRegistry)
        if retry is not None:
            await ctx.plugin(RetryPlugin, {"seed": 0})
        await ctx.plugin(
            AgentLoop,
            AgentLoop.Config(
                provider="scripted",
                model="scripted-model",
                max_parallel_tool_calls=max_parallel_tool_calls,
                agents=tuple(agents),
            ),
        )
        for tool in tools:
            ctx.require(ToolRegistry).register(tool)
        yield TestHarness(ctx, model)


def event_types(
    session: Session, *, skip: Iterable[str] = ("assistant/chunk",), since: int = 0
) -> list[str]:
    """The event types of ``session`` from seq ``since``, leaving out ``skip`` (chunks by default)."""
    skipped = set(skip)
    return [e.type for e in session.events[since:] if e.type not in skipped]


def turn_end_reasons(session: Session) -> list[str]:
    """The ``reason`` of every ``turn/end`` in ``session``, in order."""
    return [e.payload_as(TurnEnd).reason for e in session.events if e.type == TurnEnd.event_type]
