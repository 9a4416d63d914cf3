"""Errors raised by the persistence backends.

::

    PersistenceError (TrioAgentError)
    ├── SessionCorruptError (ValueError)          a stored log is damaged (path, line)
    ├── SessionFormatError (ValueError)           a stored log has a format/version this build cannot read
    ├── StoredSessionNotFoundError (LookupError)  no stored log with that id
    ├── StoredSessionExistsError (ValueError)     a fresh session's id already has a stored log
    ├── SessionWriteError (OSError)               writing or syncing a log failed; the events stay buffered
    ├── SessionBusyError (RuntimeError)           another live writer holds the session (pid, host)
    └── SessionTamperedError (RuntimeError)       someone else changed a live session's log; writing stopped
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = [
    "PersistenceError",
    "SessionBusyError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionTamperedError",
    "SessionWriteError",
    "StoredSessionExistsError",
    "StoredSessionNotFoundError",
    "stored_session_exists",
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


def stored_session_exists(session_id: str, location: str) -> StoredSessionExistsError:
    """The error for creating the log of ``session_id`` when ``location`` already holds one."""
    return StoredSessionExistsError(
        f"session {session_id!r} already has a stored log ({location}); a new session never "
        "overwrites one: resume it (ctx.agents.resume) or pick another id",
        session_id=session_id,
    )


class SessionWriteError(PersistenceError, OSError):
    """Writing or syncing a session log failed. Nothing was lost: the events stay buffered and
    the next flush retries them. ``error`` is the underlying error (also ``__cause__``, unless a
    caller re-raised it ``from None``)."""

    def __init__(self, message: str, *, error: BaseException) -> None:
        super().__init__(message)
        self.error = error


class SessionBusyError(PersistenceError, RuntimeError):
    """Another live writer holds the session: one session has one writer, across processes
    (and, with a shared backend, across hosts). Raised by ``session_persistence.acquire`` before
    anything is published, so ``ctx.agents.create/resume`` fail with it and publish nothing.

    ``pid`` and ``host`` name the holder when the backend can tell (``None`` otherwise).
    """

    def __init__(
        self, message: str, *, session_id: str, pid: int | None = None, host: str | None = None
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.pid = pid
        self.host = host


class SessionTamperedError(PersistenceError, RuntimeError):
    """A live session's stored log was changed by someone else (replaced, truncated, appended
    to) or its claim was lost; the writer stopped writing that session rather than write over
    what is not its own. The unwritten events stay in memory and are reported.

    ``path`` is where the log lives (a file, a database, a DSN without its password).
    """

    def __init__(self, message: str, *, session_id: str, path: str) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.path = path
