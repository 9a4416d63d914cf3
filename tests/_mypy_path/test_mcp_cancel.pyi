# mypy only: pytest imports tests/mcp/test_mcp_cancel.py by this bare name (see [tool.mypy]).
from tests.mcp.test_mcp_cancel import *  # noqa: F403
