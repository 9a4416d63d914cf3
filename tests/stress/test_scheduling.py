"""Determinism: the kit seeds trio's scheduler, and on the installed trio that still works."""

from __future__ import annotations

import random

import trio
from stress_scenarios import interleaved

from trio_agent.testing.stress import TESTED_TRIO, seeded_scheduler
from trio_agent.testing.stress._explore import run_scenario


def test_the_installed_trio_is_a_tested_version() -> None:
    # When this fails, trio was upgraded: run this file on the new version, then move the pin.
    major, minor = (int(part) for part in trio.__version__.split(".")[:2])
    low, high = TESTED_TRIO
    assert low <= (major, minor) <= high, f"trio {trio.__version__} is outside {TESTED_TRIO}"


def test_the_same_seed_replays_the_same_schedule() -> None:
    first = run_scenario(interleaved, seed=7)
    again = run_scenario(interleaved, seed=7)
    assert first.points > 20
    assert first.trace == again.trace


def test_the_seed_is_what_orders_the_batches() -> None:
    traces = {tuple(run_scenario(interleaved, seed=seed).trace) for seed in range(6)}
    assert len(traces) > 1, "six seeds gave one schedule: the seed no longer reaches trio"


def test_seeding_restores_the_generator_afterwards() -> None:
    from trio._core import _run

    before = _run._r.getstate()
    with seeded_scheduler(3):
        # read through the module dict: trio declares the flag Final (False)
        assert vars(_run)["_ALLOW_DETERMINISTIC_SCHEDULING"] is True
        assert _run._r.random() == random.Random(3).random()
    assert _run._r.getstate() == before
