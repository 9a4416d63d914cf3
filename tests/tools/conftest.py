"""Fixtures for the tools tests."""

from __future__ import annotations

import pytest

from trio_agent.runtime import Context
from trio_agent.tools import ToolRegistry


@pytest.fixture
async def tools(ctx: Context) -> ToolRegistry:
    """A mounted registry (the service instance, read through the root context)."""
    await ctx.plugin(ToolRegistry)
    registry: ToolRegistry = ctx.tools
    return registry
