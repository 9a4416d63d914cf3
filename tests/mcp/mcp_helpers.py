"""Helpers for the MCP tests: the test server's configs, tool calls, process counting."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import attrs

from trio_agent.ids import CallId
from trio_agent.llm import ToolResult
from trio_agent.mcp import McpServers, RestartPolicy, ServerConfig, StdioServerConfig
from trio_agent.runtime import Context
from trio_agent.tools import ToolInvocation, ToolRegistry

SERVER = Path(__file__).with_name("mcp_server.py")

#: Generous guard for anything that waits on a real subprocess.
GUARD = 60.0


@attrs.frozen
class HttpServer:
    """The test server running over streamable HTTP on 127.0.0.1 (the ``http_server``
    fixture)."""

    url: str
    pid: int


def stdio(
    marker: str,
    *options: str,
    name: str = "t",
    restart: RestartPolicy | None = None,
    **fields: Any,
) -> StdioServerConfig:
    """The test server over stdio, findable by ``marker`` in its command line."""
    return StdioServerConfig(
        name=name,
        command=sys.executable,
        args=(str(SERVER), *options, f"--marker={marker}"),
        restart=restart or RestartPolicy(max_attempts=2, backoff=0.05),
        **fields,
    )


async def mount(ctx: Context, *servers: ServerConfig, startup_timeout: float = 30.0) -> McpServers:
    """Mount ``McpServers`` on ``ctx`` and return the plugin instance."""
    fiber = await ctx.plugin(
        McpServers, McpServers.Config(servers=servers, startup_timeout=startup_timeout)
    )
    plugin = fiber.instance
    assert isinstance(plugin, McpServers)
    return plugin


async def call(ctx: Context, tool: str, /, **arguments: Any) -> ToolResult:
    """Run one call of the global tool ``tool`` through the tool pipeline."""
    registry = ctx.require(ToolRegistry)
    return await registry.execute(ToolInvocation(CallId("c1"), tool, json.dumps(arguments)))


def _processes() -> list[tuple[int, int, str, str]]:
    """(pid, ppid, state, command line) of every process we can see."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # it exited while we looked
        # The command name in parentheses may itself contain spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        found.append((int(entry.name), int(fields[1]), fields[0], cmdline))
    return found


def leftover_processes(marker: str | None, *, allowed: frozenset[int] = frozenset()) -> list[str]:
    """Processes a test left behind: any carrying ``marker`` in its command line (orphans
    included), and any child of this process, zombies included, except ``allowed``."""
    me = os.getpid()
    return [
        f"pid {pid} ({state}): {cmdline or '<no command line: a zombie>'}"
        for pid, ppid, state, cmdline in _processes()
        if pid != me
        and pid not in allowed
        and (ppid == me or (marker is not None and marker in cmdline))
    ]


def marked_processes(marker: str) -> list[int]:
    """Live processes carrying ``marker``."""
    return [pid for pid, _, state, cmdline in _processes() if marker in cmdline and state != "Z"]
