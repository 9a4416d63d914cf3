"""The kit's public surface: lazy imports, the pytest plugin, the docs (tests/test_exports.py pins
the names)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import trio_agent.testing.stress as stress
from trio_agent.testing.stress._fixture import Stress

ROOT = Path(__file__).resolve().parents[2]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        stress.nope  # noqa: B018


def test_importing_the_kit_and_its_pytest_plugin_loads_neither_hypothesis_nor_the_kit() -> None:
    code = (
        "import sys, trio_agent.testing.stress._pytest_plugin\n"
        "assert 'hypothesis' not in sys.modules\n"
        "assert 'trio_agent.testing.stress._explore' not in sys.modules\n"
        "from trio_agent.testing.stress import explore_cancellation, replay\n"
        "assert 'hypothesis' not in sys.modules\n"
        "from trio_agent.testing.stress import AgentStateMachine\n"
        "assert 'hypothesis' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_fixture_comes_from_the_entry_point(stress: Stress) -> None:
    assert isinstance(stress, Stress)


def test_the_fixture_applies_the_session_budget() -> None:
    from stress_scenarios import two_tools

    report = Stress(budget=3, seed=2).explore(two_tools)
    assert len(report.explored) == 3 and report.seed == 2


def test_the_docs_example_is_this_repository_s_test() -> None:
    docs = (ROOT / "docs" / "testing.md").read_text()
    marker = "<!-- example: tests/stress/test_docs_example.py -->\n```python\n"
    assert marker in docs
    block = docs.split(marker, 1)[1].split("```\n", 1)[0]
    assert block == (ROOT / "tests" / "stress" / "test_docs_example.py").read_text()
