"""trio-agent: an LLM agent harness for trio.

Everything is a plugin on a shared :class:`~trio_agent.runtime.Context`; the agent loop is one
swappable plugin; every model-visible fact is an event in an append-only session log.
"""

from .errors import TrioAgentError as TrioAgentError
from .runtime import Context as Context
from .runtime import Disposer as Disposer
from .runtime import Service as Service
from .runtime import open_runtime as open_runtime

__version__ = "0.1.0"

__all__ = [
    "Context",
    "Disposer",
    "Service",
    "TrioAgentError",
    "open_runtime",
]
