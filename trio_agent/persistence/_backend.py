"""The backend protocol: the storage a :class:`~trio_agent.persistence.PersistenceService` writes
through.

A backend stores session logs and nothing else: the shared writer validates ids, listens to the
``session/*`` events, buffers, serialises, retries and keeps the books. To add a storage engine,
implement :class:`Backend` (subclass it to inherit the default :meth:`~Backend.acquire` and
:meth:`~Backend.release`) and mount it with the writer; ``docs/persistence.md`` walks through
it, and :class:`trio_agent.testing.BackendConformance` checks it.

Rules every method follows:

* **Ids** are validated by the writer before any call (:func:`trio_agent.ids.validate_session_id`),
  so a ``session_id`` is safe as a file name or a key.
* **Threads.** Methods are called from the runtime's trio thread and must not block it: run
  blocking I/O with ``trio.to_thread.run_sync`` (never ``abandon_on_cancel=True`` for work that
  changes storage). Every ``async`` method is a checkpoint. (The built-in file backends bend
  both rules for a write, by default and only when no other task is ready to run: it then runs
  in the trio thread, a cancel point with no one to yield to; see
  :class:`~trio_agent.persistence.JsonlBackend`.)
* **Concurrency.** The writer never runs two writes of one session at once, and writes each
  session's events in seq order; reads, :meth:`~Backend.infos` and writes of *other* sessions may
  run while a write is in flight. Serialise inside the backend if the storage needs it (the SQLite
  backend keeps its one connection behind a lock).
* **Errors.** I/O failures of a write are :class:`OSError` (the writer reports them as
  :class:`~trio_agent.persistence.SessionWriteError` and retries); a stored log that is wrong is a
  :class:`~trio_agent.persistence.PersistenceError` subclass (``SessionCorruptError``,
  ``SessionFormatError``) whose message names the place (:meth:`~Backend.location`); a claim
  another writer holds is ``SessionBusyError``, a log someone else changed under a write
  ``SessionTamperedError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import trio

from ..ids import SessionId
from ..session import SessionEvent, SessionHeader
from ._types import SessionInfo

__all__ = ["Backend", "Position", "ReadResult"]


@attrs.frozen
class Position:
    """How much of one log a backend holds: ``count`` events (seqs ``0 .. count-1``), and a
    backend-private ``token`` (the JSONL backend keeps the byte length of the intact file there).

    A backend returns one from every :meth:`~Backend.read` and :meth:`~Backend.write`; the writer
    hands the latest back to the next write of that session unchanged and never reads ``token``.
    """

    count: int
    token: Any = None


@attrs.frozen
class ReadResult:
    """A stored log as :meth:`Backend.read` found it, and the position to append after it."""

    header: SessionHeader
    events: tuple[SessionEvent, ...]
    position: Position


class Backend(Protocol):
    """The storage behind one :class:`~trio_agent.persistence.PersistenceService` (one backend
    instance per service instance). See the module docs for the rules every method follows."""

    def location(self, session_id: SessionId) -> str:
        """Where the log of ``session_id`` lives, for messages (a path, a URL without secrets,
        ``memory:<id>``). No I/O."""
        ...

    async def read(self, session_id: SessionId) -> ReadResult | None:
        """The stored log of ``session_id``, or ``None`` when there is none. Never creates
        storage.

        A torn tail (what a crash left of a write that never returned) is left out of
        ``events`` and left in storage: reading changes nothing, and the tail is cut when the
        session is next claimed (:meth:`acquire`). ``position`` is where the next write appends.

        Raises:
            SessionCorruptError: the log is damaged before its tail.
            SessionFormatError: the log has a format or version this backend cannot read.
            PersistenceError: the storage cannot be read at all.
        """
        ...

    async def exists(self, session_id: SessionId) -> bool:
        """Whether a log is stored under ``session_id`` (a damaged one counts). Never creates
        storage."""
        ...

    async def infos(self) -> list[SessionInfo]:
        """A :class:`~trio_agent.persistence.SessionInfo` for every readable stored log, in any
        order (:func:`~trio_agent.persistence.session_info` builds one from a log). A log that
        cannot be read is skipped with a warning on the ``trio_agent.persistence`` logger, so
        one bad log never hides the others. Never creates storage."""
        ...

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        """Store ``events`` durably after ``position``, and return the new position.

        ``position`` is ``None`` to create the log (``header`` then ``events``), else the one
        the last read or write of this session returned. ``events`` is never empty and its seqs
        run on from ``position.count`` (``0`` when creating).

        Durability: when this returns, the events survive a crash of the process and of the
        machine (fsync, a synchronous commit). A create is all or nothing: a crash leaves no
        log or the whole one.

        Failure: raise :class:`OSError` when storing failed. The events may then be stored in
        part or in whole (an outcome the backend could not confirm, such as a lost
        acknowledgement), so before its next attempt the writer reads the log back and continues
        after what :meth:`read` shows: roll back what you can, and keep what you leave readable
        as a prefix of the events plus at most a torn tail.

        Cancellation: raise :class:`trio.Cancelled` only while nothing is stored yet (at a
        checkpoint before the work starts). Once storing has begun, finish and return (or raise
        the failure): ``trio.to_thread.run_sync`` does that, the cancelled caller waits for its
        thread. The writer books a returned position with no checkpoint in between, so a
        completed write is never lost from its books.

        Never write over what is not yours: before appending, check that the log is exactly at
        ``position`` (the same file, the same length or count). If it is not, someone else
        replaced, truncated or appended to it: raise
        :class:`~trio_agent.persistence.SessionTamperedError` and store nothing (the writer
        then stops writing that session). Never cut off what you find after ``position``.

        The writer claims a session (:meth:`acquire`) before its first write; a backend need
        not refuse an unclaimed write (a file lock cannot stop one). One that does (the
        PostgreSQL backend, while another worker holds the session) raises
        :class:`~trio_agent.persistence.SessionBusyError`, as :meth:`acquire` would, and
        stores nothing. ``SessionTamperedError`` is for a writer whose own log changed under
        it, or whose claim was lost.

        Raises:
            StoredSessionExistsError: creating a log whose id is already stored (a log is never
                overwritten); nothing was stored.
            SessionTamperedError: the log is not at ``position`` (replaced, shorter, longer,
                gone: another program changed it), or this backend's claim on it was lost;
                nothing was stored.
            SessionBusyError: (optional, see above) an unclaimed write of a session another
                writer holds; nothing was stored.
            OSError: storing or syncing failed (see above).
        """
        ...

    async def acquire(self, session_id: SessionId) -> None:
        """Claim the right to write ``session_id``'s log, before a session with that id is
        published or first written (:meth:`PersistenceService.acquire
        <trio_agent.persistence.PersistenceService.acquire>` calls it, once per claim).

        A backend keeps one writer per session across processes: it takes an exclusive lock
        here (or records the claim), repairs a torn tail under it, raises
        :class:`~trio_agent.persistence.SessionBusyError` (naming the holder's ``pid`` and
        ``host`` when it can) when another writer holds the session, and holds the claim until
        :meth:`release` or until its process dies. A session with no stored log yet may be
        claimed too (it is about to be created). The built-in backends do all of this; the
        conformance kit checks it.

        This default accepts every claim at once, so a backend that keeps it does not keep
        writers apart (and fails the kit's claim tests).
        """
        await trio.lowlevel.checkpoint()

    async def release(self, session_id: SessionId) -> None:
        """Give up the claim :meth:`acquire` took, once the writer is done with the session (its
        final write made, or given up when the service unloads). Runs shielded, bounded by the
        runtime's teardown budget. This default does nothing."""
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Release what the backend holds (connections, files). Called once, when the service
        unloads, after the final writes and releases."""
        ...
