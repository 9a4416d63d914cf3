"""The stress tests: small budgets by default; ``@pytest.mark.slow`` tests (big budgets, many
examples) run only with ``-m slow`` or ``TRIO_AGENT_SLOW=1``."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a big stress budget; run with -m slow or TRIO_AGENT_SLOW=1"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("slow") is None:
        return
    if os.environ.get("TRIO_AGENT_SLOW") == "1" or "slow" in (item.config.option.markexpr or ""):
        return
    pytest.skip("slow stress test: run with -m slow or TRIO_AGENT_SLOW=1")
