"""The one place that checks the optional MCP SDK is installed."""

from __future__ import annotations

try:
    import mcp
except ImportError as exc:
    raise ImportError(
        "trio_agent.mcp needs the MCP SDK, which is not installed: pip install 'trio-agent[mcp]'",
        name="mcp",
    ) from exc

__all__ = ["mcp"]
