"""Shared fixtures. pytest-trio runs every ``async def`` test (``trio_mode = true``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings

from trio_agent.runtime import Context, open_runtime

# CI machines are small and busy: a slow first draw is not a bug in a strategy, and wall-clock
# deadlines would make property tests flaky. Every test still runs its full example budget.
settings.register_profile("trio-agent", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("trio-agent")


@pytest.fixture
async def ctx() -> AsyncIterator[Context]:
    """A fresh runtime's root context, closed (and checked for leftover tasks) after the test."""
    async with open_runtime() as root:
        yield root
