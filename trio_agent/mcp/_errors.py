"""Errors raised by the MCP integration.

::

    TrioAgentError
    └── McpError
        ├── McpConfigError (ValueError)             the McpServers config is invalid
        ├── McpToolNameError (ValueError)           two tools map to one trio-agent tool name
        └── McpServerUnavailableError (RuntimeError) wait_ready(): the server gave up or stopped

Problems of a single *call* (the server is down, it answered ``isError``, it went away during
the call) never raise: the tool's result is an error with code ``TOOL_ERROR``.
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = ["McpConfigError", "McpError", "McpServerUnavailableError", "McpToolNameError"]


class McpError(TrioAgentError):
    """Base class of the errors the MCP integration raises."""


class McpConfigError(McpError, ValueError):
    """The ``McpServers`` config is invalid; the message names the key path.

    Attributes:
        key: The config key the problem is about, relative to the object that holds it
            (``"timeout"``, ``"servers[2].name"``), or None. The message starts with it.
        detail: The message without the key.
    """

    def __init__(self, detail: str, *, key: str | None = None) -> None:
        super().__init__(detail if key is None else f"{key}: {detail}")
        self.key = key
        self.detail = detail


class McpToolNameError(McpError, ValueError):
    """Two tools would share one trio-agent tool name (after sanitising and shortening), or
    a server's tool name is already taken by another plugin's tool."""


class McpServerUnavailableError(McpError, RuntimeError):
    """:meth:`McpServers.wait_ready` cannot succeed: the server gave up restarting, or the
    plugin was unloaded."""
