"""Errors raised by the agent registry and agent implementations."""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = [
    "AgentClosedError",
    "AgentError",
    "AgentExistsError",
    "NoAgentFactoryError",
    "PersistenceUnavailableError",
]


class AgentError(TrioAgentError):
    """Base class of agent errors."""


class AgentExistsError(AgentError, ValueError):
    """An agent with this id is already registered."""


class NoAgentFactoryError(AgentError, LookupError):
    """``ctx.agents.create/resume`` was called but no agent loop plugin registered a factory."""


class PersistenceUnavailableError(AgentError, LookupError):
    """``resume`` needs a ``session_persistence`` service and none is mounted."""


class AgentClosedError(AgentError, RuntimeError):
    """The agent has been disposed; it accepts no more messages."""
