"""Blocking psycopg work called from trio, and cancelled through PostgreSQL.

psycopg's async API runs on asyncio only, so the backend uses its sync API in worker threads
(as the SQLite backend does). A thread cannot be abandoned mid-query, and a plain
``trio.to_thread.run_sync`` would make a cancelled caller wait for the query to end (a
``pg_sleep(5)`` takes five seconds to cancel). :func:`run_interruptible` waits for its thread
like ``to_thread.run_sync`` does, so the outcome is never lost, but a trio cancellation also asks
the server to cancel the running statement (``cancel_safe()``) and stops the work at the next
statement; work that has passed its point of no return (a ``COMMIT`` sent) is left to finish and
its result returned, so the caller books it before the cancellation is delivered at its next
checkpoint. Every connection also has a ``statement_timeout``, so nothing runs unbounded.

:class:`Database` is the connection pool (psycopg-pool) used this way: one pooled connection per
call, at most ``pool_size`` calls at once (waiting for a slot is a trio wait, so it cancels).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, final

import trio

from .._threads import wait_in_thread
from ._errors import PersistenceError
from ._postgres_dsn import PostgresDsn, import_psycopg

if TYPE_CHECKING:
    import outcome
    import psycopg
    import psycopg_pool

__all__ = ["CallInterrupted", "Database", "Interrupt", "run_interruptible"]

logger = logging.getLogger("trio_agent.persistence")

T = TypeVar("T")

#: How long the request that cancels a running statement may take.
CANCEL_TIMEOUT = 5.0


class CallInterrupted(Exception):
    """Raised in a worker thread whose trio caller was cancelled: the work stopped before its
    point of no return, and its transaction was rolled back."""


@final
class Interrupt:
    """What a worker thread and its cancelled trio caller share.

    The thread :meth:`attach`\\ es the connection it works on, calls :meth:`check` between
    statements and :meth:`commit` right before its point of no return. The caller's cancellation
    (:meth:`request`) raises :class:`CallInterrupted` at the thread's next check and cancels the
    statement running on that connection (not after the point of no return).

    A cancel request reaches the server on a connection of its own, so it may arrive after the
    statement it was meant for: :meth:`detach` waits until it was delivered, and tells the
    caller whether one was sent (a pooled connection that got one is discarded, so a late
    cancel can never hit the next user's statement).
    """

    __slots__ = ("_cancelled", "_conn", "_final", "_lock", "_requested")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._requested = False
        self._final = False
        #: Set once the cancel request sent for this call has been delivered (or failed).
        self._cancelled: threading.Event | None = None

    @property
    def requested(self) -> bool:
        """Whether the caller was cancelled."""
        return self._requested

    def attach(self, conn: psycopg.Connection[Any]) -> None:
        """Mark ``conn`` as the connection this call works on (from the thread)."""
        with self._lock:
            if self._requested:
                raise CallInterrupted
            self._conn = conn

    def detach(self) -> bool:
        """The call no longer uses its connection (from the thread). Returns whether a cancel
        request was sent to it, after waiting until that request was delivered."""
        with self._lock:
            self._conn = None
            cancelled = self._cancelled
        if cancelled is None:
            return False
        cancelled.wait(CANCEL_TIMEOUT + 1)
        return True

    def check(self) -> None:
        """Raise :class:`CallInterrupted` if the caller was cancelled (from the thread)."""
        if self._requested:
            raise CallInterrupted

    def commit(self) -> None:
        """The point of no return (from the thread): raise :class:`CallInterrupted` if the caller
        was cancelled, else let the work finish whatever happens to the caller."""
        with self._lock:
            if self._requested:
                raise CallInterrupted
            self._final = True

    def request(self) -> None:
        """Ask the thread to stop (from trio), and cancel its running statement, if any, from a
        helper thread (a cancel request is a network round trip)."""
        with self._lock:
            self._requested = True
            conn = None if self._final or self._cancelled is not None else self._conn
            if conn is None:
                return
            done = self._cancelled = threading.Event()
        trio.lowlevel.start_thread_soon(functools.partial(_cancel_statement, conn, done), _ignore)


def _cancel_statement(conn: psycopg.Connection[Any], done: threading.Event) -> None:
    try:
        conn.cancel_safe(timeout=CANCEL_TIMEOUT)
    except Exception as exc:  # the statement_timeout still bounds the statement
        logger.warning("could not cancel a PostgreSQL statement: %s", type(exc).__name__)
    finally:
        done.set()


def _ignore(_: outcome.Outcome[None]) -> None:
    pass


async def run_interruptible(fn: Callable[[Interrupt], T]) -> T:
    """Run ``fn(interrupt)`` in a worker thread and return its result (or raise its error).

    Cancellation: a cancel before the thread starts raises :class:`trio.Cancelled` and runs
    nothing. Later, the caller still waits for the thread (so its outcome is never lost), while
    the cancel asks PostgreSQL to cancel the running statement (``cancel_safe()`` in a helper
    thread) and makes ``fn``'s next :meth:`Interrupt.check` raise; ``fn`` interrupted that way
    ends in :class:`trio.Cancelled`. Once ``fn`` passed :meth:`Interrupt.commit`, the cancel
    waits for it and its result is returned: the cancellation is delivered at the caller's next
    checkpoint.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    interrupt = Interrupt()
    result: T | CallInterrupted = await wait_in_thread(
        functools.partial(_interruptible, fn, interrupt), on_cancel=interrupt.request
    )
    if isinstance(result, CallInterrupted):
        await trio.lowlevel.checkpoint()  # the cancel is still pending: it is raised here
        raise PersistenceError(
            "a PostgreSQL call was interrupted by a cancellation that was undone"
        )
    return result


def _interruptible(fn: Callable[[Interrupt], T], interrupt: Interrupt) -> T | CallInterrupted:
    try:
        return fn(interrupt)
    except CallInterrupted as exc:
        return exc


@final
class Database:
    """The backend's connection pool, used from trio (see the module docs).

    Connections are ``autocommit`` (work opens its own transactions) and carry
    ``statement_timeout`` and ``idle_in_transaction_session_timeout``. The pool opens on the first
    call; a pool that could not open is tried again by the next call.
    """

    def __init__(
        self,
        dsn: PostgresDsn,
        *,
        pool_size: int,
        statement_timeout: float,
        connect_timeout: float,
        setup: Callable[[psycopg.Connection[Any]], str],
    ) -> None:
        self.dsn = dsn
        self._statement_timeout = statement_timeout
        self._connect_timeout = connect_timeout
        self._pool_size = pool_size
        #: Run on the first connection, before the pool opens (the schema check); it returns
        #: the schema the tables live in.
        self._setup = setup
        #: The schema the tables live in (known once the pool is open).
        self.schema = ""
        self._limiter = trio.CapacityLimiter(pool_size)
        self._open_lock = trio.Lock()
        # A list, so the pool can be set without rebinding an attribute.
        self._pool: list[psycopg_pool.ConnectionPool[Any]] = []
        self._closed = False

    def connection_options(self) -> dict[str, Any]:
        """The psycopg connection keywords of every connection this backend opens."""
        return {
            "autocommit": True,
            "connect_timeout": max(1, round(self._connect_timeout)),
        }

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set the session limits on a new connection (from a thread)."""
        millis = str(max(1, round(self._statement_timeout * 1000)))
        conn.execute(
            "SELECT set_config('statement_timeout', %s, false), "
            "set_config('idle_in_transaction_session_timeout', %s, false)",
            (millis, str(max(1, round(self._statement_timeout * 2000)))),
        )

    async def run(self, fn: Callable[[psycopg.Connection[Any], Interrupt], T]) -> T:
        """Run ``fn(connection, interrupt)`` in a worker thread with a pooled connection (see
        :func:`run_interruptible` for cancellation). psycopg errors come out as :class:`OSError`
        with the DSN's secrets scrubbed; :class:`PersistenceError`\\ s pass through."""
        await self._open()
        async with self._limiter:
            return await run_interruptible(functools.partial(self._call, fn))

    def _call(
        self, fn: Callable[[psycopg.Connection[Any], Interrupt], T], interrupt: Interrupt
    ) -> T:
        pool = self._pool[0]
        with self.translated(interrupt), pool.connection(timeout=self._connect_timeout + 5) as conn:
            interrupt.attach(conn)
            try:
                return fn(conn, interrupt)
            finally:
                if interrupt.detach():
                    conn.close()  # the pool drops it: a late cancel must not hit another call

    @contextlib.contextmanager
    def translated(self, interrupt: Interrupt) -> Iterator[None]:
        """Turn the driver's errors raised in the block into :class:`CallInterrupted` (a
        statement cancelled for the caller) or :class:`OSError` (anything else: a statement
        timeout, a lost connection), never quoting a secret."""
        psycopg = import_psycopg()
        try:
            yield
        except psycopg.errors.QueryCanceled:
            if interrupt.requested:
                raise CallInterrupted from None
            raise OSError(
                f"a PostgreSQL statement ran longer than the statement_timeout of "
                f"{self._statement_timeout:g} s and was cancelled ({self.dsn.display})"
            ) from None
        except (psycopg.Error, _pool_errors()) as exc:
            raise self.os_error(exc) from None

    def os_error(self, exc: BaseException) -> OSError:
        """``exc`` (a driver error) as an :class:`OSError` whose message names the server and
        never a secret."""
        text = self.dsn.scrub(str(exc).strip()) or type(exc).__name__
        return OSError(f"PostgreSQL error at {self.dsn.display}: {text}")

    async def _open(self) -> None:
        if self._pool:
            await trio.lowlevel.checkpoint()
            return
        async with self._open_lock:
            if self._closed:
                raise trio.ClosedResourceError("the PostgreSQL backend is closed")
            if not self._pool:
                self._pool.append(await trio.to_thread.run_sync(self._open_pool))

    def _open_pool(self) -> psycopg_pool.ConnectionPool[Any]:
        psycopg = import_psycopg()
        from psycopg_pool import ConnectionPool

        # One plain connection first: its error says what is wrong (the pool's only times out).
        try:
            with psycopg.connect(self.dsn.conninfo, **self.connection_options()) as conn:
                self.configure(conn)
                self.schema = self._setup(conn)
        except psycopg.Error as exc:
            raise self.os_error(exc) from None
        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn.conninfo,
            kwargs=self.connection_options(),
            min_size=1,
            max_size=self._pool_size,
            open=False,
            configure=self.configure,
            name="trio-agent",
            timeout=self._connect_timeout + 5,
        )
        try:
            pool.open(wait=True, timeout=self._connect_timeout)
        except BaseException as exc:
            pool.close()
            if isinstance(exc, (psycopg.Error, _pool_errors())):
                raise self.os_error(exc) from None
            raise
        return pool

    async def aclose(self) -> None:
        """Close the pool (idempotent); later calls raise :class:`trio.ClosedResourceError`."""
        async with self._open_lock:
            self._closed = True
            if self._pool:
                pool = self._pool.pop()
                await trio.to_thread.run_sync(pool.close)


def _pool_errors() -> type[Exception]:
    from psycopg_pool import PoolTimeout

    return PoolTimeout
