"""Plugin-runtime internals for plugin authors who need them: fibers, scopes and dispatch types.

Most code needs only :class:`trio_agent.Context`; reach for these to inspect a plugin's state,
wait for a fiber, or annotate a waterfall listener's ``next`` argument.
"""

from .runtime import Fiber as Fiber
from .runtime import FiberState as FiberState
from .runtime import InactiveContextError as InactiveContextError
from .runtime import Next as Next
from .runtime import Plugin as Plugin
from .runtime import PluginConfigError as PluginConfigError
from .runtime import Scope as Scope
from .runtime import ServiceConflictError as ServiceConflictError
from .runtime import ServiceNotFoundError as ServiceNotFoundError

__all__ = [
    "Fiber",
    "FiberState",
    "InactiveContextError",
    "Next",
    "Plugin",
    "PluginConfigError",
    "Scope",
    "ServiceConflictError",
    "ServiceNotFoundError",
]
