"""The client's ``mcpServers``: parsed, recorded on the session, and handed to one hook.

ACP clients list MCP servers in ``session/new`` and ``session/load``. trio-agent's MCP support
(``trio_agent.mcp``) is not part of ACP mode yet, so :func:`mount_client_mcp_servers` records
them and mounts nothing; ``initialize`` says so (``mcpCapabilities`` all false, and a note in
``_meta``). When MCP lands, that one function mounts them as agent-scoped MCP servers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from ..agent import Agent
from ._errors import invalid_params

__all__ = ["ClientMcpServer", "mount_client_mcp_servers", "parse_mcp_servers"]

logger = logging.getLogger("trio_agent.acp")


@attrs.frozen
class ClientMcpServer:
    """One MCP server an ACP client asked the session to connect to.

    ``env`` and ``headers`` usually hold credentials: they are kept out of ``repr`` and never
    logged or written to the session log.
    """

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), repr=False)


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


async def mount_client_mcp_servers(agent: Agent, servers: Sequence[ClientMcpServer]) -> None:
    """Mount the client's MCP servers for ``agent`` (the hook for ``trio_agent.mcp``).

    Today it mounts nothing: trio-agent's MCP integration is not wired into ACP mode yet. It logs
    one warning naming the servers (names only, never their env or headers), so a user who
    configured MCP servers in the editor learns why their tools are missing.
    """
    if servers:
        logger.warning(
            "session %s: the client's MCP servers %s were recorded but not mounted; "
            "trio-agent does not connect client MCP servers in ACP mode yet",
            agent.session.id,
            ", ".join(repr(s.name) for s in servers),
        )
