"""Sub-agents: ``ctx.subagents``, children whose lifetimes nest inside their caller's.

Mount :class:`SubagentService` with definitions (from code or the ``subagents:`` section of
``trio-agent.yml``); the parent's model then gets the ``subagent`` tool
(``{task, agent?, mode?, background?}``), and programs call
``await ctx.subagents.run(SubagentRequest(parent=agent, task=...))``.

A child is an ordinary agent made with ``ctx.agents.create``: ids ``<parent>.<name>-<n>``, a
fresh session (``"spawn"``) or the parent's log up to its last closed turn (``"fork"``), its
definition's instructions as an agent-scoped system-prompt section, its own tools going
through the same global tool pipeline (and approvals) as every agent's. It runs inside the call
that asked for it: cancel the parent's turn and the child's turn ends ``aborted`` and the call
``ABORTED``; dispose the parent and the child is disposed first. Background children live in
the parent agent's scope nursery and are closed in the parent's stop/drain phase. See
``docs/subagents.md``.
"""

from ._config import SubagentsConfig as SubagentsConfig
from ._config import parse_subagents_config as parse_subagents_config
from ._errors import SubagentConfigError as SubagentConfigError
from ._errors import SubagentDepthError as SubagentDepthError
from ._errors import SubagentError as SubagentError
from ._errors import SubagentSchemaError as SubagentSchemaError
from ._errors import UnknownHandleError as UnknownHandleError
from ._errors import UnknownSubagentError as UnknownSubagentError
from ._run import FINAL_RESULT as FINAL_RESULT
from ._service import SubagentService as SubagentService
from ._tools import SUBAGENT_TOOLS as SUBAGENT_TOOLS
from ._types import START_EVENT as START_EVENT
from ._types import SubagentDefinition as SubagentDefinition
from ._types import SubagentInfo as SubagentInfo
from ._types import SubagentLink as SubagentLink
from ._types import SubagentMode as SubagentMode
from ._types import SubagentNotice as SubagentNotice
from ._types import SubagentReason as SubagentReason
from ._types import SubagentRequest as SubagentRequest
from ._types import SubagentResult as SubagentResult
from ._types import SubagentState as SubagentState
from ._types import SubagentStatus as SubagentStatus
from ._types import subagent_info as subagent_info
from ._types import subagent_links as subagent_links

__all__ = [
    "FINAL_RESULT",
    "START_EVENT",
    "SUBAGENT_TOOLS",
    "SubagentConfigError",
    "SubagentDefinition",
    "SubagentDepthError",
    "SubagentError",
    "SubagentInfo",
    "SubagentLink",
    "SubagentMode",
    "SubagentNotice",
    "SubagentReason",
    "SubagentRequest",
    "SubagentResult",
    "SubagentSchemaError",
    "SubagentService",
    "SubagentState",
    "SubagentStatus",
    "SubagentsConfig",
    "UnknownHandleError",
    "UnknownSubagentError",
    "parse_subagents_config",
    "subagent_info",
    "subagent_links",
]
