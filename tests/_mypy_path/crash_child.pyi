# mypy only: pytest imports tests/persistence/crash_child.py by this bare name (see [tool.mypy]).
from tests.persistence.crash_child import *  # noqa: F403
