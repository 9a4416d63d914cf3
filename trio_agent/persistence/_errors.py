"""Errors raised by the persistence backends.

::

    PersistenceError (TrioAgentError)
    ├── SessionCorruptError (ValueError)          a stored log is damaged (path, line)
    ├── SessionFormatError (ValueError)           a stored log has a format/version this build cannot read
    ├── StoredSessionNotFoundError (LookupError)  no stored log with that id
    ├── StoredSessionExistsError (ValueError)     a fresh session's id already has a stored log
    └── SessionWriteError (OSError)               writing or syncing a log failed; the events stay buffered
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = [
    "PersistenceError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionWriteError",
    "StoredSessionExistsError",
    "StoredSessionNotFoundError",
]


class PersistenceError(TrioAgentError):
    """Base class of every error a persistence backend raises deliberately."""


class SessionCorruptError(PersistenceError, ValueError):
    """A stored session log is damaged.

    ``path`` is the file (or database) holding it; ``line`` the 1-based line of a JSONL file
    where the damage is (``None`` when the backend has no lines, such as SQLite).
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class SessionFormatError(PersistenceError, ValueError):
    """A stored log was written in a format or version this build cannot read.

    ``found`` is the version (or format tag) found, ``supported`` the versions this build reads.
    """

    def __init__(
        self, message: str, *, path: str, found: object, supported: tuple[int, ...]
    ) -> None:
        super().__init__(message)
        self.path = path
        self.found = found
        self.supported = supported


class StoredSessionNotFoundError(PersistenceError, LookupError):
    """No stored log has this session id."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class StoredSessionExistsError(PersistenceError, ValueError):
    """A session that was not loaded from the store (a fresh one) has the id of a stored log.

    The store never overwrites a log: resume it (``ctx.agents.resume``) or pick another id.
    """

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionWriteError(PersistenceError, OSError):
    """Writing or syncing a session log failed. Nothing was lost: the events stay buffered and
    the next flush retries them. ``error`` is the underlying error (also ``__cause__``, unless a
    caller re-raised it ``from None``)."""

    def __init__(self, message: str, *, error: BaseException) -> None:
        super().__init__(message)
        self.error = error
