"""Fixtures for the session tests."""

from __future__ import annotations

import pytest

from trio_agent.runtime import Context
from trio_agent.session import SessionStore


@pytest.fixture
async def sctx(ctx: Context) -> Context:
    """The root context with ``ctx.sessions`` mounted."""
    await ctx.plugin(SessionStore)
    return ctx
