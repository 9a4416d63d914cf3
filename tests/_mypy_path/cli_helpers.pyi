# mypy only: pytest imports tests/cli/cli_helpers.py by this bare name (see [tool.mypy]).
from tests.cli.cli_helpers import *  # noqa: F403
