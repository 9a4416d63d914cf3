# mypy only: pytest imports tests/persistence/persistence_helpers.py by this bare name (see [tool.mypy]).
from tests.persistence.persistence_helpers import *  # noqa: F403
