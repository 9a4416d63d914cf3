"""Helpers for the built-in tools tests."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from trio_agent.ids import CallId
from trio_agent.llm import ToolResult
from trio_agent.runtime import Context
from trio_agent.tools import ToolInvocation, ToolRegistry

#: The ``mount`` fixture: ``await mount(**config)`` mounts BuiltinTools on the workspace root.
Mount = Callable[..., Awaitable[None]]


async def call(ctx: Context, name: str, **arguments: Any) -> ToolResult:
    """Execute ``name`` through the real pipeline with JSON ``arguments``."""
    return await ctx.require(ToolRegistry).execute(
        ToolInvocation(CallId(f"call-{name}"), name, json.dumps(arguments))
    )


async def ok(ctx: Context, name: str, **arguments: Any) -> str:
    """The text of a successful call (fails the test on an error result)."""
    result = await call(ctx, name, **arguments)
    assert not result.is_error, result.text
    return result.text


async def fails(ctx: Context, name: str, code: str = "TOOL_ERROR", **arguments: Any) -> str:
    """The message of a failed call (``Error: `` removed), after checking its code."""
    result = await call(ctx, name, **arguments)
    assert result.is_error, result.text
    assert result.code == code, (result.code, result.text)
    assert result.text.startswith("Error: ")
    return result.text.removeprefix("Error: ")
