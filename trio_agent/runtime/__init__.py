"""The plugin runtime: contexts, fibers, effects, services and events on trio.

See ``docs/architecture.md`` for the ownership model.
"""

from ._core import Context as Context
from ._core import Fiber as Fiber
from ._core import FiberState as FiberState
from ._core import Plugin as Plugin
from ._core import Scope as Scope
from ._core import Service as Service
from ._core import ServiceKey as ServiceKey
from ._core import open_runtime as open_runtime
from ._disposer import Disposer as Disposer
from ._errors import InactiveContextError as InactiveContextError
from ._errors import PluginConfigError as PluginConfigError
from ._errors import ServiceConflictError as ServiceConflictError
from ._errors import ServiceNotFoundError as ServiceNotFoundError
from ._events import Next as Next

__all__ = [
    "Context",
    "Disposer",
    "Fiber",
    "FiberState",
    "InactiveContextError",
    "Next",
    "Plugin",
    "PluginConfigError",
    "Scope",
    "Service",
    "ServiceConflictError",
    "ServiceKey",
    "ServiceNotFoundError",
    "open_runtime",
]
