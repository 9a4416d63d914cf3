"""An ACP server process whose scripted model calls the client's MCP servers' tools.

Usage: ``python acp_mcp_child.py SCENARIO [trio-agent acp options]``; the config given with
``-c`` must define a ``scripted`` provider. The tools belong to servers the test lists in
``session/new`` / ``session/load`` (tests/mcp/mcp_server.py, over stdio or HTTP); ``no-mcp``
runs as if the ``mcp`` extra were not installed.
"""

from __future__ import annotations

import sys

from trio_agent.acp import main_acp
from trio_agent.llm import LlmService
from trio_agent.runtime import Context
from trio_agent.testing import ScriptedAdapter, text, tool_call


def _adapter(ctx: Context) -> ScriptedAdapter:
    adapter = ctx.require(LlmService).get("scripted")
    assert isinstance(adapter, ScriptedAdapter), "the config must define a 'scripted' provider"
    return adapter


async def stdio(ctx: Context) -> None:
    """One prompt: the stdio server ``fs`` echoes, then reads its ``FS_TOKEN``."""
    _adapter(ctx).push(
        tool_call("c1", "fs__echo", {"text": "hello from mcp"}),
        tool_call("c2", "fs__env", {"name": "FS_TOKEN"}),
        text("done"),
    )


async def http(ctx: Context) -> None:
    """Two prompts (before and after ``session/load``): the HTTP server ``web`` reports the
    ``X-Token`` header it received."""
    _adapter(ctx).push(
        tool_call("h1", "web__header", {"name": "X-Token"}),
        text("first"),
        tool_call("h2", "web__echo", {"text": "after load"}),
        text("second"),
    )


async def no_mcp(ctx: Context) -> None:
    """The ``mcp`` extra is missing (its import is blocked); one plain answer."""
    _adapter(ctx).push(text("no tools here"))


SCENARIOS = {"stdio": stdio, "http": http, "no-mcp": no_mcp}

if __name__ == "__main__":
    if sys.argv[1] == "no-mcp":
        sys.modules["mcp"] = None  # type: ignore[assignment]  # importing it now fails
    raise SystemExit(main_acp(sys.argv[2:], setup=SCENARIOS[sys.argv[1]]))
