"""The client's ``mcpServers``: parsed, then mounted on the session's agent.

ACP clients list MCP servers in ``session/new`` and ``session/load``. When the ``mcp`` extra is
installed, :func:`mount_client_mcp_servers` mounts them as agent-scoped servers of the
``McpServers`` plugin (``trio_agent.mcp``) on the session's agent: their tools are that
session's only, and closing the session (or the connection) stops them. Stdio and streamable
HTTP servers are mounted; SSE (deprecated by MCP) is not: such a server is reported and skipped,
and the session runs on without it. ``trio_agent.mcp`` is imported only here, and only when a
client actually lists a server: the core never imports the SDK.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ..agent import Agent
from ..redaction import Redactor
from ._errors import invalid_params

if TYPE_CHECKING:
    from ..mcp import ServerConfig

__all__ = [
    "ClientMcpServer",
    "mcp_available",
    "mount_client_mcp_servers",
    "parse_mcp_servers",
]

logger = logging.getLogger("trio_agent.acp")

JsonObject = dict[str, Any]

#: What a server name may hold in trio-agent (its tools are named ``<name>__<tool>``).
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@attrs.frozen
class ClientMcpServer:
    """One MCP server an ACP client asked the session to connect to.

    ``env`` and ``headers`` usually hold credentials: they are kept out of ``repr``, never
    logged or written to the session log, and registered with the process's redactor when the
    session mounts its servers.
    """

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)

    def secrets(self) -> tuple[str, ...]:
        """The values of :attr:`env` and :attr:`headers`."""
        return tuple(value for _, value in (*self.env, *self.headers))


def _pairs(method: str, value: object, path: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise invalid_params(
            method, path, f"expected an array of {{name, value}}, got {type(value).__name__}"
        )
    pairs = []
    for i, item in enumerate(value):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise invalid_params(method, f"{path}[{i}]", "expected {name: string, value: string}")
        pairs.append((item["name"], item["value"]))
    return tuple(pairs)


def _server(method: str, item: object, path: str) -> ClientMcpServer | None:
    if not isinstance(item, dict):
        raise invalid_params(method, path, f"expected an object, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise invalid_params(method, f"{path}.name", "expected a non-empty string")
    kind: Any = item.get("type", "stdio")
    if kind in ("http", "sse"):
        url = item.get("url")
        if not isinstance(url, str):
            raise invalid_params(method, f"{path}.url", "expected a string")
        headers = _pairs(method, item.get("headers", []), f"{path}.headers")
        return ClientMcpServer(name, kind, url=url, headers=headers)
    if kind != "stdio":
        logger.warning("%s: MCP server %r has an unknown transport %r; ignored", method, name, kind)
        return None
    command = item.get("command")
    if not isinstance(command, str) or not command:
        raise invalid_params(method, f"{path}.command", "expected a non-empty string")
    args = item.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise invalid_params(method, f"{path}.args", "expected an array of strings")
    env = _pairs(method, item.get("env", []), f"{path}.env")
    return ClientMcpServer(name, "stdio", command=command, args=tuple(args), env=env)


def parse_mcp_servers(method: str, params: dict[str, Any]) -> tuple[ClientMcpServer, ...]:
    """The ``mcpServers`` parameter of ``session/new`` or ``session/load`` (missing: none).

    Raises:
        RpcError: ``INVALID_PARAMS`` naming the offending path.
    """
    value = params.get("mcpServers", [])
    if not isinstance(value, list):
        raise invalid_params(method, "mcpServers", f"expected an array, got {type(value).__name__}")
    servers = (_server(method, item, f"mcpServers[{i}]") for i, item in enumerate(value))
    return tuple(s for s in servers if s is not None)


def mcp_available() -> bool:
    """Whether the ``mcp`` extra is installed (client MCP servers can be mounted); the SDK is
    looked up, not imported."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


def _config_name(name: str, used: set[str]) -> str:
    """``name`` as a trio-agent server name: unsafe characters become ``_``, at most 64
    characters, unique within the session (``_2``, ``_3``... on a clash)."""
    base = _UNSAFE_NAME.sub("_", name)[:_MAX_NAME] or "mcp"
    candidate, n = base, 1
    while candidate in used:
        n += 1
        suffix = f"_{n}"
        candidate = base[: _MAX_NAME - len(suffix)] + suffix
    used.add(candidate)
    return candidate


def _config(server: ClientMcpServer, name: str, cwd: str | None) -> ServerConfig:
    from ..mcp import HttpServerConfig, StdioServerConfig

    if server.transport == "stdio":
        assert server.command is not None
        return StdioServerConfig(
            name=name, command=server.command, args=server.args, env=dict(server.env), cwd=cwd
        )
    assert server.url is not None
    return HttpServerConfig(name=name, url=server.url, headers=dict(server.headers))


async def mount_client_mcp_servers(
    agent: Agent, servers: Sequence[ClientMcpServer], *, cwd: str | None = None
) -> tuple[JsonObject, ...]:
    """Mount the client's MCP servers on ``agent`` (agent-scoped ``McpServers``).

    Stdio servers run in ``cwd`` (the session's folder) with the client's ``env``; HTTP servers
    get the client's headers. Every ``env`` and header value is registered with the process's
    redactor first. Loading waits, bounded by the plugin's start-up timeout, until each server
    has listed its tools; one that does not come up keeps trying in the background. Nothing
    here fails the session: an SSE server, a server whose entry trio-agent cannot use, or a
    missing ``mcp`` extra is a warning in the log (names only, never env or headers).

    Returns:
        One report per server, in the client's order, for the response's ``_meta``:
        ``{"name", "state"}`` plus ``"tools"`` (their trio-agent names) or ``"error"``. The
        state is an ``McpServerStatus.state`` (``up``, ``starting``, ``restarting``,
        ``failed``), ``unsupported`` (SSE), ``invalid`` or ``unavailable`` (no ``mcp`` extra).
    """
    if not servers:
        return ()
    session_id = agent.session.id
    redactor = agent.ctx.get(Redactor)
    if redactor is not None:
        redactor.add(*(value for server in servers for value in server.secrets()))
    try:
        from ..mcp import McpConfigError
    except ImportError:
        logger.warning(
            "session %s: the client's MCP servers %s are not mounted: the mcp extra is not "
            "installed (pip install 'trio-agent[mcp]')",
            session_id,
            ", ".join(repr(s.name) for s in servers),
        )
        return tuple(
            {"name": s.name, "state": "unavailable", "error": "the mcp extra is not installed"}
            for s in servers
        )
    reports: list[JsonObject] = []
    configs: list[tuple[JsonObject, ServerConfig]] = []
    used: set[str] = set()
    for server in servers:
        report: JsonObject = {"name": server.name}
        reports.append(report)
        if server.transport == "sse":
            report.update(
                state="unsupported",
                error="the SSE transport is not supported; use the server's streamable HTTP "
                "endpoint",
            )
            logger.warning(
                "session %s: MCP server %r is not mounted: trio-agent does not support the SSE "
                "transport (use the server's streamable HTTP endpoint); the session runs "
                "without it",
                session_id,
                server.name,
            )
            continue
        try:
            config = _config(server, _config_name(server.name, used), cwd)
        except McpConfigError as exc:  # its message names fields, never env or header values
            report.update(state="invalid", error=str(exc))
            logger.warning(
                "session %s: MCP server %r is not mounted: %s", session_id, server.name, exc
            )
            continue
        if config.name != server.name:
            logger.info(
                "session %s: MCP server %r is mounted as %r (its tools are %s__<tool>)",
                session_id,
                server.name,
                config.name,
                config.name,
            )
        configs.append((report, config))
    if configs:
        await _mount(agent, configs)
    if redactor is not None:
        for report in reports:
            if "error" in report:
                report["error"] = redactor.redact(report["error"])
    return tuple(reports)


async def _mount(agent: Agent, configs: Sequence[tuple[JsonObject, ServerConfig]]) -> None:
    """Mount ``McpServers`` for ``configs`` on ``agent`` and fill in each one's report."""
    from ..mcp import McpError, McpServers

    session_id = agent.session.id
    try:
        fiber = await agent.ctx.plugin(
            McpServers, McpServers.Config(servers=tuple(config for _, config in configs))
        )
    except McpError as exc:
        logger.warning("session %s: the client's MCP servers are not mounted: %s", session_id, exc)
        for report, _ in configs:
            report.update(state="failed", error=str(exc))
        return
    plugin = fiber.instance
    assert isinstance(plugin, McpServers)
    statuses = {status.name: status for status in plugin.servers()}
    for report, config in configs:
        status = statuses[config.name]
        report["state"] = status.state
        if status.state == "up":
            report["tools"] = list(status.tools)
        else:
            report["error"] = status.error or "it did not come up in time"
