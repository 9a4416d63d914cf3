# mypy only: pytest imports tests/acp/acp_rawclient.py by this bare name (see [tool.mypy]).
from tests.acp.acp_rawclient import *  # noqa: F403
