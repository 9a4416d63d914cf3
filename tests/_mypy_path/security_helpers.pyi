# mypy only: pytest imports tests/security/security_helpers.py by this bare name (see [tool.mypy]).
from tests.security.security_helpers import *  # noqa: F403
