"""One live writer per session, across processes and hosts: the leases of the PostgreSQL backend.

**The lease connection.** Each backend (one per worker process) keeps one extra connection, opened
at its first :meth:`Leases.acquire`, on which it holds a session-level advisory lock for every
session it owns: ``pg_try_advisory_lock(lock_key)``, never a connection per session. A lock dies
with its connection, so the sessions of a worker that is SIGKILLed, or whose connection the
server ends (``pg_terminate_backend``, a partition noticed by TCP keepalives), can be acquired by
another worker as soon as the server notices. The same connection ``LISTEN``\\ s for inbox
notifications; :meth:`Leases.serve` waits for it to become readable with
``trio.lowlevel.wait_readable``, so the wait cancels cleanly, and notices a lost connection at
once.

**Lock keys.** A session's key is a stable 64-bit hash of the schema and the session id, stored
in its ``trio_agent_leases`` row (``lock_key`` is ``UNIQUE``); the rare id whose hash another id
already took gets the hash with the next salt. Rows are never deleted, so a session's key never
changes and two sessions never share one.

**Generations and fencing.** Each acquire increments the row's ``generation`` and records the
holder (``application_name``, pid, host, backend pid), in one transaction that locks the lease
row before it takes the advisory lock (and a release clears the holder under the same row lock):
a concurrent claim waits for the row, so one that finds the lock taken always finds its holder
recorded, and the busy error can name it. Every write runs, in its own transaction,
``SELECT generation, pg_try_advisory_xact_lock(lock_key) ... FOR SHARE``: the generation must be
the one this backend acquired and the lock must be held (by the lease connection, so the try
fails); otherwise the write stores nothing and raises
:class:`~trio_agent.persistence.SessionTamperedError`. ``FOR SHARE`` makes a takeover's
generation bump wait for a write in flight, so whatever a stale writer committed before the
takeover is visible to the new holder's first read, and nothing after it lands. A write of a
session this backend never acquired takes the lock for its transaction only, and is refused with
:class:`~trio_agent.persistence.SessionBusyError` while anyone holds the lease.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar, final

import attrs
import trio

from ..ids import SessionId
from ._errors import PersistenceError, SessionBusyError, SessionTamperedError
from ._postgres_calls import Database, Interrupt, run_interruptible
from ._postgres_dsn import import_psycopg
from ._postgres_schema import INBOX_CHANNEL, advisory_key

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "Fence",
    "Holder",
    "LeaseLost",
    "LeaseWatcher",
    "Leases",
    "busy_error",
    "check_fence",
]

logger = logging.getLogger("trio_agent.persistence")

T = TypeVar("T")

#: Server-side TCP keepalive of the lease connection (idle seconds, interval, probes): a worker
#: whose host vanished loses its locks within about 25 s.
_KEEPALIVE = (10, 5, 3)


@attrs.frozen
class Holder:
    """Who holds a lease: the ``application_name``, process id and host of its worker."""

    name: str | None
    pid: int | None
    host: str | None

    @classmethod
    def this_process(cls, name: str) -> Holder:
        """The holder this process records."""
        return cls(name, os.getpid(), socket.gethostname())

    def describe(self) -> str:
        """``trio-agent (pid 12 on host h)``."""
        parts = [f"pid {self.pid}" if self.pid is not None else None]
        if self.host:
            parts.append(f"on host {self.host}")
        detail = " ".join(p for p in parts if p)
        return f"{self.name or 'a worker'}{f' ({detail})' if detail else ''}"


@attrs.frozen
class Fence:
    """What a write checks in its transaction: the session's lock key, and the generation this
    backend acquired (``None`` for a session it never acquired)."""

    key: int
    generation: int | None


@attrs.define(eq=False)
class _Lease:
    key: int
    generation: int
    #: Why the lease was lost (``None`` while it is held).
    lost: str | None = None


@attrs.frozen(eq=False)
class _LeaseConnection:
    conn: psycopg.Connection[Any]
    #: The server process of the connection (recorded as the holder's backend).
    pid: int
    #: The socket, kept so the listener can be woken before the connection closes it.
    fd: int


class LeaseWatcher(Protocol):
    """What :class:`Leases` tells about its sessions (the inbox listens)."""

    def lease_acquired(self, session_id: SessionId) -> None:
        """This backend now holds ``session_id``."""
        ...

    def lease_ended(self, session_id: SessionId) -> None:
        """This backend released or lost ``session_id``."""
        ...

    def prompt_arrived(self, session_id: SessionId) -> None:
        """An inbox notification for ``session_id``, which this backend holds, arrived."""
        ...


@final
class Leases:
    """The leases of one backend: the lease connection, its advisory locks and the lease rows
    (see the module docs)."""

    def __init__(self, database: Database, holder: Holder) -> None:
        self._db = database
        self._holder = holder
        self._keys: dict[SessionId, int] = {}
        self._held: dict[SessionId, _Lease] = {}
        self._watchers: list[LeaseWatcher] = []
        #: One call at a time on the lease connection (the listener's reads included).
        self._lock = trio.Lock()
        # At most one item: the lease connection.
        self._conn: list[_LeaseConnection] = []
        self._connected = trio.Event()
        self._closed = False

    def watch(self, watcher: LeaseWatcher) -> None:
        """Tell ``watcher`` about acquired, ended and notified sessions."""
        self._watchers.append(watcher)

    def holds(self, session_id: SessionId) -> bool:
        """Whether this backend holds ``session_id``'s lease (acquired, not lost)."""
        lease = self._held.get(session_id)
        return lease is not None and lease.lost is None

    # --- acquire and release ----------------------------------------------------------------

    async def acquire(self, session_id: SessionId, where: str) -> None:
        """Take ``session_id``'s lease for this backend (a no-op if it holds it already).

        Raises:
            SessionBusyError: another live worker holds it (named in the message).
            PersistenceError: PostgreSQL cannot be reached.
        """
        if self.holds(session_id):
            await trio.lowlevel.checkpoint()
            return
        try:
            key = await self.key_for(session_id)
            async with self._lock:
                lease = await self._connection()
                take = functools.partial(
                    _take, session_id=session_id, key=key, holder=self._holder, pid=lease.pid
                )
                generation = await self._call(lease, take)
        except OSError as exc:
            raise PersistenceError(
                f"cannot acquire session {session_id!r} at {where}: {exc}; check that the "
                "server is reachable"
            ) from None
        if generation is None:
            await self._refuse(session_id, key)
        self._held[session_id] = _Lease(key, generation)
        for watcher in self._watchers:
            watcher.lease_acquired(session_id)

    async def _refuse(self, session_id: SessionId, key: int) -> NoReturn:
        try:
            holder = await self._db.run(functools.partial(_current_holder, sid=session_id, key=key))
        except OSError:
            holder = None
        raise busy_error(session_id, holder)

    async def release(self, session_id: SessionId) -> None:
        """Give up ``session_id``'s lease (clear the holder, unlock). Never raises for a lease
        that is already gone; logs what it could not do."""
        lease = self._held.pop(session_id, None)
        if lease is None:
            await trio.lowlevel.checkpoint()
            return
        for watcher in self._watchers:
            watcher.lease_ended(session_id)
        if lease.lost is not None:
            await trio.lowlevel.checkpoint()
            return
        async with self._lock:
            if not self._conn:
                return
            give_up = functools.partial(
                _give_up, session_id=session_id, key=lease.key, generation=lease.generation
            )
            try:
                unlocked = await self._call(self._conn[0], give_up)
            except OSError as exc:
                logger.warning(
                    "session %r: releasing its PostgreSQL lease failed (%s); it ends with the "
                    "lease connection",
                    session_id,
                    exc,
                )
                return
        if not unlocked:
            logger.warning("session %r: its PostgreSQL lease was already gone", session_id)

    # --- fencing ----------------------------------------------------------------------------

    async def fence(self, session_id: SessionId, where: str, count: int) -> Fence:
        """What a write of ``session_id`` checks (see :func:`check_fence`).

        Raises:
            SessionTamperedError: this backend lost the session's lease: nothing may be written.
        """
        lease = self._held.get(session_id)
        if lease is None:
            return Fence(await self.key_for(session_id), None)
        if lease.lost is not None:
            raise _lost_error(session_id, where, lease.lost, count)
        await trio.lowlevel.checkpoint()
        return Fence(lease.key, lease.generation)

    def refused(self, session_id: SessionId, reason: str) -> None:
        """A write found ``session_id``'s lease gone (:func:`check_fence` raised
        :class:`LeaseLost`): stop writing it. Not for a log found changed under a lease
        this backend still holds: that lease is released (unlocked) as usual."""
        lease = self._held.get(session_id)
        if lease is not None and lease.lost is None:
            lease.lost = reason
            for watcher in self._watchers:
                watcher.lease_ended(session_id)

    async def key_for(self, session_id: SessionId) -> int:
        """``session_id``'s lock key, assigned (and its lease row made) on first use."""
        key = self._keys.get(session_id)
        if key is None:
            key = await self._db.run(
                lambda conn, _: _assign_key(conn, sid=session_id, schema=self._db.schema)
            )
            self._keys[session_id] = key
        else:
            await trio.lowlevel.checkpoint()
        return key

    # --- the lease connection ---------------------------------------------------------------

    async def _connection(self) -> _LeaseConnection:
        """The lease connection, opened if there is none (the caller holds the lock)."""
        if self._closed:
            raise trio.ClosedResourceError("the PostgreSQL backend is closed")
        if self._conn:
            await trio.lowlevel.checkpoint()
            return self._conn[0]
        lease = await trio.to_thread.run_sync(self._connect)
        self._conn.append(lease)
        self._connected.set()
        return lease

    def _connect(self) -> _LeaseConnection:
        psycopg = import_psycopg()
        db = self._db
        try:
            conn = psycopg.connect(db.dsn.conninfo, **_keepalive_options(db.connection_options()))
        except psycopg.Error as exc:
            raise db.os_error(exc) from None
        try:
            db.configure(conn)
            idle, interval, count = _KEEPALIVE
            conn.execute(
                "SELECT set_config('tcp_keepalives_idle', %s, false), "
                "set_config('tcp_keepalives_interval', %s, false), "
                "set_config('tcp_keepalives_count', %s, false)",
                (str(idle), str(interval), str(count)),
            )
            conn.execute(f"LISTEN {INBOX_CHANNEL}")
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            return _LeaseConnection(conn, int(row[0]), conn.fileno())
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.Error):
                raise db.os_error(exc) from None
            raise

    async def _call(
        self, lease: _LeaseConnection, fn: Callable[[psycopg.Connection[Any], Interrupt], T]
    ) -> T:
        """Run ``fn`` on the lease connection (the caller holds the lock), then dispatch the
        notifications that arrived meanwhile. A lost connection loses every lease."""
        try:
            result, notified = await run_interruptible(
                functools.partial(self._on_connection, lease.conn, fn)
            )
        except OSError as exc:
            if lease.conn.broken or lease.conn.closed:
                await self._lose(lease, str(exc))
            raise
        self._dispatch(notified)
        return result

    def _on_connection(
        self,
        conn: psycopg.Connection[Any],
        fn: Callable[[psycopg.Connection[Any], Interrupt], T],
        interrupt: Interrupt,
    ) -> tuple[T, list[str]]:
        with self._db.translated(interrupt):
            interrupt.attach(conn)
            try:
                return fn(conn, interrupt), _drain(conn)
            finally:
                interrupt.detach()

    async def serve(self) -> NoReturn:
        """Listen on the lease connection until cancelled: dispatch inbox notifications, and
        lose every lease as soon as the connection ends. Run it in the owner's nursery."""
        psycopg = import_psycopg()
        while True:
            if not self._conn:
                await self._connected.wait()  # set by _connection, replaced by _lose
                continue
            lease = self._conn[0]
            try:
                await trio.lowlevel.wait_readable(lease.fd)
            except (trio.ClosedResourceError, OSError):
                continue  # closed by _lose or aclose; the next connection is waited for
            async with self._lock:
                if not self._conn or self._conn[0] is not lease:
                    continue
                try:
                    notified = await trio.to_thread.run_sync(_drain, lease.conn)
                except psycopg.Error as exc:
                    await self._lose(lease, self._db.dsn.scrub(str(exc).strip()))
                    continue
            self._dispatch(notified)

    def _dispatch(self, notified: list[str]) -> None:
        prefix = f"{self._db.schema}/"
        for payload in notified:
            if not payload.startswith(prefix):
                continue  # another schema's inbox
            sid = SessionId(payload[len(prefix) :])
            if self.holds(sid):
                for watcher in self._watchers:
                    watcher.prompt_arrived(sid)

    async def _lose(self, lease: _LeaseConnection, reason: str) -> None:
        """The lease connection ended: every lease on it is lost (the caller holds the lock)."""
        if not self._conn or self._conn[0] is not lease:
            return
        self._conn.clear()
        self._connected = trio.Event()
        lost = [sid for sid, held in self._held.items() if held.lost is None]
        for sid in lost:
            self._held[sid].lost = f"the PostgreSQL connection holding its lease ended ({reason})"
            for watcher in self._watchers:
                watcher.lease_ended(sid)
        if lost:
            logger.error(
                "the PostgreSQL lease connection of this worker ended (%s): it no longer holds "
                "sessions %s, and refuses to write them; resume them to continue",
                reason,
                ", ".join(repr(s) for s in sorted(lost)),
            )
        await self._close(lease)

    async def _close(self, lease: _LeaseConnection) -> None:
        # Wake the listener first: its wait must end before the socket number can be reused.
        trio.lowlevel.notify_closing(lease.fd)
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lease.conn.close)

    async def aclose(self) -> None:
        """Close the lease connection (its locks go with it); later acquires raise
        :class:`trio.ClosedResourceError`."""
        async with self._lock:
            self._closed = True
            for held in self._held.values():
                held.lost = held.lost or "the backend was closed"
            self._connected = trio.Event()
            if self._conn:
                await self._close(self._conn.pop())


# --- the SQL, run in worker threads -----------------------------------------------------------


def _keepalive_options(options: dict[str, Any]) -> dict[str, Any]:
    idle, interval, count = _KEEPALIVE
    return {
        **options,
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": interval,
        "keepalives_count": count,
    }


def _drain(conn: psycopg.Connection[Any]) -> list[str]:
    """The payloads of the notifications received on ``conn`` (never blocks)."""
    return [n.payload for n in conn.notifies(timeout=0) if n.channel == INBOX_CHANNEL]


def _take(
    conn: psycopg.Connection[Any],
    interrupt: Interrupt,
    *,
    session_id: SessionId,
    key: int,
    holder: Holder,
    pid: int,
) -> int | None:
    """Lock ``key`` on the lease connection and take the next generation; ``None`` when
    another session holds the lock.

    One transaction that locks the lease row first: the lock and the holder recorded with it
    change together for anyone who takes the row lock too (a concurrent claim waits here; a
    write in flight, holding the row ``FOR SHARE``, is waited for), so whoever finds the lock
    taken finds its holder recorded (:func:`_current_holder`)."""
    locked = False
    try:
        with conn.transaction():
            conn.execute(
                "SELECT 1 FROM trio_agent_leases WHERE session_id = %s FOR UPDATE", (session_id,)
            )
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is None or not row[0]:
                return None
            locked = True
            interrupt.check()
            row = conn.execute(
                "UPDATE trio_agent_leases SET generation = generation + 1, holder_name = %s, "
                "holder_pid = %s, holder_host = %s, holder_backend = %s, acquired_at = now() "
                "WHERE session_id = %s RETURNING generation",
                (holder.name, holder.pid, holder.host, pid, session_id),
            ).fetchone()
            if row is None:
                raise PersistenceError(f"session {session_id!r} has no lease row; was it deleted?")
            interrupt.commit()
    except BaseException:
        if locked:  # a session-level lock outlives the rolled-back transaction: drop it
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except Exception:
                pass  # a broken connection: the lock died with it
        raise
    return int(row[0])


def _give_up(
    conn: psycopg.Connection[Any],
    interrupt: Interrupt,
    *,
    session_id: SessionId,
    key: int,
    generation: int,
) -> bool:
    """Clear the holder and unlock, under the lease row's lock (see :func:`_take`): a claim
    that finds the lock still held also finds this holder still recorded."""
    with conn.transaction():
        conn.execute(
            "UPDATE trio_agent_leases SET holder_name = NULL, holder_pid = NULL, "
            "holder_host = NULL, holder_backend = NULL WHERE session_id = %s AND generation = %s",
            (session_id, generation),
        )
        row = conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()
    return bool(row and row[0])


def _assign_key(conn: psycopg.Connection[Any], *, sid: SessionId, schema: str) -> int:
    for salt in range(64):
        row = conn.execute(
            "SELECT lock_key FROM trio_agent_leases WHERE session_id = %s", (sid,)
        ).fetchone()
        if row is not None:
            return int(row[0])
        key = advisory_key("lease", schema, sid, str(salt))
        row = conn.execute(
            "INSERT INTO trio_agent_leases (session_id, lock_key) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING RETURNING lock_key",
            (sid, key),
        ).fetchone()
        if row is not None:
            return int(row[0])
    raise PersistenceError(f"session {sid!r}: no free advisory lock key after 64 tries")


def _current_holder(
    conn: psycopg.Connection[Any], interrupt: Interrupt, *, sid: SessionId, key: int
) -> Holder | None:
    """Who holds ``key`` now, from the lease row, if its recorded backend is the one holding
    the lock (``pg_locks``); ``None`` when the lock holder is not a trio-agent lease."""
    row = conn.execute(
        "SELECT l.holder_name, l.holder_pid, l.holder_host, l.holder_backend, "
        "(SELECT k.pid FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted "
        "AND k.objsubid = 1 AND k.classid = (%s)::bigint::oid AND k.objid = (%s)::bigint::oid "
        "AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "LIMIT 1) "
        "FROM trio_agent_leases l WHERE l.session_id = %s",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF, sid),
    ).fetchone()
    if row is None or row[3] is None or row[3] != row[4]:
        return None
    return Holder(row[0], row[1], row[2])


def check_fence(
    conn: psycopg.Connection[Any], session_id: SessionId, fence: Fence, where: str, count: int
) -> None:
    """The fencing check every write runs first in its transaction (see the module docs).

    Raises:
        LeaseLost: the lease this backend acquired is lost or taken over (its ``error`` is the
            ``SessionTamperedError`` to report).
        SessionBusyError: a session this backend never acquired is held by another worker.
    """
    row = conn.execute(
        "SELECT generation, holder_name, holder_pid, holder_host, "
        "pg_try_advisory_xact_lock(lock_key) FROM trio_agent_leases WHERE session_id = %s "
        "FOR SHARE",
        (session_id,),
    ).fetchone()
    if row is None:
        raise PersistenceError(f"session {session_id!r} has no lease row at {where}")
    generation, name, pid, host, free = row
    holder = Holder(name, pid, host)
    if fence.generation is None:
        if not free:
            raise busy_error(session_id, holder if name else None, unwritten=count)
        return
    if generation != fence.generation:
        taker = holder.describe() if name else "another worker"
        raise LeaseLost(_lost_error(session_id, where, f"{taker} took it over", count))
    if free:
        raise LeaseLost(
            _lost_error(session_id, where, "its advisory lock is no longer held", count)
        )


def busy_error(
    session_id: SessionId, holder: Holder | None, *, unwritten: int | None = None
) -> SessionBusyError:
    """The one error for a session another worker holds: a refused :meth:`Leases.acquire`, and
    a write of a session this backend never acquired (``unwritten`` events refused). Both say
    what to do: acquire the session once its holder lets go. ``holder`` is ``None`` when the
    lock is held by something that is not a trio-agent lease."""
    if holder is None:
        who = "another PostgreSQL session (one that is not a trio-agent worker's lease)"
        pid = host = None
    else:
        who, pid, host = holder.describe(), holder.pid, holder.host
    refused = (
        ""
        if unwritten is None
        else f", so this process may not write it ({unwritten} events not written)"
    )
    return SessionBusyError(
        f"session {session_id!r} is open in another worker: {who} holds its lease{refused}; "
        "one session has one writer: acquire the session here (ctx.agents.resume does) once "
        "that worker releases it or its connection ends",
        session_id=session_id,
        pid=pid,
        host=host,
    )


class LeaseLost(Exception):
    """Raised by :func:`check_fence` (in the write's worker thread) when the lease this backend
    acquired is gone: lost with the lease connection, or taken over. ``error`` is the
    :class:`~trio_agent.persistence.SessionTamperedError` the write reports; the backend marks
    the lease lost (:meth:`Leases.refused`) and raises ``error``. A log found changed under a
    lease the backend still holds raises ``SessionTamperedError`` directly: that lease is
    released (unlocked) as usual."""

    def __init__(self, error: SessionTamperedError) -> None:
        super().__init__(str(error))
        self.error = error


def _lost_error(session_id: SessionId, where: str, reason: str, count: int) -> SessionTamperedError:
    return SessionTamperedError(
        f"session {session_id!r}: this worker lost its lease ({reason}), so it stopped writing "
        f"the session; {count} events are not written. Resume the session to continue it",
        session_id=session_id,
        path=where,
    )
