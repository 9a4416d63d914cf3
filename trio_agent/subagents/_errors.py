"""Errors raised by the sub-agent service.

::

    TrioAgentError
    └── SubagentError
        ├── SubagentConfigError (ValueError)    a definition or the plugin config is invalid
        ├── SubagentSchemaError (ValueError)    an output schema uses what the validator lacks
        ├── UnknownSubagentError (LookupError)  no definition of that name, or none chosen
        ├── UnknownHandleError (LookupError)    no background child with that handle
        └── SubagentDepthError (RuntimeError)   the depth limit refuses another level

What happens *inside* a child (its model fails, it runs out of steps, it never calls
``final_result``) is not raised: :class:`~trio_agent.subagents.SubagentResult` says so, and the
``subagent`` tool turns it into a ``TOOL_ERROR`` naming the child's session.
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = [
    "SubagentConfigError",
    "SubagentDepthError",
    "SubagentError",
    "SubagentSchemaError",
    "UnknownHandleError",
    "UnknownSubagentError",
]


class SubagentError(TrioAgentError):
    """Base class of the errors the sub-agent service raises."""


class SubagentConfigError(SubagentError, ValueError):
    """A :class:`~trio_agent.subagents.SubagentDefinition` or the ``subagents:`` config is
    invalid; the message names the key path.

    Attributes:
        key: The key the problem is about, relative to the object that holds it (``"name"``,
            ``"definitions[1].max_steps"``), or None. The message starts with it.
        detail: The message without the key.
    """

    def __init__(self, detail: str, *, key: str | None = None) -> None:
        super().__init__(detail if key is None else f"{key}: {detail}")
        self.key = key
        self.detail = detail


class SubagentSchemaError(SubagentError, ValueError):
    """An output schema is not a JSON schema the structured-output validator supports; the
    message names the place (``$.properties.items``) and the keyword."""


class UnknownSubagentError(SubagentError, LookupError):
    """The request names no registered definition (or names none while several exist)."""


class UnknownHandleError(SubagentError, LookupError):
    """No background child with that handle was started by this parent agent."""


class SubagentDepthError(SubagentError, RuntimeError):
    """The parent is already at the depth limit; the message says which limit and where it
    was recorded."""
