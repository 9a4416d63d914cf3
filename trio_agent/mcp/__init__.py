"""MCP tools on the official ``mcp`` SDK: the :class:`McpServers` plugin.

Install the extra (``pip install 'trio-agent[mcp]'``); the core never imports this package.
Mount the plugin after the tool registry::

    from trio_agent.mcp import McpServers, StdioServerConfig

    await ctx.plugin(McpServers, McpServers.Config(servers=(
        StdioServerConfig(name="fs", command="npx",
                          args=("-y", "@modelcontextprotocol/server-filesystem", ".")),
    )))

Each server's tools become trio-agent tools named ``<server>__<tool>`` (see
:func:`mcp_tool_name`), global when the plugin is mounted on a plugin's context, agent-scoped
when it is mounted on ``agent.ctx``. docs/mcp.md has the whole story.
"""

from . import _sdk as _sdk  # first: a clear ImportError when the extra is missing
from ._config import HttpServerConfig as HttpServerConfig
from ._config import McpServersConfig as McpServersConfig
from ._config import RestartPolicy as RestartPolicy
from ._config import ServerConfig as ServerConfig
from ._config import StdioServerConfig as StdioServerConfig
from ._config import parse_mcp_config as parse_mcp_config
from ._errors import McpConfigError as McpConfigError
from ._errors import McpError as McpError
from ._errors import McpServerUnavailableError as McpServerUnavailableError
from ._errors import McpToolNameError as McpToolNameError
from ._names import mcp_tool_name as mcp_tool_name
from ._plugin import McpServers as McpServers
from ._server import McpServerStatus as McpServerStatus
from ._server import ServerState as ServerState

__all__ = [
    "HttpServerConfig",
    "McpConfigError",
    "McpError",
    "McpServerStatus",
    "McpServerUnavailableError",
    "McpServers",
    "McpServersConfig",
    "McpToolNameError",
    "RestartPolicy",
    "ServerConfig",
    "ServerState",
    "StdioServerConfig",
    "mcp_tool_name",
    "parse_mcp_config",
]
