"""trio-agent: an LLM agent harness for trio.

Everything is a plugin on a shared :class:`Context`; the agent loop is one swappable plugin;
every model-visible fact is an event in an append-only session log; teardown is structural.

This module is the one import surface for programs. Plugin authors find the event payloads and
decision values in the subpackages (``trio_agent.agent``, ``trio_agent.tools``,
``trio_agent.session`` ...), the runtime internals in :mod:`trio_agent.lowlevel`, and fakes for
their tests in :mod:`trio_agent.testing`.
"""

from .agent import Agent as Agent
from .agent import AgentHandle as AgentHandle
from .agent import AgentOptions as AgentOptions
from .config import HarnessConfig as HarnessConfig
from .config import load_config as load_config
from .config import mount_config as mount_config
from .config import open_harness as open_harness
from .errors import TrioAgentError as TrioAgentError
from .llm import Message as Message
from .loop import ReactLoopAgent as ReactLoopAgent
from .runtime import Context as Context
from .runtime import Disposer as Disposer
from .runtime import Service as Service
from .runtime import ServiceKey as ServiceKey
from .runtime import open_runtime as open_runtime
from .session import Session as Session
from .tools import Tool as Tool
from .tools import ToolCallContext as ToolCallContext
from .tools import tool as tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentHandle",
    "AgentOptions",
    "Context",
    "Disposer",
    "HarnessConfig",
    "Message",
    "ReactLoopAgent",
    "Service",
    "ServiceKey",
    "Session",
    "Tool",
    "ToolCallContext",
    "TrioAgentError",
    "load_config",
    "mount_config",
    "open_harness",
    "open_runtime",
    "tool",
]
