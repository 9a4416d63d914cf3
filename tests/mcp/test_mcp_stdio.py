"""McpServers against the real test server over stdio: tools, results, list changes, the
environment, start-up failures, restarts."""

from __future__ import annotations

import logging

import pytest
import trio
from mcp_helpers import GUARD, call, mount, stdio

from trio_agent.llm import ImageBlock, TextBlock
from trio_agent.mcp import (
    McpServers,
    McpServerUnavailableError,
    RestartPolicy,
    StdioServerConfig,
)
from trio_agent.runtime import Context
from trio_agent.session import ToolResultEvent
from trio_agent.testing import open_test_harness, text, tool_call, turn_end_reasons
from trio_agent.tools import TOOL_ERROR, TOOL_TIMEOUT, ToolChange, ToolRegistry


@pytest.fixture
async def tools(ctx: Context) -> Context:
    await ctx.plugin(ToolRegistry)
    return ctx


async def test_tools_are_registered_with_the_servers_schema_and_answer(
    tools: Context, marker: str
) -> None:
    with trio.fail_after(GUARD):
        servers = await mount(tools, stdio(marker))
        registry = tools.require(ToolRegistry)
        (status,) = servers.servers()
        assert status.state == "up"
        assert "t__echo" in status.tools and "t__sleep" in status.tools
        echo = registry.get("t__echo")
        assert echo is not None
        assert echo.description == "Return the text unchanged."
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.parameters["required"] == ["text"]
        result = await call(tools, "t__echo", text="hello")
        assert (result.is_error, result.content) == (False, (TextBlock("hello"),))
        # Only readOnlyHint makes a tool read-only, and so safe to run in parallel.
        assert registry.is_concurrency_safe("t__echo")
        assert not registry.is_concurrency_safe("t__sleep")
        if hasattr(echo, "read_only"):
            assert (echo.read_only, registry.get("t__sleep").read_only) == (True, False)  # type: ignore[union-attr]


async def test_results_map_errors_images_and_resources(tools: Context, marker: str) -> None:
    with trio.fail_after(GUARD):
        await mount(tools, stdio(marker))
        failed = await call(tools, "t__fail", message="the disk is full")
        assert (failed.is_error, failed.code) == (True, TOOL_ERROR)
        assert "the disk is full" in failed.text
        image = await call(tools, "t__image")
        assert not image.is_error
        (block,) = image.content
        assert isinstance(block, ImageBlock) and block.media_type == "image/png"
        resource = await call(tools, "t__resource")
        assert resource.content == (
            TextBlock("see the resource"),
            TextBlock("[resource file:///notes.txt]\nthe notes"),
        )
        # The server checks the arguments against its schema.
        invalid = await call(tools, "t__echo", wrong="key")
        assert (invalid.is_error, invalid.code) == (True, TOOL_ERROR)


async def test_a_call_over_the_server_timeout_ends_tool_timeout(
    tools: Context, marker: str
) -> None:
    with trio.fail_after(GUARD):
        await mount(tools, stdio(marker, timeout=0.2))
        result = await call(tools, "t__sleep")
        assert result.code == TOOL_TIMEOUT
        # The server was told to stop, and the connection is still good.
        assert (await call(tools, "t__wait_cancelled", count=1)).text == "cancelled 1"


async def test_list_changed_relists_and_reregisters(tools: Context, marker: str) -> None:
    changes: list[tuple[str, str]] = []
    changed = trio.Event()

    def on_change(change: ToolChange) -> None:
        changes.append((change.action, change.tool.name))
        changed.set()

    with trio.fail_after(GUARD):
        await mount(tools, stdio(marker))
        tools.on("tools/change", on_change)
        assert (await call(tools, "t__add_tool", name="fresh.tool")).text == "added fresh.tool"
        await changed.wait()
        assert changes == [("register", "t__fresh_tool")]
        assert (await call(tools, "t__fresh_tool")).text == "I am fresh.tool"
        changed = trio.Event()
        await call(tools, "t__remove_tool", name="fresh.tool")
        await changed.wait()
        assert changes[-1] == ("unregister", "t__fresh_tool")
        assert tools.require(ToolRegistry).get("t__fresh_tool") is None


async def test_two_tools_with_one_name_are_refused_naming_both(tools: Context, marker: str) -> None:
    with trio.fail_after(GUARD):
        servers = await mount(
            tools, stdio(marker, "--collide", restart=RestartPolicy(max_attempts=0))
        )
        (status,) = servers.servers()
        assert status.state == "failed"
        assert status.error is not None
        assert "'a.b' and 'a_b'" in status.error and '"t__a_b"' in status.error


async def test_a_name_taken_by_another_plugin_is_a_clear_error(tools: Context, marker: str) -> None:
    with trio.fail_after(GUARD):
        first = await mount(tools, stdio(marker, name="one"))
        second = await mount(
            tools, stdio(marker, name="one", restart=RestartPolicy(max_attempts=0))
        )
    assert first.servers()[0].state == "up"
    (status,) = second.servers()
    assert status.state == "failed" and status.error is not None
    assert "one__" in status.error and "already registered" in status.error


async def test_environment_is_explicit(
    tools: Context, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIO_AGENT_TEST_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("TRIO_AGENT_TEST_PASSED", "passed-value")
    with trio.fail_after(GUARD):
        servers = await mount(
            tools,
            stdio(
                marker,
                env={"TRIO_AGENT_TEST_SET": "set-value"},
                env_passthrough=("TRIO_AGENT_TEST_PASSED", "TRIO_AGENT_TEST_ABSENT"),
            ),
        )
        seen = {
            name: (await call(tools, "t__env", name=name)).text
            for name in (
                "TRIO_AGENT_TEST_API_KEY",
                "TRIO_AGENT_TEST_PASSED",
                "TRIO_AGENT_TEST_SET",
                "TRIO_AGENT_TEST_ABSENT",
            )
        }
    assert seen == {
        "TRIO_AGENT_TEST_API_KEY": "<unset>",
        "TRIO_AGENT_TEST_PASSED": "passed-value",
        "TRIO_AGENT_TEST_SET": "set-value",
        "TRIO_AGENT_TEST_ABSENT": "<unset>",
    }
    assert servers.secrets() == {"set-value", "passed-value"}


async def test_servers_that_do_not_come_up_are_reported_and_the_rest_run_on(
    tools: Context, marker: str, caplog: pytest.LogCaptureFixture
) -> None:
    never = RestartPolicy(max_attempts=0)
    with trio.fail_after(GUARD):
        servers = await mount(
            tools,
            stdio(marker, "--die", name="dies", restart=never),
            StdioServerConfig(name="missing", command="/nonexistent/mcp-server", restart=never),
            stdio(marker, name="good"),
        )
        by_name = {s.name: s for s in servers.servers()}
        assert by_name["good"].state == "up"
        assert (await call(tools, "good__echo", text="still here")).text == "still here"
        assert by_name["dies"].state == "failed"
        assert "closed the connection" in (by_name["dies"].error or "")
        assert by_name["dies"].stderr == ("the test server refuses to start",)
        assert by_name["missing"].state == "failed"
        assert "/nonexistent/mcp-server" in (by_name["missing"].error or "")
    reported = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    for name in ("dies", "missing"):
        assert any(f"MCP server {name!r} did not come up" in m for m in reported), reported


async def test_secrets_are_masked_in_what_trio_agent_reports(
    tools: Context, marker: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-do-not-show-me"
    with trio.fail_after(GUARD):
        servers = await mount(
            tools,
            stdio(
                marker,
                "--die",
                env={"TRIO_AGENT_TEST_LEAK": secret},
                restart=RestartPolicy(max_attempts=0),
            ),
        )
    (status,) = servers.servers()
    assert status.stderr == ("my key is ***", "the test server refuses to start")
    assert secret not in repr(status)
    assert caplog.records
    assert not [r for r in caplog.records if secret in r.getMessage()]


async def test_a_startup_that_times_out_says_so(tools: Context, marker: str) -> None:
    with trio.fail_after(GUARD):
        servers = await mount(
            tools,
            stdio(marker, "--mute", restart=RestartPolicy(max_attempts=0)),
            startup_timeout=0.5,
        )
        with pytest.raises(McpServerUnavailableError, match=r"within 0\.5s"):
            await servers.wait_ready("t")


async def test_a_server_killed_mid_call_is_restarted_and_the_next_call_succeeds(
    marker: str,
) -> None:
    script = [
        tool_call("c1", "t__crash"),
        text("the server crashed"),
        tool_call("c2", "t__echo", {"text": "back"}),
        text("it is back"),
    ]
    with trio.fail_after(GUARD):
        async with open_test_harness(script) as h:
            servers = await mount(h.ctx, stdio(marker))
            first_pid = (await call(h.ctx, "t__pid")).text
            agent = h.agent()
            agent.send("crash it")
            await agent.wait_idle()
            await servers.wait_ready("t")
            agent.send("try again")
            await agent.wait_idle()
            assert turn_end_reasons(agent.session) == ["completed", "completed"]
            crashed, echoed = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ]
            assert (crashed.is_error, crashed.code) == (True, TOOL_ERROR)
            assert "went away during the call" in crashed.text
            assert (echoed.is_error, echoed.text) == (False, "back")
            assert (await call(h.ctx, "t__pid")).text != first_pid
            (status,) = servers.servers()
            assert (status.state, status.restarts) == ("up", 1)


async def test_a_server_that_keeps_dying_is_given_up_and_its_tools_say_so(
    tools: Context, marker: str
) -> None:
    with trio.fail_after(GUARD):
        servers = await mount(
            tools, stdio(marker, restart=RestartPolicy(max_attempts=1, backoff=0.01))
        )
        await call(tools, "t__crash")
        await servers.wait_ready("t")
        await call(tools, "t__crash")
        with pytest.raises(McpServerUnavailableError, match="gave up"):
            await servers.wait_ready("t")
        result = await call(tools, "t__echo", text="anyone?")
        assert (result.is_error, result.code) == (True, TOOL_ERROR)
        assert 'MCP server "t" is unavailable' in result.text
        assert "not restarted again" in result.text


async def test_wait_ready_names_the_known_servers(tools: Context, marker: str) -> None:
    with trio.fail_after(GUARD):
        servers = await mount(tools, stdio(marker))
        with pytest.raises(LookupError, match="the servers are t"):
            await servers.wait_ready("nope")
        await servers.wait_ready()


async def test_without_a_tool_registry_the_plugin_waits(ctx: Context) -> None:
    fiber = await ctx.plugin(McpServers, {"servers": []})
    assert fiber.instance is None  # pending until ctx.tools exists
    with trio.fail_after(GUARD):
        await ctx.plugin(ToolRegistry)
        await fiber.wait_active()
    assert isinstance(fiber.instance, McpServers)
