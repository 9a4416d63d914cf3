"""Fixtures for the built-in tools tests: a workspace beside an "outside" directory, and a
registry with the built-in tools mounted on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builtin_helpers import Mount

from trio_agent.runtime import Context
from trio_agent.tools import ToolRegistry
from trio_agent.tools.builtin import BuiltinTools


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The workspace root (empty)."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace holding ``secret.txt``."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret data\n")
    return path


@pytest.fixture
async def mount(ctx: Context, root: Path) -> Mount:
    """``await mount(**config)``: mount the registry and BuiltinTools on ``root``."""
    await ctx.plugin(ToolRegistry)

    async def mount_with(**config: Any) -> None:
        config.setdefault("root", str(root))
        await ctx.plugin(BuiltinTools, config)

    return mount_with
