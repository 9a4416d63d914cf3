"""McpServers against the real test server over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import pytest
import trio
from mcp_helpers import GUARD, HttpServer, call, leftover_processes, mount
from test_mcp_cancel import cancel_mid_call_then_call_again

from trio_agent.llm import ImageBlock
from trio_agent.mcp import HttpServerConfig, RestartPolicy
from trio_agent.runtime import Context
from trio_agent.tools import TOOL_ERROR, ToolChange, ToolRegistry

# The SDK's HTTP transport drops httpx2's SSE iterators without closing them when it shuts a
# stream down; trio closes them when they are collected and warns. Not ours to fix.
pytestmark = [
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpx2\.:ResourceWarning"),
    pytest.mark.filterwarnings(r"ignore:Async generator 'httpcore2\.:ResourceWarning"),
]


def http(server: HttpServer, **fields: object) -> HttpServerConfig:
    return HttpServerConfig(name="web", url=server.url, **fields)  # type: ignore[arg-type]


async def test_tools_over_http_answer_with_the_configured_headers(
    ctx: Context, http_server: HttpServer
) -> None:
    await ctx.plugin(ToolRegistry)
    with trio.fail_after(GUARD):
        servers = await mount(ctx, http(http_server, headers={"X-Trio-Token": "tok-1234"}))
        assert servers.servers()[0].state == "up"
        assert servers.secrets() == {"tok-1234"}
        assert (await call(ctx, "web__echo", text="over http")).text == "over http"
        assert (await call(ctx, "web__header", name="X-Trio-Token")).text == "tok-1234"
        (block,) = (await call(ctx, "web__image")).content
        assert isinstance(block, ImageBlock)
        failed = await call(ctx, "web__fail", message="no")
        assert (failed.is_error, failed.code) == (True, TOOL_ERROR)
    assert leftover_processes(None, allowed=frozenset({http_server.pid})) == []


async def test_list_changed_over_http(ctx: Context, http_server: HttpServer) -> None:
    await ctx.plugin(ToolRegistry)
    changed = trio.Event()

    def on_change(change: ToolChange) -> None:
        if change.tool.name == "web__late":
            changed.set()

    with trio.fail_after(GUARD):
        await mount(ctx, http(http_server))
        ctx.on("tools/change", on_change)
        await call(ctx, "web__add_tool", name="late")
        await changed.wait()
        assert (await call(ctx, "web__late")).text == "I am late"


async def test_cancel_during_an_http_call(http_server: HttpServer) -> None:
    await cancel_mid_call_then_call_again(http(http_server))


async def test_an_unreachable_server_is_reported_and_retried(ctx: Context) -> None:
    await ctx.plugin(ToolRegistry)
    with trio.fail_after(GUARD):
        # Port 1 on the loopback: nothing listens there.
        servers = await mount(
            ctx,
            HttpServerConfig(
                name="gone",
                url="http://127.0.0.1:1/mcp",
                restart=RestartPolicy(max_attempts=1, backoff=0.01),
            ),
        )
        (status,) = servers.servers()
        assert status.state in ("restarting", "failed")
        assert status.error is not None and "connect" in status.error.lower()
