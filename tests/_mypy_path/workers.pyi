# mypy only: pytest imports tests/postgres/workers.py by this bare name (see [tool.mypy]).
from tests.postgres.workers import *  # noqa: F403
