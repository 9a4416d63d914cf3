"""Durable sessions: ``ctx.session_persistence`` and its backends.

Mount one backend; it provides the :class:`SessionPersistence` protocol (``load``, ``list``,
``exists``, ``acquire``) and writes every live session behind the scenes:

* :class:`JsonlPersistence` (default): one ``<session_id>.jsonl`` file per session, a header line
  then one JSON object per event;
* :class:`SqlitePersistence`: one SQLite database (WAL), one row per event;
* :class:`MemoryPersistence`: dicts, for tests;
* :class:`PostgresPersistence` (the ``postgres`` extra): one PostgreSQL database shared by many
  worker processes on many hosts, one live writer per session, and ``ctx.inbox``
  (:class:`Inbox`) to send a session prompts from any process (``docs/postgres.md``).

Each is the shared writer, :class:`PersistenceService`, over a :class:`Backend`
(:class:`JsonlBackend`, :class:`SqliteBackend`, :class:`MemoryBackend`). The backend protocol is
public: implement :class:`Backend` for another store and mount it with the same writer
(``PersistenceService.Config(backend=...)``, or a subclass with its own ``Config``);
``docs/persistence.md`` is the guide, and :class:`trio_agent.testing.BackendConformance` the
test suite every backend passes.

Write-behind: events are buffered as they are appended (no I/O) and written, then made durable
(fsync / a ``synchronous=FULL`` commit), when the session is flushed (``ctx.sessions.flush``)
and when it is detached. A fresh session's log is created by its first write, so an unused
session leaves nothing behind. A resumed session writes only what is
new: the crash-repair closers and ``session/end-seed`` its seed added, then its new turns. The
loop flushes at its durability points (``AgentOptions.durability``: by default after a turn's
prompts are accepted, at every step end and before each tool with effects runs).

Failures: a failed write raises :class:`SessionWriteError` from the flush and keeps the events
buffered; the next flush retries them. An I/O failure may have stored part of the batch (or all
of it, with the acknowledgement lost), so the retry first reads the log back and continues after
what it holds: nothing is lost and nothing stored twice. A cancel during a flush never leaves a
half-recorded write: the blocking work runs in a worker thread that is waited for, and its
outcome is recorded before the cancel is delivered.

One writer per session: ``acquire(session_id)`` claims a session for this process's writer
before it is published (``ctx.agents.create/resume`` call it; a session published without a
claim is claimed by its first write), and the claim is released after the session's final
write. A session another process holds raises :class:`SessionBusyError`. JSONL locks the
session's ``.jsonl`` file (``flock``), SQLite a lock file beside the database, memory an
in-process table; a lock dies with its process. Before each append the backend checks that the
log is still exactly what this process wrote; if someone else replaced, truncated or appended to
it, writing that session stops (:class:`SessionTamperedError`), the unwritten events stay in
memory, and nothing of the other program's is overwritten or cut.
:class:`PostgresPersistence` takes the session's lease across hosts and fences every write.

Errors::

    PersistenceError (TrioAgentError)
    ├── SessionCorruptError (ValueError)          a stored log is damaged (path, line)
    ├── SessionFormatError (ValueError)           an unknown format or version
    ├── StoredSessionNotFoundError (LookupError)  no stored log with that id
    ├── StoredSessionExistsError (ValueError)     a fresh session's id already has a stored log
    ├── SessionWriteError (OSError)               writing failed; the events stay buffered
    ├── SessionBusyError (RuntimeError)           another live writer holds the session
    ├── SessionTamperedError (RuntimeError)       someone else changed a live log; writing stopped
    └── InboxUnavailableError (LookupError)       ctx.inbox asked for without a shared backend
"""

from ._backend import Backend as Backend
from ._backend import Position as Position
from ._backend import ReadResult as ReadResult
from ._errors import PersistenceError as PersistenceError
from ._errors import SessionBusyError as SessionBusyError
from ._errors import SessionCorruptError as SessionCorruptError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionTamperedError as SessionTamperedError
from ._errors import SessionWriteError as SessionWriteError
from ._errors import StoredSessionExistsError as StoredSessionExistsError
from ._errors import StoredSessionNotFoundError as StoredSessionNotFoundError
from ._format import FORMAT_TAG as FORMAT_TAG
from ._format import SUPPORTED_VERSIONS as SUPPORTED_VERSIONS
from ._format import jsonl_lines as jsonl_lines
from ._format import session_info as session_info
from ._jsonl import JsonlBackend as JsonlBackend
from ._jsonl import JsonlPersistence as JsonlPersistence
from ._memory import MemoryBackend as MemoryBackend
from ._memory import MemoryPersistence as MemoryPersistence
from ._memory import MemoryStorage as MemoryStorage
from ._postgres import PostgresBackend as PostgresBackend
from ._postgres import PostgresPersistence as PostgresPersistence
from ._postgres_inbox import Inbox as Inbox
from ._postgres_inbox import InboxUnavailableError as InboxUnavailableError
from ._postgres_inbox import require_inbox as require_inbox
from ._postgres_inbox import send_prompt as send_prompt
from ._sqlite import SqliteBackend as SqliteBackend
from ._sqlite import SqlitePersistence as SqlitePersistence
from ._types import SESSION_PERSISTENCE as SESSION_PERSISTENCE
from ._types import SessionInfo as SessionInfo
from ._types import SessionPersistence as SessionPersistence
from ._types import StoredSession as StoredSession
from ._writer import PersistenceService as PersistenceService

__all__ = [
    "FORMAT_TAG",
    "SESSION_PERSISTENCE",
    "SUPPORTED_VERSIONS",
    "Backend",
    "Inbox",
    "InboxUnavailableError",
    "JsonlBackend",
    "JsonlPersistence",
    "MemoryBackend",
    "MemoryPersistence",
    "MemoryStorage",
    "PersistenceError",
    "PersistenceService",
    "Position",
    "PostgresBackend",
    "PostgresPersistence",
    "ReadResult",
    "SessionBusyError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionInfo",
    "SessionPersistence",
    "SessionTamperedError",
    "SessionWriteError",
    "SqliteBackend",
    "SqlitePersistence",
    "StoredSession",
    "StoredSessionExistsError",
    "StoredSessionNotFoundError",
    "jsonl_lines",
    "require_inbox",
    "send_prompt",
    "session_info",
]
