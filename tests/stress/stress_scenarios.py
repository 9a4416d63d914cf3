"""Scenarios shared by the stress tests (module level, so failure snippets can import them)."""

from __future__ import annotations

from typing import Any

import trio

from trio_agent.runtime import Context
from trio_agent.testing import TestHarness, text, tool_call
from trio_agent.testing.stress import scenario
from trio_agent.tools import tool


@tool
async def slow(seconds: float) -> str:
    """Sleep a while (virtual time), then answer."""
    await trio.sleep(seconds)
    return "slept"


@tool(concurrency_safe=True)
async def chatty(rounds: int) -> str:
    """Yield to the scheduler ``rounds`` times (runs in parallel with other calls)."""
    for _ in range(rounds):
        await trio.lowlevel.checkpoint()
    return f"{rounds} rounds"


class ToolsPlugin:
    """Registers :func:`slow` (a plugin to unload mid-turn)."""

    inject = ("tools",)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        ctx.tools.register(slow)


async def one_prompt(h: TestHarness) -> None:
    """Send one prompt and wait for the agent to be idle."""
    agent = h.agent()
    agent.send("go")
    await agent.wait_idle()


#: A turn whose first step calls two tools (one after the other), then answers.
two_tools = scenario(
    tools=[slow],
    responses=[
        tool_call("c1", "slow", {"seconds": 1}) + tool_call("c2", "slow", {"seconds": 2}),
        text("done"),
    ],
)(one_prompt)

#: A turn with one tool call (the benchmark's workload).
one_tool = scenario(
    tools=[slow],
    responses=[tool_call("c1", "slow", {"seconds": 1}), text("done")],
)(one_prompt)

#: Two concurrency-safe calls interleaving: the batch order matters, so the seed shows.
interleaved = scenario(
    tools=[chatty],
    responses=[
        tool_call("c1", "chatty", {"rounds": 5}) + tool_call("c2", "chatty", {"rounds": 5}),
        text("done"),
    ],
)(one_prompt)

#: The two-tool turn with its tool registered by a plugin (for action="unload").
plugin_tools = scenario(
    plugins=[ToolsPlugin],
    responses=[
        tool_call("c1", "slow", {"seconds": 1}) + tool_call("c2", "slow", {"seconds": 2}),
        text("done"),
    ],
)(one_prompt)
