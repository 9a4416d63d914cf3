"""Errors raised by the session layer.

::

    SessionError (TrioAgentError)
    ├── JsonValueError (ValueError)            data is not lossless JSON
    ├── EventPayloadError (ValueError)         data does not match its event type's payload class
    │   └── CompactionRangeError               a compaction range the projection cannot honour
    ├── SessionExistsError (ValueError)        the session id is already live
    ├── SessionNotFoundError (LookupError)     no live session with that id / not this store's
    ├── ForkBoundaryError (ValueError)         fork boundary missing or inside an open turn
    ├── InvalidSeedError (ValueError)          a seed is not contiguous SessionEvents from seq 0
    ├── SessionReentrancyError (RuntimeError)  append from inside a session/event listener
    ├── SessionDetachedError (RuntimeError)    the session was detached ("closed")
    └── SubscriberLaggedError (trio.BrokenResourceError)  a subscriber fell too far behind ("broken")
"""

from __future__ import annotations

import trio

from ..errors import TrioAgentError

__all__ = [
    "CompactionRangeError",
    "EventPayloadError",
    "ForkBoundaryError",
    "InvalidSeedError",
    "JsonValueError",
    "SessionDetachedError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionReentrancyError",
    "SubscriberLaggedError",
]


class SessionError(TrioAgentError):
    """Base class of every error the session layer raises deliberately."""


class JsonValueError(SessionError, ValueError):
    """A value handed to the session log is not lossless JSON.

    ``path`` locates the offending value (``data["message"]["content"][0]``) and ``found``
    describes it.
    """

    def __init__(self, message: str, *, path: str, found: str) -> None:
        super().__init__(message)
        self.path = path
        self.found = found


class EventPayloadError(SessionError, ValueError):
    """The data of a known event type does not structure into its payload class."""


class CompactionRangeError(EventPayloadError):
    """A ``compaction/summary`` or ``compaction/prune`` range cannot be honoured: it reaches the
    event itself, cuts a message (or an earlier summary) in two, or separates a tool call from its
    result. Nothing is logged; pick a range on whole closed turns."""


class SessionExistsError(SessionError, ValueError):
    """A session with this id is already live in the store."""

    def __init__(self, message: str, *, session_id: str) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionNotFoundError(SessionError, LookupError):
    """No live session with this id, or the session object does not belong to this store."""


class ForkBoundaryError(SessionError, ValueError):
    """A fork boundary does not exist in the source session or falls inside an open turn."""

    def __init__(self, message: str, *, session_id: str, boundary: object) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.boundary = boundary


class SessionReentrancyError(SessionError, RuntimeError):
    """``append`` was called while the same session was publishing a previous append."""


class SessionDetachedError(SessionError, RuntimeError):
    """The session was detached from its store; it accepts no more appends, flushes or subscribers."""


class SubscriberLaggedError(SessionError, trio.BrokenResourceError):
    """A subscription created with ``max_lag`` fell further behind than it allows.

    ``next_seq`` is the first event it did not receive and ``behind`` how many events it trailed
    by. Re-read ``session.events[next_seq:]`` (or re-render from scratch) and subscribe again.
    """

    def __init__(self, message: str, *, next_seq: int, behind: int) -> None:
        super().__init__(message)
        self.next_seq = next_seq
        self.behind = behind


class InvalidSeedError(SessionError, ValueError):
    """A seed is not a contiguous sequence of :class:`SessionEvent` s starting at seq 0."""
