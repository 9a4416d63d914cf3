"""The PostgreSQL backend: sessions shared by many worker processes on many hosts, one live
writer per session.

:class:`PostgresBackend` stores each event as one row (``(session_id, seq)`` is the primary key)
and each header in its own table (:mod:`~trio_agent.persistence._postgres_schema`); every write
is one transaction, fenced by the session's lease
(:mod:`~trio_agent.persistence._postgres_lease`), made durable by the commit
(``synchronous_commit`` as the server has it: ``on`` by default). psycopg's sync API runs in
worker threads, cancelled through the server (:mod:`~trio_agent.persistence._postgres_calls`).

:class:`PostgresPersistence` is the plugin: the shared writer over this backend, the lease
connection's listener, and ``ctx.inbox`` (:mod:`~trio_agent.persistence._postgres_inbox`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn, final

import attrs
import trio

from ..ids import SessionId
from ..redaction import Redactor
from ..runtime import Context
from ..session import SessionEvent, SessionHeader
from ._backend import Backend, Position, ReadResult
from ._errors import (
    PersistenceError,
    SessionCorruptError,
    SessionTamperedError,
    stored_session_exists,
)
from ._format import encode_json, event_from_json, header_from_json, header_to_json
from ._postgres_calls import Database, Interrupt
from ._postgres_dsn import PostgresDsn
from ._postgres_inbox import Deliveries, Inbox
from ._postgres_lease import Fence, Holder, LeaseLost, Leases, check_fence
from ._postgres_schema import ensure_schema
from ._tables import decode_column, infos_from_rows, infos_query
from ._types import SessionInfo
from ._writer import PersistenceService

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresBackend", "PostgresPersistence"]

logger = logging.getLogger("trio_agent.persistence")

_Row = tuple[str, int, str, float, str]


@final
class PostgresBackend(Backend):
    """The :class:`~trio_agent.persistence.Backend` of :class:`PostgresPersistence`: every
    session in the PostgreSQL database at ``dsn`` (a ``postgresql://`` URL or ``key=value``
    pairs), in the current schema of its connections.

    ``pool_size`` connections at most serve reads and writes (plus one lease connection, opened
    by the first :meth:`acquire`); ``statement_timeout`` bounds every statement and
    ``connect_timeout`` every connection attempt, in seconds. The tables are created, or their
    version checked, by the first call that needs the database.

    ``acquire``/``release`` take and drop the session's lease; every write is fenced by it (see
    :mod:`trio_agent.persistence._postgres_lease`). Run :meth:`serve` in a nursery to learn at
    once that the lease connection ended (writes are fenced without it too) and to hear inbox
    notifications.
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 4,
        statement_timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        #: The parsed DSN (its ``repr`` and ``display`` never show the password).
        self.dsn = PostgresDsn.parse(dsn)
        #: The connection pool.
        self.database = Database(
            self.dsn,
            pool_size=pool_size,
            statement_timeout=statement_timeout,
            connect_timeout=connect_timeout,
            setup=functools.partial(ensure_schema, where=self.dsn.display),
        )
        #: The leases this backend holds.
        self.leases = Leases(self.database, Holder.this_process(self.dsn.application_name))
        #: The inbox prompts handed to agents and not yet logged.
        self.deliveries = Deliveries()

    def __repr__(self) -> str:
        return f"<PostgresBackend {self.dsn.display}>"

    def secrets(self) -> tuple[str, ...]:
        """The secrets in the DSN (its password), for a redactor."""
        return self.dsn.secrets

    def location(self, session_id: SessionId) -> str:
        return f"{self.dsn.display} (session {session_id!r})"

    async def open(self) -> None:
        """Connect and check (or create) the tables now rather than at first use.

        Raises:
            PersistenceError: the database cannot be reached or its tables are not usable.
        """
        await self._query(lambda conn, _: None)

    async def _query(self, fn: Any) -> Any:
        """A read: a driver failure becomes a :class:`PersistenceError`."""
        try:
            return await self.database.run(fn)
        except OSError as exc:
            raise PersistenceError(f"cannot read the session store: {exc}") from None

    # --- reading ----------------------------------------------------------------------------

    async def read(self, session_id: SessionId) -> ReadResult | None:
        where = self.location(session_id)
        result: ReadResult | None = await self._query(
            functools.partial(_read, session_id=session_id, where=where, path=self.dsn.display)
        )
        return result

    async def exists(self, session_id: SessionId) -> bool:
        found: bool = await self._query(
            lambda conn, _: (
                conn.execute(
                    "SELECT 1 FROM trio_agent_sessions WHERE id = %s", (session_id,)
                ).fetchone()
                is not None
            )
        )
        return found

    async def infos(self) -> list[SessionInfo]:
        infos: list[SessionInfo] = await self._query(
            functools.partial(_infos, path=self.dsn.display)
        )
        return infos

    # --- writing ----------------------------------------------------------------------------

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        sid = header.session_id
        where = self.location(sid)
        fence = await self.leases.fence(sid, where, len(events))
        rows = [(sid, e.seq, e.type, e.time, encode_json(e.data)) for e in events]
        consumed = self.deliveries.consumed_by(sid, events)
        write = functools.partial(
            _write,
            header=header,
            head=encode_json(header_to_json(header)),
            start=None if position is None else position.count,
            rows=rows,
            fence=fence,
            consumed=consumed,
            where=where,
        )
        try:
            count: int = await self.database.run(write)
        except LeaseLost as lost:
            self.leases.refused(sid, str(lost.error))
            raise lost.error from None
        # No checkpoint from here to the writer's books.
        self.deliveries.consumed(sid, consumed)
        return Position(count)

    # --- leases -----------------------------------------------------------------------------

    async def acquire(self, session_id: SessionId) -> None:
        """Take the session's lease (see :meth:`Backend.acquire
        <trio_agent.persistence.Backend.acquire>`).

        Raises:
            SessionBusyError: another live worker holds it; the error names its
                ``application_name``, pid and host.
            PersistenceError: PostgreSQL cannot be reached.
        """
        await self.leases.acquire(session_id, self.location(session_id))

    async def release(self, session_id: SessionId) -> None:
        await self.leases.release(session_id)

    async def serve(self) -> NoReturn:
        """Listen on the lease connection until cancelled (see :meth:`Leases.serve`)."""
        await self.leases.serve()

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.leases.aclose()
            await self.database.aclose()


# --- the SQL, run in worker threads -----------------------------------------------------------


def _decode(text: object, session_id: SessionId, what: str, path: str) -> object:
    return decode_column(
        text, session_id=session_id, what=what, place=f"session store {path}", path=path
    )


def _read(
    conn: psycopg.Connection[Any],
    interrupt: Interrupt,
    *,
    session_id: SessionId,
    where: str,
    path: str,
) -> ReadResult | None:
    row = conn.execute(
        "SELECT header, event_count FROM trio_agent_sessions WHERE id = %s", (session_id,)
    ).fetchone()
    if row is None:
        return None
    head, count = row
    interrupt.check()
    # Events are only ever appended: the first ``count`` rows are the log the header row saw.
    cursor = conn.cursor(binary=True)
    rows = cursor.execute(
        "SELECT seq, type, time, data FROM trio_agent_events WHERE session_id = %s AND seq < %s "
        "ORDER BY seq",
        (session_id, count),
    ).fetchall()
    header = header_from_json(
        _decode(head, session_id, "header", path), path=path, line=None, session_id=session_id
    )
    events: list[SessionEvent] = []
    for expected, (seq, kind, stamp, data) in enumerate(rows):
        obj = {
            "seq": seq,
            "type": kind,
            "time": stamp,
            "data": _decode(data, session_id, f"event {seq}", path),
        }
        event = event_from_json(obj, expected)
        if isinstance(event, str):
            raise SessionCorruptError(
                f"session store {where}, event row seq {seq}: {event}; restore the database "
                "from a backup",
                path=path,
            )
        events.append(event)
    if len(events) != count:
        raise SessionCorruptError(
            f"session store {where}: {len(events)} event rows, but the session holds {count}; "
            "restore the database from a backup",
            path=path,
        )
    return ReadResult(header, tuple(events), Position(count))


def _infos(conn: psycopg.Connection[Any], interrupt: Interrupt, *, path: str) -> list[SessionInfo]:
    rows = conn.execute(infos_query("trio_agent_sessions", "trio_agent_events")).fetchall()
    return infos_from_rows(rows, place=f"session store {path}", path=path)


def _write(
    conn: psycopg.Connection[Any],
    interrupt: Interrupt,
    *,
    header: SessionHeader,
    head: str,
    start: int | None,
    rows: Sequence[_Row],
    fence: Fence,
    consumed: list[int],
    where: str,
) -> int:
    """One fenced transaction: check the lease, create or advance the session row, copy the
    events, consume the inbox rows they log. Returns the new event count."""
    sid = header.session_id
    updated_at = rows[-1][3]
    with conn.transaction():
        interrupt.check()
        check_fence(conn, sid, fence, where, len(rows))
        if start is None:
            created = conn.execute(
                "INSERT INTO trio_agent_sessions (id, header, created_at, updated_at, event_count) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (sid, head, header.created_at, updated_at, len(rows)),
            )
            if created.rowcount != 1:
                raise stored_session_exists(sid, where)
        else:
            advanced = conn.execute(
                "UPDATE trio_agent_sessions SET updated_at = %s, event_count = event_count + %s "
                "WHERE id = %s AND event_count = %s",
                (updated_at, len(rows), sid, start),
            )
            if advanced.rowcount != 1:
                _changed_under_us(conn, sid, start, where)
        interrupt.check()
        with conn.cursor().copy(
            "COPY trio_agent_events (session_id, seq, type, time, data) FROM STDIN"
        ) as copy:
            for row in rows:
                copy.write_row(row)
        if consumed:
            conn.execute(
                "DELETE FROM trio_agent_inbox WHERE session_id = %s AND id = ANY(%s)",
                (sid, consumed),
            )
        interrupt.commit()
    return (0 if start is None else start) + len(rows)


def _changed_under_us(
    conn: psycopg.Connection[Any], sid: SessionId, start: int, where: str
) -> NoReturn:
    row = conn.execute(
        "SELECT event_count FROM trio_agent_sessions WHERE id = %s", (sid,)
    ).fetchone()
    found = "is gone" if row is None else f"holds {row[0]} events"
    raise SessionTamperedError(
        f"session {sid!r} at {where} {found}, but {start} were written or loaded here; another "
        "program changed it, so nothing was written. Load the session again",
        session_id=sid,
        path=where,
    )


@final
class PostgresPersistence(PersistenceService, name="session_persistence"):
    """``ctx.session_persistence`` in PostgreSQL, shared by every worker process on every host:
    one live writer per session (``acquire`` takes its lease; a second worker gets
    :class:`~trio_agent.persistence.SessionBusyError`), writes fenced by the lease, crashed
    workers' sessions free to resume at once, and ``ctx.inbox`` to send a session prompts from
    any process. Config ``{type: postgres, dsn: ${DATABASE_URL}}``; ``docs/postgres.md`` is the
    guide.

    Loading connects and checks (or creates) the tables, so a wrong DSN fails the mount with a
    clear error. The DSN's password is a secret: :meth:`secrets` returns it for a redactor, and
    no message, ``repr`` or log line shows it.
    """

    @attrs.frozen
    class Config:
        """``dsn``: the database (``postgresql://user:password@host:5432/dbname``, or key=value
        pairs; ``options=-csearch_path=NAME`` picks the schema). ``pool_size``: connections
        for reads and writes (one more holds the leases). ``statement_timeout`` and
        ``connect_timeout``: bounds in seconds."""

        dsn: str = attrs.field(repr=lambda dsn: repr(_display(dsn)))
        pool_size: int = attrs.field(default=4, validator=attrs.validators.ge(1))
        statement_timeout: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
        connect_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))

    config: PostgresPersistence.Config

    def __init__(self, ctx: Context, config: PostgresPersistence.Config) -> None:
        backend = PostgresBackend(
            config.dsn,
            pool_size=config.pool_size,
            statement_timeout=config.statement_timeout,
            connect_timeout=config.connect_timeout,
        )
        super().__init__(ctx, config, backend)
        #: The backend this service writes through.
        self.backend = backend
        #: ``ctx.inbox``.
        self.inbox = Inbox(ctx, backend.database, backend.leases, backend.deliveries)
        redactor = ctx.get(Redactor)
        if redactor is not None:
            redactor.add(*backend.secrets())

    async def start(self) -> None:
        """Connect (the tables are checked or created), adopt live sessions, and start the
        lease listener and the inbox delivery in this plugin's nursery."""
        await self.backend.open()
        await super().start()
        self.ctx.start_soon(self.backend.serve, name="postgres lease listener")
        self.ctx.start_soon(self.inbox.run, name="postgres inbox delivery")

    def secrets(self) -> tuple[str, ...]:
        """The secrets of the configuration (the DSN's password), for a redactor."""
        return self.backend.secrets()


def _display(dsn: str) -> str:
    try:
        return PostgresDsn.parse(dsn).display
    except PersistenceError:
        return "<DSN>"
