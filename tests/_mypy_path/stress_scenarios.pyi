# mypy only: pytest imports tests/stress/stress_scenarios.py by this bare name (see [tool.mypy]).
from tests.stress.stress_scenarios import *  # noqa: F403
