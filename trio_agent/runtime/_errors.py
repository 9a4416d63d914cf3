"""Errors raised by the plugin runtime."""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = [
    "InactiveContextError",
    "PluginConfigError",
    "ServiceConflictError",
    "ServiceNotFoundError",
]


class InactiveContextError(TrioAgentError, RuntimeError):
    """A registration or task was aimed at a fiber that is unloading, disposed or failed."""


class ServiceConflictError(TrioAgentError, RuntimeError):
    """A service name is already provided by another live fiber."""


class ServiceNotFoundError(TrioAgentError, LookupError, AttributeError):
    """``ctx.<name>`` was read but no live fiber provides ``name``."""


class PluginConfigError(TrioAgentError, ValueError):
    """A plugin's config did not structure into its ``Config`` class."""
