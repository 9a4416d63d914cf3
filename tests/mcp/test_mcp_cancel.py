"""A turn cancelled while an MCP tool runs ends ``aborted``; the server is told (MCP's
cancellation notification) and the next call works."""

from __future__ import annotations

import trio
from mcp_helpers import GUARD, call, mount, stdio

from trio_agent.mcp import ServerConfig
from trio_agent.session import ToolResultEvent
from trio_agent.testing import open_test_harness, text, tool_call, turn_end_reasons
from trio_agent.tools import ABORTED


async def cancel_mid_call_then_call_again(server: ServerConfig) -> None:
    name = server.name
    script = [
        tool_call("c1", f"{name}__sleep"),
        tool_call("c2", f"{name}__echo", {"text": "next call"}),
        text("done"),
    ]
    with trio.fail_after(GUARD):
        async with open_test_harness(script) as h:
            await mount(h.ctx, server)
            agent = h.agent()
            agent.send("sleep, please")
            # Returns once the server is inside the agent's call to sleep.
            assert (await call(h.ctx, f"{name}__wait_sleeping")).text == "sleeping"
            agent.cancel()
            await agent.wait_idle()
            assert turn_end_reasons(agent.session) == ["aborted"]
            results = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ]
            assert [r.code for r in results] == [ABORTED]
            # The server saw the cancellation: its sleep was interrupted.
            assert (await call(h.ctx, f"{name}__wait_cancelled", count=1)).text == "cancelled 1"

            agent.send("again")
            await agent.wait_idle()
            assert turn_end_reasons(agent.session) == ["aborted", "completed"]
            last = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ][-1]
            assert (last.is_error, last.text) == (False, "next call")


async def test_cancel_during_a_stdio_call(marker: str) -> None:
    await cancel_mid_call_then_call_again(stdio(marker))
