# mypy only: pytest imports tests/acp/acp_helpers.py by this bare name (see [tool.mypy]).
from tests.acp.acp_helpers import *  # noqa: F403
