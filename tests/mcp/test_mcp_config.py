"""The McpServers config: strict structuring with key paths, secrets kept out of reprs."""

from __future__ import annotations

import pytest

from trio_agent.mcp import (
    HttpServerConfig,
    McpConfigError,
    McpServers,
    McpServersConfig,
    RestartPolicy,
    StdioServerConfig,
    parse_mcp_config,
)
from trio_agent.mcp._server import MAX_BACKOFF, Redactor, restart_delay
from trio_agent.runtime import Context, PluginConfigError
from trio_agent.tools import ToolRegistry


def test_a_full_config_structures() -> None:
    config = parse_mcp_config(
        {
            "startup_timeout": 5,
            "servers": [
                {
                    "name": "fs",
                    "command": "npx",
                    "args": ["-y", "pkg"],
                    "env": {"LOG": "warn", "PORT": 8080},
                    "env_passthrough": ["HOME"],
                    "cwd": "/tmp",
                    "timeout": 10,
                    "restart": {"max_attempts": 5, "backoff": 0.5},
                },
                {"name": "web", "url": "https://example.test/mcp", "headers": {"X-Key": "k"}},
            ],
        }
    )
    stdio, http = config.servers
    assert stdio == StdioServerConfig(
        name="fs",
        command="npx",
        args=("-y", "pkg"),
        env={"LOG": "warn", "PORT": "8080"},
        env_passthrough=("HOME",),
        cwd="/tmp",
        timeout=10.0,
        restart=RestartPolicy(max_attempts=5, backoff=0.5),
    )
    assert http == HttpServerConfig(
        name="web", url="https://example.test/mcp", headers={"X-Key": "k"}
    )
    assert config.startup_timeout == 5.0
    assert parse_mcp_config(None) == McpServersConfig()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"servers": [{"name": "a"}]}, "$.mcp.servers[0]: needs command"),
        (
            {"servers": [{"name": "a", "command": "x", "url": "http://h/"}]},
            "$.mcp.servers[0]: has both",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "args": "--flag"}]},
            "$.mcp.servers[0].args: got '--flag'",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "timeout": -1}]},
            "$.mcp.servers[0].timeout: got -1.0",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "timeout": True}]},
            "$.mcp.servers[0].timeout: got True",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "tiemout": 1}]},
            "$.mcp.servers[0]: unknown key(s) tiemout",
        ),
        ({"servers": [{"name": "a b", "command": "x"}]}, "$.mcp.servers[0].name: got 'a b'"),
        (
            {"servers": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]},
            "$.mcp.servers[1].name: 'a' is already the name of servers[0]",
        ),
        ({"servers": [{"name": "a", "url": "ftp://h/x"}]}, "$.mcp.servers[0].url: got 'ftp://h/x'"),
        (
            {"servers": [{"name": "a", "url": "http://h/", "headers": {"X": "a\r\nb"}}]},
            "$.mcp.servers[0].headers: the value of header X",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "env": {"1X": "v"}}]},
            "$.mcp.servers[0].env: '1X' is not",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "env_passthrough": ["A B"]}]},
            "$.mcp.servers[0].env_passthrough: got",
        ),
        (
            {"servers": [{"name": "a", "command": "x", "restart": {"max_attempts": -1}}]},
            "$.mcp.servers[0].restart.max_attempts: got -1",
        ),
        ({"servers": {"name": "a"}}, "$.mcp.servers: got dict"),
        ({"startup_timeout": 0}, "$.mcp.startup_timeout: got 0.0"),
        ([], "$.mcp: got list"),
    ],
)
def test_problems_name_their_key_path(data: object, problem: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(data)
    assert problem in str(caught.value)


def test_every_problem_is_reported() -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_config(
            {"servers": [{"name": "a", "command": "x", "args": 3}, {"name": "b", "url": "nope"}]}
        )
    assert "servers[0].args" in str(caught.value) and "servers[1].url" in str(caught.value)


def test_python_values_are_validated_too() -> None:
    with pytest.raises(McpConfigError, match=r"^timeout: got 0; expected a positive"):
        StdioServerConfig(name="a", command="x", timeout=0)
    with pytest.raises(McpConfigError, match=r"servers\[1\]\.name"):
        McpServersConfig(
            servers=(
                StdioServerConfig(name="a", command="x"),
                StdioServerConfig(name="a", command="y"),
            )
        )


def test_secrets_are_collected_and_never_in_a_repr() -> None:
    config = McpServersConfig(
        servers=(
            StdioServerConfig(name="a", command="x", env={"API_KEY": "sk-very-secret"}),
            HttpServerConfig(
                name="b", url="https://user:hunter22@h/mcp", headers={"Authorization": "Bearer tok"}
            ),
        )
    )
    assert config.secrets() == {"sk-very-secret", "hunter22", "Bearer tok"}
    text = repr(config)
    for secret in config.secrets():
        assert secret not in text
    assert "user:***@h" in text
    with pytest.raises(McpConfigError, match=r"'ftp://user:\*\*\*@h/'"):
        HttpServerConfig(name="b", url="ftp://user:hunter22@h/")
    with pytest.raises(McpConfigError, match="value of API_KEY") as caught:
        StdioServerConfig(name="a", command="x", env={"API_KEY": "sk-\0secret"})
    assert "sk-" not in str(caught.value)


def test_the_redactor_masks_longest_secrets_first_and_skips_tiny_ones() -> None:
    redact = Redactor.of(frozenset({"abc", "token", "token-extended"}))
    assert redact("a token-extended abc token") == "a *** abc ***"


def test_restart_delay_doubles_up_to_a_cap() -> None:
    policy = RestartPolicy(max_attempts=10, backoff=1.0)
    assert [restart_delay(policy, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert restart_delay(policy, 10) == MAX_BACKOFF
    assert restart_delay(RestartPolicy(backoff=45.0), 3) == 45.0


async def test_mounting_with_a_bad_mapping_names_the_plugin_and_the_path(ctx: Context) -> None:
    await ctx.plugin(ToolRegistry)
    with pytest.raises(PluginConfigError) as caught:
        await ctx.plugin(
            McpServers, {"servers": [{"name": "a", "command": "x", "timeout": "soon"}]}
        )
    assert "McpServers" in str(caught.value)
    assert "servers[0].timeout: got 'soon'; expected a number of seconds" in str(caught.value)


async def test_mounting_with_a_mapping_or_nothing_works(ctx: Context) -> None:
    await ctx.plugin(ToolRegistry)
    fiber = await ctx.plugin(McpServers, {"servers": []})
    assert isinstance(fiber.instance, McpServers) and fiber.instance.servers() == ()
    fiber = await ctx.plugin(McpServers)
    assert isinstance(fiber.instance, McpServers)
