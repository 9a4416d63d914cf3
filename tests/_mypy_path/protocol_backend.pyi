# mypy only: pytest imports tests/persistence/protocol_backend.py by this bare name (see [tool.mypy]).
from tests.persistence.protocol_backend import *  # noqa: F403
