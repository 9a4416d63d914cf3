"""The agent loop: ``ReactLoopAgent`` and the ``AgentLoop`` plugin (``ctx.agent_loop``).

The inbox and the driver are package-internal (``_inbox``, ``_driver``); create agents through
``ctx.agent_loop.create`` or ``ctx.agents.create/resume``.
"""

from ._agent import ReactLoopAgent as ReactLoopAgent
from ._service import AgentConfig as AgentConfig
from ._service import AgentLoop as AgentLoop

__all__ = ["AgentConfig", "AgentLoop", "ReactLoopAgent"]
