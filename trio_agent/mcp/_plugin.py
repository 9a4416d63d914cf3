"""The ``McpServers`` plugin: MCP servers' tools as trio-agent tools."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import final

import trio

from ..redaction import Redactor as ProcessRedactor
from ..runtime import Context, Service
from ..tools import ToolRegistry
from ._config import McpServersConfig, StdioServerConfig
from ._server import McpServerStatus, Redactor, ServerConnection

__all__ = ["McpServers"]

logger = logging.getLogger("trio_agent.mcp")


@final
class McpServers(Service):
    """Plugin: connect MCP servers and offer their tools, named ``<server>__<tool>``.

    Mount it after the tool registry, on the root context for tools every agent sees, or on
    an agent's context for tools only that agent sees::

        fiber = await ctx.plugin(McpServers, McpServers.Config(servers=(
            StdioServerConfig(name="fs", command="npx", args=("-y", "@modelcontextprotocol/server-filesystem", ".")),
        )))
        servers: McpServers = fiber.instance

    Loading waits (at most ``startup_timeout``) until every server has listed its tools, so
    the first prompt already sees them; a server that does not come up is logged as an error
    and keeps trying in the background under its restart policy, and the others run on.

    Every connection - the server subprocess, or the HTTP session - is a task in this
    plugin's fiber nursery: unloading the plugin, closing the agent it is mounted on, or
    closing the runtime stops the servers and reaps their processes (SIGKILL to the process
    group for a server that ignores its closed stdin and SIGTERM).

    The tools go through the ordinary tool pipeline. A call cancelled by the turn sends MCP's
    cancellation notification and ends ``ABORTED``; a call over the server's ``timeout`` ends
    ``TOOL_TIMEOUT``; ``isError`` and every server-side problem end ``TOOL_ERROR``, with a
    message saying what happened. A tool is concurrency-safe (and read-only) only when the
    server marks it ``readOnlyHint``.
    """

    inject = ("tools",)
    Config = McpServersConfig

    def __init__(self, ctx: Context, config: McpServersConfig) -> None:
        super().__init__(ctx, config)
        self._config = config
        registry = ctx.require(ToolRegistry)
        envs = {
            server.name: _environment(server)
            for server in config.servers
            if isinstance(server, StdioServerConfig)
        }
        passed = frozenset(value for env in envs.values() for value in env.values())
        self._secrets = config.secrets() | passed
        shared = ctx.get(ProcessRedactor)
        if shared is not None:  # the process's one redactor learns them at mount
            shared.add(*self._secrets)
        redact = Redactor.of(self._secrets)
        names: dict[str, str] = {}
        self._servers = {
            server.name: ServerConnection(
                server,
                registry,
                names,
                redact,
                config.startup_timeout,
                envs.get(server.name, {}),
            )
            for server in config.servers
        }

    async def start(self) -> None:
        """Start every server's connection task; wait (bounded) until each listed its tools."""
        for server in self._servers.values():
            self.ctx.start_soon(server.run, name=f"mcp server {server.name}")
        with trio.move_on_after(self._config.startup_timeout):
            for server in self._servers.values():
                await server.settled.wait()
        for status in self.servers():
            if status.state == "up":
                continue
            then = {
                "starting": "it keeps trying in the background",
                "restarting": "it is restarted in the background",
            }.get(status.state, "it is not restarted")
            logger.error(
                "MCP server %r did not come up: %s; %s. The other servers and the rest of the "
                "harness run on.%s",
                status.name,
                status.error or f"no answer within {self._config.startup_timeout:g}s",
                then,
                " Its last stderr lines: " + " | ".join(status.stderr[-3:])
                if status.stderr
                else "",
            )

    def servers(self) -> tuple[McpServerStatus, ...]:
        """The status of every configured server, in config order."""
        return tuple(server.status() for server in self._servers.values())

    async def wait_ready(self, name: str | None = None) -> None:
        """Wait until server ``name`` (or every server, with no name) is up.

        Raises:
            LookupError: no server of that name is configured.
            McpServerUnavailableError: a server gave up restarting, or the plugin stopped.
        """
        if name is None:
            for server in self._servers.values():
                await server.wait_ready()
            await trio.lowlevel.checkpoint()
            return
        named = self._servers.get(name)
        if named is None:
            raise LookupError(
                f"no MCP server {name!r} is configured; the servers are "
                f"{', '.join(self._servers) or '(none)'}"
            )
        await named.wait_ready()

    def secrets(self) -> frozenset[str]:
        """Every secret value of this plugin: ``env`` values and the passed-through
        environment values of stdio servers, header values and URL passwords of HTTP
        servers. A redactor masks these wherever text leaves the process."""
        return self._secrets


def _environment(server: StdioServerConfig) -> Mapping[str, str]:
    """What a stdio server gets on top of the SDK's baseline: the passed-through variables
    that are set, then ``env``."""
    env: dict[str, str] = {}
    for name in server.env_passthrough:
        value = os.environ.get(name)
        if value is None:
            logger.warning(
                "MCP server %r: env_passthrough names %s, which is not set; it is left out",
                server.name,
                name,
            )
        else:
            env[name] = value
    env.update(server.env)
    return env
