"""The SQLite backend: every session in one database file (stdlib ``sqlite3``, WAL mode).

Schema (``PRAGMA user_version = 1``)::

    sessions(id TEXT PRIMARY KEY, header TEXT /* JSON */, created_at REAL, updated_at REAL)
    events(session_id, seq, type, time, data TEXT /* JSON */, PRIMARY KEY(session_id, seq))
    INDEX events_turn_starts ON events(session_id, type, seq) WHERE type = 'turn/start'

One row per event; every write is one ``BEGIN IMMEDIATE`` transaction with
``synchronous=FULL``, so a flush is all-or-nothing and durable when it returns. The one
connection is used from one worker thread at a time (a trio lock serialises the calls); the
database is opened on first use, its directory created 0700 and its file 0600.

One writer per session: a claim (``acquire``) is an exclusive, non-blocking ``flock`` on a lock
file beside the database, ``<database>.<session_id>.lock`` (0600), which holds the holder's pid
and host; it is removed, still locked, when the claim is released. ``flock`` excludes processes
on one host; several hosts sharing one database file over a network file system are not kept
apart (use a server database for that). An append first checks that the session holds exactly
the events this backend wrote; otherwise another program changed it, and the write refuses with
:class:`SessionTamperedError`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, final

import attrs
import trio

from .._locking import held
from .._threads import run_sync, run_sync_when_idle
from ..ids import SessionId
from ..runtime import Context
from ..session import SessionEvent, SessionHeader
from ._backend import Backend, Position, ReadResult
from ._errors import (
    PersistenceError,
    SessionCorruptError,
    SessionFormatError,
    SessionTamperedError,
    stored_session_exists,
)
from ._format import (
    encode_json,
    event_from_json,
    header_from_json,
    header_to_json,
)
from ._fs import ensure_private_dir
from ._locks import busy_error, holder_note, lock, named_holder, note_deadline, same_file
from ._tables import decode_column, infos_from_rows, infos_query
from ._types import SessionInfo
from ._writer import PersistenceService

__all__ = ["SqliteBackend", "SqlitePersistence"]

logger = logging.getLogger("trio_agent.persistence")

P = ParamSpec("P")
T = TypeVar("T")

#: ``PRAGMA user_version`` of the schema this build reads and writes.
SCHEMA_VERSION = 1

#: What ``infos()`` counts turns with. Partial: an index over every event's type put each
#: commit's rows in as many index pages as the batch had types (9 WAL pages per durable
#: commit instead of 4; docs/design.md, "SQLite indexes only the turn starts").
_TURN_STARTS_INDEX = (
    "CREATE INDEX IF NOT EXISTS events_turn_starts ON events (session_id, type, seq) "
    "WHERE type = 'turn/start'"
)
#: Indexes of earlier builds (same schema version: indexes hold no data), replaced at open.
_OLD_INDEXES = ("events_by_type",)

_SCHEMA = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        header TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time REAL NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID""",
    _TURN_STARTS_INDEX,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)


@final
class SqlitePersistence(PersistenceService, name="session_persistence"):
    """``ctx.session_persistence`` in one SQLite database (WAL, ``synchronous=FULL``).

    ``path`` is resolved against the working directory when the plugin loads. Same semantics
    as :class:`~trio_agent.persistence.JsonlPersistence`.
    """

    @attrs.frozen
    class Config:
        """``path``: the database file; ``inline_when_idle``: as :class:`SqliteBackend`'s."""

        path: str = ".trio-agent/sessions.sqlite3"
        inline_when_idle: bool = True

    config: SqlitePersistence.Config

    def __init__(self, ctx: Context, config: SqlitePersistence.Config) -> None:
        backend = SqliteBackend(config.path, inline_when_idle=config.inline_when_idle)
        super().__init__(ctx, config, backend)
        #: The absolute path of the database file.
        self.path = backend.path


@final
class SqliteBackend(Backend):
    """The :class:`~trio_agent.persistence.Backend` of :class:`SqlitePersistence`: every session
    in the database at ``path`` (resolved against the working directory now), with the schema
    :mod:`trio_agent.persistence._sqlite` describes. The database is opened by the first call
    that needs it and created by the first write.

    A write (one transaction) runs in the trio thread when no other task is ready to run, in a
    worker thread otherwise, as :class:`~trio_agent.persistence.JsonlBackend`'s does;
    ``inline_when_idle=False`` always hops."""

    def __init__(self, path: str, *, inline_when_idle: bool = True) -> None:
        #: The absolute path of the database file.
        self.path = os.path.abspath(path)
        self._run_write = run_sync_when_idle if inline_when_idle else run_sync
        self._lock = trio.Lock()
        # A list, so the connection can be set without rebinding an attribute.
        self._db: list[sqlite3.Connection] = []
        #: Claimed sessions -> the descriptor of their locked lock file.
        self._claims: dict[SessionId, int] = {}

    def __repr__(self) -> str:
        return f"<SqliteBackend {self.path}>"

    def location(self, session_id: SessionId) -> str:
        return f"{self.path} (session {session_id!r})"

    async def _run(self, fn: Callable[Concatenate[sqlite3.Connection, P], T], *args: Any) -> T:
        """Run the write ``fn(connection, *args)``, one call at a time (see the class docs)."""
        async with held(self._lock):  # free: no schedule point (#13)
            return await self._run_write(self._call, fn, *args)

    async def _query(
        self, fn: Callable[Concatenate[sqlite3.Connection, P], T], absent: T, *args: Any
    ) -> T:
        """Like :meth:`_run` for reads: ``absent`` when the database was never created (reads
        never create it)."""
        async with self._lock:
            return await run_sync(self._call_if_created, absent, fn, *args)

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if not self._db:
            self._db.append(self._open())
        return fn(self._db[0], *args)

    def _call_if_created(self, absent: T, fn: Callable[..., T], *args: Any) -> T:
        if not self._db and not os.path.exists(self.path):
            return absent
        return self._call(fn, *args)

    def _open(self) -> sqlite3.Connection:
        directory = os.path.dirname(self.path)
        try:
            ensure_private_dir(directory)
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise PersistenceError(
                f"cannot open the session database {self.path}: {exc}; check the path and its "
                "permissions"
            ) from exc
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
            db.execute("PRAGMA foreign_keys = ON")
            self._check_schema(db)
        except BaseException as exc:
            db.close()
            if isinstance(exc, sqlite3.Error):
                raise PersistenceError(
                    f"cannot use {self.path} as a session database: {exc}; is it an SQLite "
                    "database? Move it aside or point SqlitePersistence at another path"
                ) from exc
            raise
        return db

    def _replace_old_indexes(self, db: sqlite3.Connection) -> None:
        """Drop the indexes of earlier builds and create this build's, in the caller's
        transaction (no-ops for a database that has this build's already)."""
        for name in _OLD_INDEXES:
            db.execute(f"DROP INDEX IF EXISTS {name}")
        db.execute(_TURN_STARTS_INDEX)

    def _check_schema(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if version == 0 and not tables:
                for statement in _SCHEMA:
                    db.execute(statement)
            elif version == SCHEMA_VERSION and {"sessions", "events"} <= tables:
                self._replace_old_indexes(db)
            else:
                raise SessionFormatError(
                    f"session database {self.path} has schema version {version} (this build "
                    f"reads version {SCHEMA_VERSION}"
                    + ("" if version else ", and the file holds other tables")
                    + "); use a build that reads it, or point SqlitePersistence at another path",
                    path=self.path,
                    found=version,
                    supported=(SCHEMA_VERSION,),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # --- reading ----------------------------------------------------------------------------

    async def read(self, session_id: SessionId) -> ReadResult | None:
        return await self._query(self._read, None, session_id)

    def _read(self, db: sqlite3.Connection, session_id: SessionId) -> ReadResult | None:
        try:
            db.execute("BEGIN")
            try:
                row = db.execute(
                    "SELECT header FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                rows = (
                    db.execute(
                        "SELECT seq, type, time, data FROM events WHERE session_id = ? ORDER BY seq",
                        (session_id,),
                    ).fetchall()
                    if row is not None
                    else []
                )
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise PersistenceError(
                f"cannot read session {session_id!r} from {self.path}: {exc}"
            ) from exc
        if row is None:
            return None
        header = header_from_json(
            self._decode(row[0], session_id, "header"),
            path=self.path,
            line=None,
            session_id=session_id,
        )
        events: list[SessionEvent] = []
        for expected, (seq, kind, stamp, data) in enumerate(rows):
            obj = {
                "seq": seq,
                "type": kind,
                "time": stamp,
                "data": self._decode(data, session_id, f"event {seq}"),
            }
            event = event_from_json(obj, expected)
            if type(event) is str:
                raise SessionCorruptError(
                    f"session database {self.path}, session {session_id!r}, event row seq "
                    f"{seq}: {event}; restore the database from a backup",
                    path=self.path,
                )
            events.append(event)  # type: ignore[arg-type]
        return ReadResult(header, tuple(events), Position(len(events)))

    def _decode(self, text: object, session_id: SessionId, what: str) -> object:
        return decode_column(
            text,
            session_id=session_id,
            what=what,
            place=f"session database {self.path}",
            path=self.path,
        )

    async def exists(self, session_id: SessionId) -> bool:
        return await self._query(self._exists, False, session_id)

    @staticmethod
    def _exists(db: sqlite3.Connection, session_id: SessionId) -> bool:
        row = db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    async def infos(self) -> list[SessionInfo]:
        return await self._query(self._infos, [])

    def _infos(self, db: sqlite3.Connection) -> list[SessionInfo]:
        rows = db.execute(infos_query("sessions", "events")).fetchall()
        return infos_from_rows(rows, place=f"session database {self.path}", path=self.path)

    # --- claims -----------------------------------------------------------------------------

    def _lock_path(self, session_id: SessionId) -> str:
        return f"{self.path}.{session_id}.lock"

    async def acquire(self, session_id: SessionId) -> None:
        await run_sync(self._acquire, session_id)

    def _acquire(self, session_id: SessionId) -> None:
        if session_id in self._claims:
            return
        path = self._lock_path(session_id)
        try:
            ensure_private_dir(os.path.dirname(self.path))
            deadline = note_deadline()
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
                try:
                    if not lock(fd):
                        holder = named_holder(os.pread(fd, 4096, 0), deadline)
                        if holder is not None:
                            raise busy_error(session_id, self.location(session_id), *holder)
                    # A releasing holder removes the file before letting go of it: lock the
                    # file the name holds now, not the removed one.
                    elif same_file(fd, path):
                        os.ftruncate(fd, 0)
                        os.pwrite(fd, holder_note(), 0)
                        self._claims[session_id] = fd
                        return
                except BaseException:
                    os.close(fd)
                    raise
                os.close(fd)
        except OSError as exc:
            raise PersistenceError(
                f"cannot claim session {session_id!r}: the lock file {path} cannot be used "
                f"({exc}); check the permissions of {os.path.dirname(self.path)}"
            ) from exc

    async def release(self, session_id: SessionId) -> None:
        await run_sync(self._release, session_id)

    def _release(self, session_id: SessionId) -> None:
        fd = self._claims.pop(session_id, None)
        if fd is None:
            return
        try:
            os.unlink(self._lock_path(session_id))  # still locked: nobody else uses this file
        except OSError:
            pass
        finally:
            os.close(fd)

    # --- writing ----------------------------------------------------------------------------

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        rows = [(header.session_id, e.seq, e.type, e.time, encode_json(e.data)) for e in events]
        head = encode_json(header_to_json(header))
        return await self._run(self._write, header, head, position, rows)

    def _write(
        self,
        db: sqlite3.Connection,
        header: SessionHeader,
        head: str,
        position: Position | None,
        rows: list[tuple[str, int, str, float, str]],
    ) -> Position:
        sid = header.session_id
        start = 0 if position is None else position.count
        updated_at = rows[-1][3] if rows else header.created_at
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if position is None:
                    try:
                        db.execute(
                            "INSERT INTO sessions (id, header, created_at, updated_at) "
                            "VALUES (?, ?, ?, ?)",
                            (sid, head, header.created_at, updated_at),
                        )
                    except sqlite3.IntegrityError:
                        raise stored_session_exists(sid, self.location(sid)) from None
                else:
                    stored = db.execute(
                        "SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE session_id = ?", (sid,)
                    ).fetchone()[0]
                    if stored != start:
                        raise SessionTamperedError(
                            f"session {sid!r} in {self.path} holds {stored} events, but "
                            f"{start} were written or loaded here; another program changed it, "
                            "so nothing more is written to it",
                            session_id=sid,
                            path=self.location(sid),
                        )
                    db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (updated_at, sid))
                db.executemany(
                    "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
                    rows,
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise OSError(f"SQLite error: {exc}") from exc
        return Position(start + len(rows))

    async def aclose(self) -> None:
        async with self._lock:
            for session_id in list(self._claims):
                await run_sync(self._release, session_id)
            if self._db:
                db = self._db.pop()
                await run_sync(db.close)
