"""Tools: the ``ctx.tools`` registry, the ``@tool`` decorator and the guarded execution pipeline.

Mount :class:`ToolRegistry` (``await ctx.plugin(ToolRegistry)``), register tools built with
:func:`tool`, and execute model calls with ``await ctx.tools.execute(ToolInvocation(...))``.
Plugins shape execution through the events ``tools/pre-execute`` (→ :class:`Allow`,
:class:`Deny`, :class:`Ask`), ``tools/execute`` (around the dispatch), ``tools/post-execute``
(→ :class:`Accept`, :class:`Block`) and ``tools/result``, and through ``ctx.tools.guard()``.
"""

from ._decorator import tool as tool
from ._errors import ToolConflictError as ToolConflictError
from ._errors import ToolDefinitionError as ToolDefinitionError
from ._errors import ToolError as ToolError
from ._errors import ToolRestrictionError as ToolRestrictionError
from ._registry import Guard as Guard
from ._registry import ToolRegistry as ToolRegistry
from ._registry import render_value as render_value
from ._types import ABORTED as ABORTED
from ._types import ABORTED_BEFORE_DISPATCH as ABORTED_BEFORE_DISPATCH
from ._types import APPROVAL as APPROVAL
from ._types import DENIED as DENIED
from ._types import INVALID_ARGS as INVALID_ARGS
from ._types import TOOL_ERROR as TOOL_ERROR
from ._types import TOOL_OUTCOME_UNKNOWN as TOOL_OUTCOME_UNKNOWN
from ._types import TOOL_TIMEOUT as TOOL_TIMEOUT
from ._types import UNKNOWN_TOOL as UNKNOWN_TOOL
from ._types import Accept as Accept
from ._types import AgentLike as AgentLike
from ._types import Allow as Allow
from ._types import ApprovalAnswer as ApprovalAnswer
from ._types import ApprovalNotice as ApprovalNotice
from ._types import ApprovalRequest as ApprovalRequest
from ._types import ApprovalService as ApprovalService
from ._types import Approved as Approved
from ._types import Ask as Ask
from ._types import Block as Block
from ._types import Denied as Denied
from ._types import Deny as Deny
from ._types import PostExecute as PostExecute
from ._types import PostExecuteDecision as PostExecuteDecision
from ._types import PreExecuteDecision as PreExecuteDecision
from ._types import Tool as Tool
from ._types import ToolBody as ToolBody
from ._types import ToolCallContext as ToolCallContext
from ._types import ToolChange as ToolChange
from ._types import ToolExecution as ToolExecution
from ._types import ToolInvocation as ToolInvocation
from ._types import ToolResultNotice as ToolResultNotice
from ._types import aborted_result as aborted_result
from ._types import as_content as as_content
from ._types import error_result as error_result

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL",
    "DENIED",
    "INVALID_ARGS",
    "TOOL_ERROR",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "Accept",
    "AgentLike",
    "Allow",
    "ApprovalAnswer",
    "ApprovalNotice",
    "ApprovalRequest",
    "ApprovalService",
    "Approved",
    "Ask",
    "Block",
    "Denied",
    "Deny",
    "Guard",
    "PostExecute",
    "PostExecuteDecision",
    "PreExecuteDecision",
    "Tool",
    "ToolBody",
    "ToolCallContext",
    "ToolChange",
    "ToolConflictError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecution",
    "ToolInvocation",
    "ToolRegistry",
    "ToolRestrictionError",
    "ToolResultNotice",
    "aborted_result",
    "as_content",
    "error_result",
    "render_value",
    "tool",
]
