"""Every server connection is owned by the plugin's fiber: unloading the plugin, closing the
agent it is mounted on, or closing the harness leaves no process behind - not even a server
that ignores a closed stdin and SIGTERM."""

from __future__ import annotations

import trio
from mcp_helpers import GUARD, leftover_processes, marked_processes, mount, stdio

from trio_agent.agent import Agent
from trio_agent.mcp import McpServers
from trio_agent.runtime import open_runtime
from trio_agent.session import ToolResultEvent
from trio_agent.testing import open_test_harness, text, tool_call, turn_end_reasons
from trio_agent.tools import ToolRegistry


async def test_unloading_the_plugin_stops_and_reaps_every_server(marker: str) -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(ToolRegistry)
        with trio.fail_after(GUARD):
            fiber = await ctx.plugin(
                McpServers,
                McpServers.Config(
                    servers=(
                        stdio(marker, name="plain"),
                        stdio(marker, "--stubborn", name="stubborn"),
                    )
                ),
            )
            assert len(marked_processes(marker)) == 2
            await fiber.dispose()
        assert leftover_processes(marker) == []
        registry = ctx.require(ToolRegistry)
        assert registry.get("plain__echo") is None and registry.get("stubborn__echo") is None


async def test_closing_the_harness_stops_and_reaps_every_server(marker: str) -> None:
    with trio.fail_after(GUARD):
        async with open_test_harness() as h:
            await mount(
                h.ctx, stdio(marker, name="plain"), stdio(marker, "--stubborn", name="stubborn")
            )
            assert len(marked_processes(marker)) == 2
    assert leftover_processes(marker) == []


async def test_agent_scoped_servers_are_the_agents_and_end_with_it(marker: str) -> None:
    script = [tool_call("c1", "mine__echo", {"text": "only mine"}), text("done")]
    with trio.fail_after(GUARD):
        async with open_test_harness(script) as h:

            async def setup(agent: Agent) -> None:
                await agent.ctx.plugin(
                    McpServers,
                    McpServers.Config(servers=(stdio(marker, "--stubborn", name="mine"),)),
                )

            handle = await h.ctx.agents.create(agent_id="a1", session_id="s1", setup=setup)
            agent = handle.agent
            other = h.agent("other")
            registry = h.ctx.require(ToolRegistry)
            assert "mine__echo" in {s.name for s in registry.schemas(agent)}
            assert registry.get("mine__echo") is None
            assert "mine__echo" not in {s.name for s in registry.schemas(other)}

            agent.send("echo something")
            await agent.wait_idle()
            assert turn_end_reasons(agent.session) == ["completed"]
            (result,) = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ]
            assert (result.is_error, result.text) == (False, "only mine")

            assert len(marked_processes(marker)) == 1
            await handle.aclose()
            assert leftover_processes(marker) == []
            assert other.status == "idle"
