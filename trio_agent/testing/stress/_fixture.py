"""What the ``stress`` fixture hands a test."""

from __future__ import annotations

from typing import Any, final

from ._explore import ExplorationReport, explore_cancellation
from ._records import Action
from ._scenario import Scenario, ScenarioFn

__all__ = ["Stress"]


@final
class Stress:
    """The ``stress`` fixture: the kit with the session's ``--stress-*`` options applied.

    ``budget`` caps the runs of every exploration, ``seed`` seeds them, ``examples`` overrides
    the Hypothesis examples of every state machine (``None``: each call's own choice).
    """

    def __init__(
        self, *, budget: int | None = None, seed: int | None = None, examples: int | None = None
    ) -> None:
        self.budget = budget
        self.seed = seed
        self.examples = examples

    def explore(
        self, target: Scenario | ScenarioFn, *, action: Action = "cancel", **options: Any
    ) -> ExplorationReport:
        """:func:`explore_cancellation` with the session's budget and seed (explicit
        ``options`` win); prints the report's summary and returns the report."""
        if self.budget is not None:
            options.setdefault("budget", self.budget)
        if self.seed is not None:
            options.setdefault("seed", self.seed)
        report = explore_cancellation(target, action=action, **options)
        print(report.summary())
        return report

    def run_machine(
        self, machine: type[Any], *, max_examples: int = 25, steps: int = 25, **settings: Any
    ) -> None:
        """Run the :class:`AgentStateMachine` subclass ``machine`` under Hypothesis:
        ``max_examples`` examples (``--stress-examples`` wins) of at most ``steps`` steps;
        ``settings`` go to :class:`hypothesis.settings`."""
        from hypothesis import HealthCheck
        from hypothesis import settings as hypothesis_settings
        from hypothesis.stateful import run_state_machine_as_test

        chosen = hypothesis_settings(
            max_examples=self.examples or max_examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            **settings,
        )
        run_state_machine_as_test(machine, settings=chosen)
