"""Shared fixtures. pytest-trio runs every ``async def`` test (``trio_mode = true``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from trio_agent.runtime import Context, open_runtime


@pytest.fixture
async def ctx() -> AsyncIterator[Context]:
    """A fresh runtime's root context, closed (and checked for leftover tasks) after the test."""
    async with open_runtime() as root:
        yield root
