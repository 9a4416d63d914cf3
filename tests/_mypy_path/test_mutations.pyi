# mypy only: pytest imports tests/stress/test_mutations.py by this bare name (see [tool.mypy]).
from tests.stress.test_mutations import *  # noqa: F403
