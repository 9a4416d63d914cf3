"""Shared helpers for the LLM tests."""

from __future__ import annotations

from trio_agent.llm import GenerateRequest, LlmCallConfig, Message, StreamChunk
from trio_agent.runtime import Context


def make_request(provider: str = "scripted", text: str = "hi", **kwargs: object) -> GenerateRequest:
    """A one-message request for ``provider``."""
    return GenerateRequest(LlmCallConfig(provider, "m"), (Message.user(text),), **kwargs)  # type: ignore[arg-type]


async def collect(ctx: Context, request: GenerateRequest) -> list[StreamChunk]:
    """Every chunk ``ctx.llm.stream(request)`` delivers."""
    async with ctx.llm.stream(request) as chunks:
        return [chunk async for chunk in chunks]


def task_count() -> int:
    """How many tasks are alive in this trio run (for leak checks)."""
    import trio

    todo = [trio.lowlevel.current_root_task()]
    count = 0
    while todo:
        task = todo.pop()
        count += 1
        for nursery in task.child_nurseries:
            todo.extend(nursery.child_tasks)
    return count
