"""A plugin author's tool, proven under every cancel (the docs/testing.md walk-through)."""

import trio

from trio_agent.testing import text, tool_call
from trio_agent.testing.stress import AgentStateMachine, scenario
from trio_agent.tools import tool


@tool
async def fetch(url: str) -> str:
    """Fetch a page (here: pretend to, for a second of virtual time)."""
    await trio.sleep(1)
    return f"<html>{url}</html>"


@scenario(tools=[fetch], responses=[tool_call("c1", "fetch", {"url": "a"}), text("done")])
async def fetch_once(h):
    agent = h.agent()
    agent.send("fetch a")
    await agent.wait_idle()


def test_fetch_survives_every_cancel(stress):
    stress.explore(fetch_once)
    stress.explore(fetch_once, action="close")


class FetchMachine(AgentStateMachine):
    tools = (fetch,)


def test_fetch_state_machine(stress):
    stress.run_machine(FetchMachine, max_examples=10)
