"""Branded identifiers.

``AgentId``, ``SessionId``, ``CallId`` and ``MessageId`` are :class:`typing.NewType` brands over
``str``: zero runtime cost, but mypy refuses an ``AgentId`` where a ``CallId`` is expected. Each
brand has a same-named factory that brands a plain string, and a ``new_*`` helper that mints a
fresh unique id. Public string-in APIs accept plain strings and brand internally.
"""

from __future__ import annotations

import itertools
import os
import re
from typing import NewType

__all__ = [
    "SESSION_ID_PATTERN",
    "AgentId",
    "CallId",
    "MessageId",
    "SessionId",
    "new_call_id",
    "new_message_id",
    "validate_session_id",
]

AgentId = NewType("AgentId", str)
SessionId = NewType("SessionId", str)
CallId = NewType("CallId", str)
MessageId = NewType("MessageId", str)

#: Session ids double as file names, so they are restricted to a portable, traversal-free set.
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def validate_session_id(value: object) -> SessionId:
    """Return ``value`` as a :data:`SessionId`, or raise :class:`ValueError`.

    A valid id matches ``^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$``: it cannot be empty, cannot start
    with a dot or a dash, and cannot contain a path separator, so it is safe as a file name.
    """
    if not isinstance(value, str):
        raise TypeError(f"session id must be a str, got {type(value).__name__}")
    if SESSION_ID_PATTERN.fullmatch(value) is None:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise ValueError(
            f"invalid session id {shown!r}: expected 1-200 characters from [A-Za-z0-9._-] "
            "starting with a letter or digit (no path separators, no leading dot)"
        )
    return SessionId(value)


# Fresh ids are 32 hex digits, as uuid4().hex was, but cheaper (#17): 96 random bits drawn once
# per process (again in a forked child) followed by a 32-bit counter, so ids stay unique across
# processes and sessions without a syscall and a UUID object per message.
_prefix = os.urandom(12).hex()
_counter = itertools.count()


def _reseed() -> None:
    global _prefix, _counter
    _prefix = os.urandom(12).hex()
    _counter = itertools.count()


os.register_at_fork(after_in_child=_reseed)


def _fresh() -> str:
    n = next(_counter)
    if n > 0xFFFFFFFF:
        _reseed()
        n = next(_counter)
    return f"{_prefix}{n:08x}"


def new_message_id() -> MessageId:
    """Mint a fresh, unique :data:`MessageId`."""
    return MessageId(f"msg-{_fresh()}")


def new_call_id() -> CallId:
    """Mint a fresh, unique :data:`CallId` (for calls whose model gave no id)."""
    return CallId(f"call-{_fresh()}")
