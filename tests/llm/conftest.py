"""Fixtures for the LLM tests."""

from __future__ import annotations

import pytest

from trio_agent.llm import LlmService
from trio_agent.runtime import Context


@pytest.fixture
async def lctx(ctx: Context) -> Context:
    """The root context with ``ctx.llm`` mounted."""
    await ctx.plugin(LlmService)
    return ctx
