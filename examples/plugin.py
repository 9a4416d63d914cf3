"""Write a plugin: a service other plugins can use, a prompt policy, a tool guard, an audit log.

Run: python examples/plugin.py   (offline model, nothing written to disk)
"""

from __future__ import annotations

from typing import Any

import trio

import trio_agent
from trio_agent.agent import Block, PromptSubmit
from trio_agent.config import HarnessConfig, PersistenceConfig
from trio_agent.lowlevel import Next
from trio_agent.tools import ToolExecution, ToolResultNotice


class Audit(trio_agent.Service, name="audit"):
    """Records every tool result, blocks prompts containing "password", and forbids writes."""

    inject = ("tools",)

    def __init__(self, ctx: trio_agent.Context, config: None = None) -> None:
        super().__init__(ctx, config)
        self.entries: list[str] = []
        # Every registration is an effect of this plugin: all of it goes away when it unloads.
        ctx.on("tools/result", self._record)
        ctx.on("agent/prompt-submit", self._screen)
        ctx.tools.guard(self._no_writes)

    def _record(self, notice: ToolResultNotice) -> None:
        status = notice.result.code or "ok"
        self.entries.append(f"{notice.execution.name}: {status}")

    async def _screen(self, event: PromptSubmit, next: Next) -> Any:
        if "password" in event.message.text.lower():
            return Block("prompts must not contain passwords")
        return await next()

    def _no_writes(self, execution: ToolExecution) -> str | None:
        if execution.name in ("write_file", "edit_file", "shell"):
            return "this deployment is read-only"
        return None


async def main() -> None:
    config = HarnessConfig(persistence=PersistenceConfig(type="memory"))
    async with trio_agent.open_harness(config) as ctx:
        fiber = await ctx.plugin(Audit)
        agent = ctx.agent_loop.create("assistant")
        for prompt in ("list files", "write notes.txt: hi", "my password is hunter2"):
            agent.send(prompt)
            await agent.wait_idle()
        print("audit:", ctx.audit.entries)
        ends = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
        print("turns:", ends)
        await fiber.dispose()  # the listeners and the guard are gone with it
        print("audit service after dispose:", ctx.get("audit"))


if __name__ == "__main__":
    trio.run(main)
