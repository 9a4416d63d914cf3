"""Errors raised by the tools package.

::

    TrioAgentError
    └── ToolError
        ├── ToolConflictError (ValueError)     a name is already registered in that layer
        ├── ToolDefinitionError (ValueError)   a tool (or a @tool function) is malformed
        └── ToolRestrictionError (ValueError)  restrict() was misused

Problems of a single *call* (unknown tool, bad arguments, a raising body, a denial, a timeout)
never raise: :meth:`ToolRegistry.execute` turns them into error results.
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = ["ToolConflictError", "ToolDefinitionError", "ToolError", "ToolRestrictionError"]


class ToolError(TrioAgentError):
    """Base class of the errors the tools package raises."""


class ToolConflictError(ToolError, ValueError):
    """A tool name is already registered in the same layer (global, or one agent's scope)."""


class ToolDefinitionError(ToolError, ValueError):
    """A tool definition is invalid: a bad name or timeout, or an unsupported annotation."""


class ToolRestrictionError(ToolError, ValueError):
    """``restrict()`` was called outside an agent scope, empty, or with unknown names."""
