"""An ACP server process for the tests: ``trio-agent acp`` plus a scripted model and plugins.

Usage: ``python acp_child.py SCENARIO [trio-agent acp options]``. The config given with ``-c``
must define a ``scripted`` provider; each scenario pushes its responses to that adapter and
registers the listeners it needs, through ``main_acp(argv, setup=...)`` - the same server code
as the ``trio-agent acp`` command.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from trio_agent.acp import main_acp
from trio_agent.agent import Allow, Block
from trio_agent.llm import LlmService, TextDelta
from trio_agent.runtime import Context
from trio_agent.testing import (
    ScriptedAdapter,
    error,
    hang,
    max_tokens,
    reasoning,
    text,
    tool_call,
)
from trio_agent.tools import Ask

logger = logging.getLogger("acp_child")


def _adapter(ctx: Context) -> ScriptedAdapter:
    adapter = ctx.require(LlmService).get("scripted")
    assert isinstance(adapter, ScriptedAdapter), "the config must define a 'scripted' provider"
    return adapter


async def permissions(ctx: Context) -> None:
    """write_file and shell ask: prompts answered allow once, reject, allow always, then a
    shell call whose question is never answered."""

    async def ask_for_writes(execution: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        if execution.name in ("write_file", "shell"):
            return Ask("writes need a yes")
        return await next()

    ctx.on("tools/pre-execute", ask_for_writes)
    _adapter(ctx).push(
        tool_call("w1", "write_file", {"path": "out.txt", "content": "one\n"}),
        text("wrote one"),
        tool_call("w2", "write_file", {"path": "out.txt", "content": "two\n"}),
        text("was refused"),
        tool_call("w3", "write_file", {"path": "out.txt", "content": "three\n"}),
        tool_call("w4", "write_file", {"path": "out.txt", "content": "four\n"}),
        text("wrote four"),
        tool_call("s1", "shell", {"command": "true"}),
    )


async def hanging(ctx: Context) -> None:
    """Every prompt streams a little text, then the model hangs until cancelled."""
    _adapter(ctx).push(*[hang(["Thinking ", "about ", "it"]) for _ in range(200)])


async def stop_reasons(ctx: Context) -> None:
    """Prompts containing 'forbidden' are blocked; the script: max tokens, an error, thoughts."""

    async def block_forbidden(payload: Any, next: Callable[[], Awaitable[Any]]) -> Any:
        if "forbidden" in payload.message.text:
            return Block("no forbidden prompts here")
        decision = await next()
        assert isinstance(decision, Allow)
        return decision

    ctx.on("agent/prompt-submit", block_forbidden)
    _adapter(ctx).push(
        max_tokens("cut ", "off"),
        error("AUTH", "the key was refused"),
        reasoning("let me ", "think") + text("the answer"),
    )


async def chatty(ctx: Context) -> None:
    """Every streamed chunk logs a 2 KiB warning, prints to stdout and writes to fd 1.

    One print and one fd-1 write also happen at set-up, long before the queue fills: lines that
    arrive once it is full are dropped by design, and which ones that is depends on threads.
    """
    print("stray print to stdout")
    os.write(1, b"stray write to fd 1\n")

    def noisy(event: Any) -> None:
        if isinstance(event.chunk, TextDelta):
            logger.warning("chunk %r %s", event.chunk.text, "x" * 2048)
            print("stray print to stdout")
            os.write(1, b"stray write to fd 1\n")

    ctx.on("agent/stream-chunk", noisy)
    _adapter(ctx).push(text(*[f"w{i} " for i in range(400)]))


async def shell_hang(ctx: Context) -> None:
    """The model runs a long shell command (the config must allow the shell)."""
    marker = os.environ["ACP_TEST_MARKER"]
    _adapter(ctx).push(tool_call("s1", "shell", {"command": f"sleep 600; echo {marker}"}))


SCENARIOS = {
    "permissions": permissions,
    "hanging": hanging,
    "stop-reasons": stop_reasons,
    "chatty": chatty,
    "shell-hang": shell_hang,
}

if __name__ == "__main__":
    raise SystemExit(main_acp(sys.argv[2:], setup=SCENARIOS[sys.argv[1]]))
