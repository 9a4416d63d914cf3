"""The kit's pytest plugin (entry point ``pytest11``): the ``stress`` fixture and options.

pytest loads it wherever trio-agent is installed, so it imports neither the kit nor Hypothesis
until a test asks for the fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ._fixture import Stress

__all__ = ["pytest_addoption", "stress"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--stress-budget``, ``--stress-seed`` and ``--stress-examples``."""
    group = parser.getgroup("trio-agent-stress", "trio-agent cancellation stress kit")
    group.addoption(
        "--stress-budget",
        type=int,
        default=None,
        metavar="N",
        help="at most N runs per explore_cancellation (default: a run per schedule point)",
    )
    group.addoption(
        "--stress-seed",
        type=int,
        default=None,
        metavar="SEED",
        help="seed trio's scheduler with SEED in every exploration (default: 0)",
    )
    group.addoption(
        "--stress-examples",
        type=int,
        default=None,
        metavar="N",
        help="Hypothesis examples per state machine (default: each test's own)",
    )


@pytest.fixture
def stress(request: pytest.FixtureRequest) -> Stress:
    """The kit, with this session's ``--stress-*`` options: ``stress.explore(scenario)`` and
    ``stress.run_machine(MachineClass)``."""
    from ._fixture import Stress

    option = request.config.getoption
    return Stress(
        budget=option("stress_budget"),
        seed=option("stress_seed"),
        examples=option("stress_examples"),
    )
