# mypy only: pytest imports tests/tools/tools_helpers.py by this bare name (see [tool.mypy]).
from tests.tools.tools_helpers import *  # noqa: F403
