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


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a developer's proxy settings away from the 127.0.0.1 fake server."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
