# mypy only: pytest imports tests/mcp/mcp_helpers.py by this bare name (see [tool.mypy]).
from tests.mcp.mcp_helpers import *  # noqa: F403
