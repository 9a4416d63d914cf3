"""Helpers for the tools tests: tiny agent doubles, invocations and canned tools."""

from __future__ import annotations

import attrs

from trio_agent.ids import CallId
from trio_agent.runtime import Context
from trio_agent.tools import Tool, ToolInvocation, tool


@attrs.frozen
class FakeAgent:
    """The least an agent is to the tools package: an id and a scoped context."""

    id: str
    ctx: Context


def make_agent(root: Context, agent_id: str) -> FakeAgent:
    return FakeAgent(agent_id, root.scope_context(agent_id))


def invocation(
    name: str, arguments: str = "{}", agent: FakeAgent | None = None, call_id: str = "call-1"
) -> ToolInvocation:
    return ToolInvocation(CallId(call_id), name, arguments, agent)


@tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return text


def named(name: str, reply: str = "ok") -> Tool:
    """A parameterless tool called ``name`` that answers ``reply``."""

    async def body(arguments: object, call: object) -> str:
        return reply

    return Tool(name, f"The {name} tool.", {"type": "object", "properties": {}}, body)
