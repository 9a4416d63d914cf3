"""The values and the protocol of ``ctx.session_persistence``."""

from __future__ import annotations

from typing import Protocol

import attrs

from ..ids import SessionId
from ..runtime import ServiceKey
from ..session import SessionEvent, SessionHeader

__all__ = ["SESSION_PERSISTENCE", "SessionInfo", "SessionPersistence", "StoredSession"]


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

    async def acquire(self, session_id: str) -> None:
        """Claim ``session_id`` for this process's writer; call it before a session with that
        id is created or resumed, so a refusal comes before anything is published
        (``ctx.agents.create/resume`` do). One session has one writer across processes.

        The claim lasts until the writer is done with the session (after its final write), until
        :meth:`release` if no session is published after all, or until the service unloads; a
        process that dies loses its claims. A session published without a claim (the synchronous
        ``ctx.sessions.create``) is claimed by its first write, whose flush raises instead.

        Raises:
            ValueError: the id is not a valid session id.
            SessionBusyError: another writer holds the session (``pid``, ``host`` name it).
        """
        ...

    async def release(self, session_id: str) -> None:
        """Give up a claim :meth:`acquire` took when no session is published with it after all
        (a failed set-up). A claim a live session needs is kept until its final write.

        Raises:
            ValueError: the id is not a valid session id.
        """
        ...


#: The typed key of ``ctx.session_persistence``: ``ctx.require(SESSION_PERSISTENCE)`` returns the
#: mounted backend as a :class:`SessionPersistence`, whichever one it is.
SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")
