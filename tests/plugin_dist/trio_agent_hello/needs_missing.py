"""A plugin whose dependency is not installed, as an integration without its extra."""

from __future__ import annotations

import trio_agent_hello_missing_dependency  # type: ignore[import-not-found]  # noqa: F401 - deliberately absent


class Backend:
    """Never importable."""
