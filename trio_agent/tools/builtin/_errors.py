"""Errors of the built-in workspace tools.

::

    TrioAgentError
    └── ToolError
        ├── BuiltinToolError                        a built-in tool call failed (model-facing)
        │   ├── WorkspacePathError (ValueError)     a path outside the workspace root, or malformed
        │   │   └── ProtectedPathError              a protected path (.git, the harness's files...)
        │   └── ShellPolicyError (PermissionError)  a command the shell policy refuses
        └── BuiltinToolsConfigError (ValueError)    an invalid BuiltinToolsConfig or workspace root

The tools never let a :class:`BuiltinToolError` escape: they turn it into an error
:class:`~trio_agent.llm.ToolResult` whose content is ``Error: <message>`` and whose code is the
exception's :attr:`~BuiltinToolError.code`. Programs meet them when they call
:meth:`Workspace.resolve` themselves.
"""

from __future__ import annotations

from typing import ClassVar

from .._errors import ToolError
from .._types import DENIED, TOOL_ERROR

__all__ = [
    "BuiltinToolError",
    "BuiltinToolsConfigError",
    "ProtectedPathError",
    "ShellPolicyError",
    "WorkspacePathError",
]


class BuiltinToolError(ToolError):
    """A built-in tool call failed; the message is written for the model (what was wrong, what
    to do instead)."""

    #: The :class:`~trio_agent.llm.ToolResult` code the tools report this error with.
    code: ClassVar[str] = TOOL_ERROR


class WorkspacePathError(BuiltinToolError, ValueError):
    """A path the workspace refuses: it leads outside the root (``..``, an absolute path
    elsewhere, a symbolic link pointing out) or cannot be a path at all (a NUL byte)."""

    code: ClassVar[str] = DENIED


class ProtectedPathError(WorkspacePathError):
    """A path the file tools never touch: ``.git``, the harness's own files (configuration,
    sessions, history), or a path matching a ``protect`` glob."""

    code: ClassVar[str] = DENIED


class ShellPolicyError(BuiltinToolError, PermissionError):
    """The shell policy refuses the command (shell denied, or no allowed prefix matches)."""

    code: ClassVar[str] = DENIED


class BuiltinToolsConfigError(ToolError, ValueError):
    """A :class:`BuiltinToolsConfig` value is invalid, or the workspace root is not a directory."""
