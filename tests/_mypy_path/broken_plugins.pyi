# mypy only: pytest imports tests/stress/broken_plugins.py by this bare name (see [tool.mypy]).
from tests.stress.broken_plugins import *  # noqa: F403
