# mypy only: pytest imports tests/postgres/pg_helpers.py by this bare name (see [tool.mypy]).
from tests.postgres.pg_helpers import *  # noqa: F403
