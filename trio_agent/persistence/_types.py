"""The values and the protocol of ``ctx.session_persistence``."""

from __future__ import annotations

from typing import Protocol

import attrs

from ..ids import SessionId
from ..session import SessionEvent, SessionHeader

__all__ = ["SessionInfo", "SessionPersistence", "StoredSession"]


@attrs.frozen
class StoredSession:
    """A session log as the store holds it: its header and its events, seqs ``0..n-1``.

    The log is returned as stored: a last turn that never closed (a crash) is *not* closed
    here; :func:`trio_agent.session.repair_events` computes the closers, and resuming
    (``ctx.agents.resume``) appends them.
    """

    header: SessionHeader
    events: tuple[SessionEvent, ...]


@attrs.frozen
class SessionInfo:
    """One line of ``session_persistence.list()``.

    ``created_at`` comes from the header, ``updated_at`` is the time of the last stored event
    (``created_at`` when there is none), ``turns`` counts the ``turn/start`` events, and
    ``title`` is the first line of the first user prompt (``None`` before there is one).
    """

    session_id: SessionId
    created_at: float
    updated_at: float
    turns: int
    title: str | None


class SessionPersistence(Protocol):
    """What ``ctx.session_persistence`` provides (every backend implements it).

    Session ids are validated (:func:`trio_agent.ids.validate_session_id`) before any path is
    built or query run: an invalid id raises :class:`ValueError` and touches nothing.
    """

    async def load(self, session_id: str) -> StoredSession:
        """The stored log of ``session_id``.

        Raises:
            ValueError: the id is not a valid session id.
            StoredSessionNotFoundError: nothing is stored under that id.
            SessionCorruptError: the stored log is damaged.
            SessionFormatError: the stored log has a version this build cannot read.
        """
        ...

    async def list(self) -> tuple[SessionInfo, ...]:
        """Every stored session, oldest first (by ``created_at``, then id).

        Only what is stored is listed (a live session appears after its first flush); a log
        that cannot be read (damaged header, unknown version) is skipped with a logged warning,
        so one bad file never hides the others.
        """
        ...

    async def exists(self, session_id: str) -> bool:
        """Whether a log is stored under ``session_id``.

        Raises:
            ValueError: the id is not a valid session id.
        """
        ...
