"""``replay``: run one reported schedule again, exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import StressFailure
from ._explore import run_scenario, scenario_violations
from ._ops import Op, run_ops
from ._records import Action, RunRecord
from ._scenario import Scenario, ScenarioFn, as_scenario
from ._snippet import machine_snippet, scenario_snippet

__all__ = ["replay"]


def replay(
    target: Scenario | ScenarioFn | type[Any],
    *,
    action: Action = "cancel",
    point: int | None = None,
    seed: int = 0,
    ops: Sequence[Op] | None = None,
    raise_on_failure: bool = True,
) -> RunRecord:
    """Run one schedule a failure report printed, and check it again.

    * ``replay(scenario, action=..., point=k, seed=s)`` re-runs an :func:`explore_cancellation`
      run (``point=None``: the run without an action).
    * ``replay(MachineClass, ops=[...], seed=s)`` re-runs the operations of a failing
      :class:`AgentStateMachine` example on that machine's harness.

    Returns:
        The run's :class:`RunRecord` (inspect it, or assert on it).

    Raises:
        StressFailure: The run broke an invariant (unless ``raise_on_failure=False``).
    """
    if ops is not None:
        config = getattr(target, "replay_config", None)
        if not callable(config):
            raise TypeError(
                f"replay(..., ops=...) takes an AgentStateMachine subclass, got {target!r}"
            )
        record, found = run_ops(config(), ops, seed=seed)
        snippet = machine_snippet(target, ops, seed)  # type: ignore[arg-type]
    else:
        scenario = as_scenario(target)
        record = run_scenario(scenario, action=action, point=point, seed=seed)
        found = scenario_violations(scenario, record)
        snippet = scenario_snippet(target, scenario.fn, action=action, point=point, seed=seed)
    if found and raise_on_failure:
        lines = ["the replayed run broke invariants:", *(f"  - {v}" for v in found), snippet]
        raise StressFailure("\n".join(lines), snippet=snippet, violations=tuple(found))
    return record
