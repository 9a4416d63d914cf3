"""Shared helpers for the LLM tests."""

from __future__ import annotations

from typing import Any

from trio_agent.llm import (
    BlockAssembler,
    Finish,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    OpenAiAdapter,
    StreamChunk,
)
from trio_agent.runtime import Context

#: An API key the OpenAI adapter tests look for in every text that must not contain it.
SECRET = "sk-test-SECRET-0123456789abcdef"


def request(*messages: Message, **kwargs: Any) -> GenerateRequest:
    """A request for the ``openai`` provider (default: one user message ``hi``)."""
    config = kwargs.pop("config", LlmCallConfig("openai", "gpt-test"))
    return GenerateRequest(config, messages or (Message.user("hi"),), **kwargs)


async def stream(adapter: OpenAiAdapter, req: GenerateRequest | None = None) -> list[StreamChunk]:
    """Every chunk ``adapter`` streams for ``req``."""
    async with adapter.stream(req or request()) as chunks:
        return [c async for c in chunks]


def assemble(chunks: list[StreamChunk]) -> BlockAssembler:
    """``chunks`` folded into an assembler."""
    a = BlockAssembler()
    a.feed_all(chunks)
    return a


def failure_of(chunks: list[StreamChunk]) -> LlmFailure:
    """The failure of a stream that ended with exactly one error finish."""
    last = chunks[-1]
    assert isinstance(last, Finish) and last.reason == "error" and last.failure is not None
    assert sum(isinstance(c, Finish) for c in chunks) == 1
    return last.failure


def make_request(provider: str = "scripted", text: str = "hi", **kwargs: object) -> GenerateRequest:
    """A one-message request for ``provider``."""
    return GenerateRequest(LlmCallConfig(provider, "m"), (Message.user(text),), **kwargs)  # type: ignore[arg-type]


async def collect(ctx: Context, request: GenerateRequest) -> list[StreamChunk]:
    """Every chunk ``ctx.llm.stream(request)`` delivers."""
    async with ctx.llm.stream(request) as chunks:
        return [chunk async for chunk in chunks]
