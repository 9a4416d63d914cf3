"""Durable sessions: ``ctx.session_persistence`` and its backends.

Mount one backend; it provides the :class:`SessionPersistence` protocol (``load``, ``list``,
``exists``) and writes every live session behind the scenes:

* :class:`JsonlPersistence` (default): one ``<session_id>.jsonl`` file per session, a header line
  then one JSON object per event;
* :class:`SqlitePersistence`: one SQLite database (WAL), one row per event;
* :class:`MemoryPersistence`: dicts, for tests.

Write-behind: events are buffered as they are appended (no I/O) and written, then made durable
(fsync / a ``synchronous=FULL`` commit), when the session is flushed (``ctx.sessions.flush``; the
loop flushes at every turn end) and when it is detached. A fresh session's log is created by its
first write, so an unused session leaves nothing behind. A resumed session writes only what is
new: the crash-repair closers and ``session/end-seed`` its seed added, then its new turns.

Failures: a failed write raises :class:`SessionWriteError` from the flush and keeps the events
buffered; the next flush retries them. A cancel during a flush never leaves a half-recorded
write: the blocking work runs in a worker thread that is waited for, and its outcome is recorded
before the cancel is delivered.

Errors::

    PersistenceError (TrioAgentError)
    ├── SessionCorruptError (ValueError)          a stored log is damaged (path, line)
    ├── SessionFormatError (ValueError)           an unknown format or version
    ├── StoredSessionNotFoundError (LookupError)  no stored log with that id
    ├── StoredSessionExistsError (ValueError)     a fresh session's id already has a stored log
    └── SessionWriteError (OSError)               writing failed; the events stay buffered
"""

from ._errors import PersistenceError as PersistenceError
from ._errors import SessionCorruptError as SessionCorruptError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionWriteError as SessionWriteError
from ._errors import StoredSessionExistsError as StoredSessionExistsError
from ._errors import StoredSessionNotFoundError as StoredSessionNotFoundError
from ._format import FORMAT_TAG as FORMAT_TAG
from ._format import SUPPORTED_VERSIONS as SUPPORTED_VERSIONS
from ._format import jsonl_lines as jsonl_lines
from ._jsonl import JsonlPersistence as JsonlPersistence
from ._memory import MemoryPersistence as MemoryPersistence
from ._memory import MemoryStorage as MemoryStorage
from ._sqlite import SqlitePersistence as SqlitePersistence
from ._types import SessionInfo as SessionInfo
from ._types import SessionPersistence as SessionPersistence
from ._types import StoredSession as StoredSession

__all__ = [
    "FORMAT_TAG",
    "SUPPORTED_VERSIONS",
    "JsonlPersistence",
    "MemoryPersistence",
    "MemoryStorage",
    "PersistenceError",
    "SessionCorruptError",
    "SessionFormatError",
    "SessionInfo",
    "SessionPersistence",
    "SessionWriteError",
    "SqlitePersistence",
    "StoredSession",
    "StoredSessionExistsError",
    "StoredSessionNotFoundError",
    "jsonl_lines",
]
