"""Embed trio-agent in a trio program: one agent, a custom tool, a listener on its events.

Run: python examples/embed.py   (offline model, nothing written to disk)
"""

from __future__ import annotations

import trio
import trio.lowlevel

import trio_agent
from trio_agent.config import HarnessConfig, PersistenceConfig
from trio_agent.llm import TextDelta


@trio_agent.tool
async def weather(city: str, unit: str = "celsius") -> str:
    """Look up the weather.

    Args:
        city: The city to look up.
        unit: "celsius" or "fahrenheit".
    """
    await trio.lowlevel.checkpoint()  # a real tool would await an HTTP call here
    return f"It is sunny in {city}, 21 degrees {unit}."


async def main() -> None:
    config = HarnessConfig(persistence=PersistenceConfig(type="memory"))
    async with trio_agent.open_harness(config) as ctx:
        agent = ctx.agent_loop.create("assistant")
        agent.ctx.tools.register(weather)  # visible to this agent only

        def on_chunk(event: object) -> None:
            chunk = event.chunk  # type: ignore[attr-defined]
            if isinstance(chunk, TextDelta):
                print(chunk.text, end="", flush=True)

        agent.ctx.on("agent/stream-chunk", on_chunk)
        agent.ctx.on("agent/turn-end", lambda e: print(f"\n[turn {e.turn}: {e.reason}]"))

        agent.send("hello")
        await agent.wait_idle()
        names = [t.name for t in ctx.tools.schemas(agent)]
        print("this agent sees the weather tool:", "weather" in names)
        print("messages in its history:", len(agent.session.derive_messages()))


if __name__ == "__main__":
    trio.run(main)
