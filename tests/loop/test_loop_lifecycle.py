"""Agent lifecycle: creation, publication, setup rollback and the structural teardown order."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.agent import (
    AgentClosedError,
    AgentExistsError,
    AgentOptions,
    AgentRegistry,
    NoAgentFactoryError,
    PersistenceUnavailableError,
)
from trio_agent.loop import ReactLoopAgent
from trio_agent.runtime import Context, FiberState, open_runtime
from trio_agent.testing import event_types, hang, open_test_harness, text, turn_end_reasons
from trio_agent.tools import ToolCallContext, tool


def turn_ends(agent: Any) -> list[str]:
    return turn_end_reasons(agent.session)


async def test_create_publishes_session_then_agent_and_starts_once() -> None:
    async with open_test_harness([text("hi")]) as h:
        seen: list[str] = []
        h.ctx.on("session/created", lambda e: seen.append("session/created"))
        h.ctx.on("agent/created", lambda e: seen.append("agent/created"))
        h.ctx.on("agent/session-start", lambda e: seen.append(f"session-start:{e.source}"))
        agent = h.agent("a1")
        assert h.ctx.agents.get("a1") is agent
        assert agent.session.id.startswith("a1-session-")
        assert h.ctx.sessions.get(agent.session.id) is agent.session
        await trio.testing.wait_all_tasks_blocked()
        assert seen == ["session/created", "agent/created", "session-start:startup"]
        with pytest.raises(AgentExistsError):
            h.agent("a1")


async def test_teardown_order_is_structural() -> None:
    order: list[str] = []
    async with open_test_harness([hang(partial="partial")]) as h:
        agent = h.agent("a1")
        agent.ctx.on("agent/turn-end", lambda e: order.append(f"turn-end:{e.reason}"))
        agent.ctx.on("agent/status", lambda e: order.append(f"status:{e.status}"))
        agent.ctx.on("agent/disposed", lambda e: order.append("agent/disposed (scoped)"))
        h.ctx.on("session/disposed", lambda e: order.append("session/disposed"))
        agent.ctx.defer(lambda: order.append("scope unwound"))

        async def flush(event: Any) -> None:
            order.append("flush")

        h.ctx.on("session/flush", flush)
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        order.clear()
        await agent.aclose()
        assert order == [
            "turn-end:disposed",
            "flush",
            "status:disposed",
            "agent/disposed (scoped)",
            "session/disposed",
            "scope unwound",
        ]
        assert agent.status == "disposed"
        assert h.ctx.agents.get("a1") is None
        assert agent.session.detached
        assert agent.ctx.fiber.state is FiberState.DISPOSED
        assert turn_ends(agent) == ["disposed"]
        assert event_types(agent.session)[-3:] == ["assistant/message", "step/end", "turn/end"]


async def test_aclose_is_idempotent_and_concurrent_callers_share_it() -> None:
    async with open_test_harness([hang()]) as h:
        agent = h.agent()
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        disposed: list[int] = []
        agent.ctx.on("agent/disposed", lambda e: disposed.append(1))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.aclose)
            nursery.start_soon(agent.aclose)
        await agent.aclose()
        assert disposed == [1]
        with pytest.raises(AgentClosedError):
            agent.send("too late")


async def test_cancel_then_aclose_in_the_same_tick_ends_disposed() -> None:
    async with open_test_harness([hang()]) as h:
        agent = h.agent()
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.aclose()
        assert turn_ends(agent) == ["disposed"]


async def test_outstanding_flush_is_awaited_not_cancelled() -> None:
    release = trio.Event()
    finished: list[str] = []
    async with open_test_harness([hang()]) as h:
        agent = h.agent()

        async def slow_flush(event: Any) -> None:
            await release.wait()
            finished.append("flush completed")

        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()  # the model hangs (the prompts are flushed)
        h.ctx.on("session/flush", slow_flush)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.aclose)
            await trio.testing.wait_all_tasks_blocked()
            assert finished == []
            status = agent.status  # a local: mypy would keep agent.status narrowed
            assert status != "disposed"  # still draining: waiting for the flush
            release.set()
        assert finished == ["flush completed"]
        assert agent.status == "disposed"


async def test_agent_scope_tasks_are_cancelled_by_the_close() -> None:
    log: list[str] = []
    async with open_test_harness() as h:
        agent = h.agent()

        async def background() -> None:
            try:
                await trio.sleep_forever()
            finally:
                log.append("cancelled")

        agent.ctx.start_soon(background)
        await trio.testing.wait_all_tasks_blocked()
        await agent.aclose()
        assert log == ["cancelled"]


async def test_owner_fiber_unload_disposes_its_agents() -> None:
    ends: list[str] = []
    async with open_test_harness([hang(partial="x")]) as h:
        made: list[Any] = []

        def plugin(ctx: Context, config: None) -> None:
            agent = ctx.agent_loop.create("owned")
            made.append(agent)
            agent.send("go")

        h.ctx.on("agent/turn-end", lambda e: ends.append(e.reason))
        fiber = await h.ctx.plugin(plugin)
        await trio.testing.wait_all_tasks_blocked()
        await fiber.dispose()
        agent = made[0]
        assert ends == ["disposed"]
        assert agent.status == "disposed"
        assert h.ctx.agents.get("owned") is None
        assert agent.session.detached


async def test_runtime_close_disposes_a_running_agent_and_leaves_no_task() -> None:
    async with open_test_harness([hang(partial="x")]) as h:
        agent = h.agent()
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
    assert turn_ends(agent) == ["disposed"]
    assert agent.status == "disposed"


async def test_factory_create_with_setup_registers_scoped_tools() -> None:
    @tool
    async def secret() -> str:
        """Only for agent b."""
        return "42"

    async with open_test_harness([text("a"), text("b")]) as h:

        def setup(agent: Any) -> None:
            agent.ctx.tools.register(secret)

        handle = await h.ctx.agents.create(agent_id="b", session_id="b-session", setup=setup)
        other = h.agent("other")
        assert [t.name for t in h.ctx.tools.schemas(handle.agent)] == ["secret"]
        assert h.ctx.tools.schemas(other) == ()
        async with handle:
            handle.agent.send("hi")
            await handle.agent.wait_idle()
            assert [t.name for t in h.model.requests[0].tools] == ["secret"]
        assert handle.agent.status == "disposed"
        assert h.ctx.tools.schemas() == ()


async def test_failed_setup_publishes_nothing_and_rolls_back() -> None:
    async with open_test_harness() as h:
        published: list[str] = []
        h.ctx.on("agent/created", lambda e: published.append("agent"))
        h.ctx.on("session/created", lambda e: published.append("session"))
        undone: list[str] = []

        async def setup(agent: Any) -> None:
            agent.ctx.defer(lambda: undone.append("setup effect undone"))
            raise RuntimeError("setup failed")

        with pytest.raises(RuntimeError, match="setup failed"):
            await h.ctx.agents.create(agent_id="x", session_id="x-session", setup=setup)
        assert published == []
        assert undone == ["setup effect undone"]
        assert h.ctx.agents.get("x") is None
        assert h.ctx.sessions.get("x-session") is None
        # The ids are free again.
        handle = await h.ctx.agents.create(agent_id="x", session_id="x-session")
        await handle.aclose()


async def test_create_and_resume_need_their_services() -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(AgentRegistry)
        with pytest.raises(NoAgentFactoryError, match="mount an agent loop plugin"):
            await ctx.agents.create(agent_id="a", session_id="s")
    async with open_test_harness() as h:
        with pytest.raises(PersistenceUnavailableError, match="session_persistence"):
            await h.ctx.agents.resume(agent_id="a", resume_session_id="s")


async def test_options_are_validated_and_frozen() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AgentOptions(max_tokens=0)
    async with open_test_harness([text("x")]) as h:
        agent = h.agent("a", AgentOptions(model="special", max_tokens=99))
        agent.send("hi")
        await agent.wait_idle()
        config = h.model.requests[0].config
        assert (config.model, config.max_tokens) == ("special", 99)


async def test_model_and_cwd_prompt_variables() -> None:
    async with open_test_harness([text("x")], persona="Model {{model}} in {{cwd}}.") as h:
        agent = h.ctx.agent_loop.create("a", AgentOptions(model="m-7"), {"cwd": "/tmp"})
        agent.send("hi")
        await agent.wait_idle()
        assert h.model.requests[0].system == "Model m-7 in /tmp."


async def test_close_from_the_agents_own_tool_does_not_deadlock() -> None:
    from trio_agent.testing import tool_call

    @tool
    async def quit(*, call: ToolCallContext) -> str:
        """Stop the agent."""
        assert isinstance(call.agent, ReactLoopAgent)
        await call.agent.aclose()
        return "bye"

    async with open_test_harness([tool_call("c1", "quit", "{}")], tools=[quit]) as h:
        agent = h.agent()
        agent.send("quit")
        with trio.fail_after(5):
            await agent.wait_idle()
        assert agent.status == "disposed"
        assert turn_ends(agent) == ["disposed"]


async def test_a_session_detached_under_the_agent_does_not_crash_its_owner() -> None:
    async with open_test_harness([text("never")]) as h:
        agent = h.agent()
        errors: list[Any] = []
        agent.ctx.on("agent/error", lambda e: errors.append(e.error))
        await trio.testing.wait_all_tasks_blocked()
        agent.ctx.sessions.detach(agent.session)
        agent.send("hi")
        with trio.fail_after(5):
            await agent.wait_idle()
        assert agent.status == "disposed"
        assert len(errors) == 1
        assert "detached" in str(errors[0])
        other = h.agent("other")  # the runtime and the loop plugin are fine
        assert other.status == "idle"


async def test_a_long_lived_owner_does_not_accumulate_closed_agents() -> None:
    async with open_test_harness() as h:
        before = len(h.ctx.fiber._effects)
        for n in range(50):
            handle = await h.ctx.agents.create(agent_id=f"a{n}", session_id=f"s{n}")
            await handle.aclose()
        assert len(h.ctx.fiber._effects) == before


async def test_unloading_the_loop_closes_the_agents_it_drives() -> None:
    """An agent owned by another plugin does not outlive the loop plugin that drives it."""
    async with open_test_harness([hang(partial="x")]) as h:
        ends: list[str] = []
        made: list[Any] = []

        def owner(ctx: Context, config: None) -> None:
            made.append(ctx.agent_loop.create("owned"))

        owner_fiber = await h.ctx.plugin(owner)
        h.ctx.on("agent/turn-end", lambda e: ends.append(e.reason))
        agent = made[0]
        agent.send("go")
        await trio.testing.wait_all_tasks_blocked()
        await h.ctx.agent_loop.ctx.fiber.dispose()
        assert ends == ["disposed"]
        assert agent.status == "disposed"
        assert agent.session.detached
        assert h.ctx.agents.get("owned") is None
        assert owner_fiber.state is FiberState.ACTIVE  # the owner lives on


async def test_a_long_lived_loop_does_not_accumulate_closed_agents() -> None:
    async with open_test_harness() as h:
        loop_fiber = h.ctx.agent_loop.ctx.fiber
        before = len(loop_fiber._effects)
        for n in range(20):
            handle = await h.ctx.agents.create(agent_id=f"a{n}", session_id=f"s{n}")
            assert len(loop_fiber._effects) == before + 1
            await handle.aclose()
        assert len(loop_fiber._effects) == before
