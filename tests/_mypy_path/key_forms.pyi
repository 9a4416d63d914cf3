# mypy only: pytest imports tests/security/key_forms.py by this bare name (see [tool.mypy]).
from tests.security.key_forms import *  # noqa: F403
