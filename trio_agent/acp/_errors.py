"""The ACP server's errors."""

from __future__ import annotations

from typing import Any

from ..errors import TrioAgentError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "AcpError",
    "ConnectionClosedError",
    "RpcError",
    "invalid_params",
]

#: Invalid JSON (or a frame over the size limit, or not UTF-8).
PARSE_ERROR = -32700
#: The JSON is not a valid request object, or the request is not valid in the current state.
INVALID_REQUEST = -32600
#: The method does not exist (or is not offered).
METHOD_NOT_FOUND = -32601
#: The parameters do not fit the method.
INVALID_PARAMS = -32602
#: The server failed, or the turn ended with an error.
INTERNAL_ERROR = -32603
#: ACP: the session (or another named resource) does not exist.
RESOURCE_NOT_FOUND = -32002


class AcpError(TrioAgentError):
    """Base class of the errors of :mod:`trio_agent.acp`."""


class RpcError(AcpError):
    """A JSON-RPC error object: ``code``, ``message`` and optional ``data``.

    A method handler raises it to answer a request with an error; :meth:`JsonRpcPeer.request`
    raises it when the other side answered one of our requests with an error.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosedError(AcpError, ConnectionError):
    """The connection to the client closed before a request we sent was answered."""


def invalid_params(method: str, path: str, problem: str) -> RpcError:
    """``INVALID_PARAMS`` for ``method``, naming the offending ``path`` (``prompt[2].type``)."""
    return RpcError(
        INVALID_PARAMS, f"{method}: {path}: {problem}", {"path": path, "problem": problem}
    )
