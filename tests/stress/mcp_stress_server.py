"""A small real MCP server (the SDK's ``MCPServer`` over stdio) for the stress tests: only
tools whose every argument is safe to draw at random (the MCP tests' server also has tools that
wait for other calls, crash or change its tool list).

    python tests/stress/mcp_stress_server.py --marker=X
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("trio-agent-stress", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool(annotations=READ_ONLY)
async def pause(seconds: float) -> str:
    """Wait a little (at most 50 ms of real time), then answer."""
    await anyio.sleep(min(max(seconds, 0.0), 0.05))
    return "paused"


@server.tool(annotations=READ_ONLY)
def fail(message: str) -> str:
    """Fail with ``message`` (a tool error, not a protocol one)."""
    raise ToolError(message)


if __name__ == "__main__":
    server.run()
