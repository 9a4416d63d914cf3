"""``trio_agent.mcp``'s plugin and config surface (tests/test_exports.py pins the names)."""

from __future__ import annotations

import typing

import trio_agent.mcp


def test_the_plugins_config_is_nested() -> None:
    assert trio_agent.mcp.McpServers.Config is trio_agent.mcp.McpServersConfig
    assert trio_agent.mcp.McpServers.inject == ("tools",)
    assert typing.get_args(trio_agent.mcp.ServerState) == (
        "starting",
        "up",
        "restarting",
        "failed",
        "stopped",
    )
