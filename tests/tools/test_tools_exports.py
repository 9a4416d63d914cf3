"""The public surface of trio_agent.tools is pinned."""

from __future__ import annotations

import trio_agent.tools
from trio_agent.errors import TrioAgentError
from trio_agent.tools import (
    ToolCallContext,
    ToolConflictError,
    ToolDefinitionError,
    ToolError,
    ToolRegistry,
    ToolRestrictionError,
)


def test_all_is_pinned() -> None:
    assert set(trio_agent.tools.__all__) == {
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "DENIED",
        "INVALID_ARGS",
        "TOOL_ERROR",
        "TOOL_TIMEOUT",
        "UNKNOWN_TOOL",
        "Accept",
        "AgentLike",
        "Allow",
        "ApprovalService",
        "Ask",
        "Block",
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
    }
    for name in trio_agent.tools.__all__:
        assert hasattr(trio_agent.tools, name), name


def test_codes_are_their_own_names() -> None:
    for code in (
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "DENIED",
        "INVALID_ARGS",
        "TOOL_ERROR",
        "TOOL_TIMEOUT",
        "UNKNOWN_TOOL",
    ):
        assert getattr(trio_agent.tools, code) == code


def test_error_tree() -> None:
    assert issubclass(ToolError, TrioAgentError)
    for cls in (ToolConflictError, ToolDefinitionError, ToolRestrictionError):
        assert issubclass(cls, ToolError) and issubclass(cls, ValueError)


def test_stateful_classes_are_final() -> None:
    for cls in (ToolRegistry, ToolCallContext):
        assert getattr(cls, "__final__", False) is True
    assert ToolRegistry.service_name == "tools"
