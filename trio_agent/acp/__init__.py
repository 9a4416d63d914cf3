"""``trio-agent acp``: an Agent Client Protocol server on trio.

ACP (JSON-RPC 2.0, newline-delimited, over stdio; protocol version 1) is how editors such as Zed
drive agents. The transport here is trio-agent's own; the message shapes are the spec's. Each
ACP session is one agent made with ``ctx.agents.create`` / ``resume`` whose ACP ``sessionId`` is
its trio-agent session id, so ``session/load`` continues a session in a new process. See
``docs/acp.md``.

* :func:`main_acp` is the ``trio-agent acp`` command; :func:`serve` runs the server on any pair
  of trio byte streams (for programs and tests).
* :class:`AcpApprovalService` / :class:`PermissionBridge` turn the tool pipeline's approvals into
  ``session/request_permission``.
* :func:`mount_client_mcp_servers` mounts the client's ``mcpServers`` (stdio and HTTP) on the
  session's agent when the ``mcp`` extra is installed; SSE servers are reported and skipped.

Errors::

    TrioAgentError
    └── AcpError
        ├── RpcError               a JSON-RPC error object (code, message, data)
        └── ConnectionClosedError  the client went away before answering (also ConnectionError)
"""

from ._errors import AcpError as AcpError
from ._errors import ConnectionClosedError as ConnectionClosedError
from ._errors import RpcError as RpcError
from ._main import main_acp as main_acp
from ._mcp import ClientMcpServer as ClientMcpServer
from ._mcp import mount_client_mcp_servers as mount_client_mcp_servers
from ._permissions import AcpApprovalService as AcpApprovalService
from ._permissions import PermissionAnswer as PermissionAnswer
from ._permissions import PermissionBridge as PermissionBridge
from ._permissions import PermissionQuestion as PermissionQuestion
from ._serve import serve as serve
from ._server import PROTOCOL_VERSION as PROTOCOL_VERSION
from ._server import AcpOptions as AcpOptions

__all__ = [
    "PROTOCOL_VERSION",
    "AcpApprovalService",
    "AcpError",
    "AcpOptions",
    "ClientMcpServer",
    "ConnectionClosedError",
    "PermissionAnswer",
    "PermissionBridge",
    "PermissionQuestion",
    "RpcError",
    "main_acp",
    "mount_client_mcp_servers",
    "serve",
]
