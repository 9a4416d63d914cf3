# mypy only: pytest imports tests/builtin/builtin_helpers.py by this bare name (see [tool.mypy]).
from tests.builtin.builtin_helpers import *  # noqa: F403
