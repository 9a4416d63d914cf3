"""One live writer per session: leases, fencing and lost lease connections, with two "workers"
(two runtimes, each with its own backend and lease connection) in this process. The same with
real worker processes is test_postgres_workers.py."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from pg_helpers import admin, schema_for, until_a_statement_waits

from trio_agent.agent import AgentRegistry
from trio_agent.ids import SessionId
from trio_agent.persistence import (
    PersistenceService,
    PostgresBackend,
    PostgresPersistence,
    SessionBusyError,
    SessionTamperedError,
)
from trio_agent.persistence._postgres_schema import advisory_key
from trio_agent.runtime import Context, open_runtime
from trio_agent.session import SessionEvent, SessionStore
from trio_agent.testing import append_tool_turn, open_test_harness, text

GUARD = 30.0


@contextlib.asynccontextmanager
async def open_worker(dsn: str, *, listen: bool = True) -> AsyncIterator[Context]:
    """A runtime with a session store and the PostgreSQL backend: the plugin (which listens on
    its lease connection), or with ``listen=False`` the bare backend under the shared writer
    (which learns a lease is gone only when it writes)."""
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        if listen:
            await ctx.plugin(PostgresPersistence, PostgresPersistence.Config(dsn=dsn))
        else:
            config = PersistenceService.Config(backend=PostgresBackend(dsn))
            await ctx.plugin(PersistenceService, config)
        yield ctx


def persistence(ctx: Context) -> PersistenceService:
    return ctx.require(PersistenceService)


def lease_row(dsn: str, session_id: str) -> tuple[object, ...]:
    with admin(dsn) as conn:
        row = conn.execute(
            "SELECT generation, holder_name, holder_pid, holder_host, holder_backend "
            "FROM trio_agent_leases WHERE session_id = %s",
            (session_id,),
        ).fetchone()
    assert row is not None
    return tuple(row)


def stored_types(dsn: str, session_id: str) -> list[str]:
    with admin(dsn) as conn:
        rows = conn.execute(
            "SELECT type FROM trio_agent_events WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()
    return [r[0] for r in rows]


def terminate_lease_connection(dsn: str, session_id: str) -> None:
    """Simulate a partition: the server ends the connection holding ``session_id``'s lease
    (and waits, up to 30 s, until that backend is gone and its locks with it)."""
    backend_pid = lease_row(dsn, session_id)[4]
    with admin(dsn) as conn:
        row = conn.execute("SELECT pg_terminate_backend(%s, 30000)", (backend_pid,)).fetchone()
    assert row == (True,)


@contextlib.contextmanager
def logged(text: str) -> Iterator[trio.Event]:
    """An event set when the persistence logger logs an error containing ``text``."""
    seen = trio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                seen.set()

    handler = Watch(logging.ERROR)
    logger = logging.getLogger("trio_agent.persistence")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def lease_loss_logged() -> contextlib.AbstractContextManager[trio.Event]:
    """An event set when the backend logs that its lease connection ended."""
    return logged("lease connection of this worker ended")


async def test_a_second_worker_gets_session_busy_naming_the_holder(dsn: str) -> None:
    async with open_worker(dsn) as a, open_worker(dsn) as b:
        await persistence(a).acquire("s1")
        generation, name, pid, host, _ = lease_row(dsn, "s1")
        assert (generation, name, pid, host) == (1, "trio-agent", os.getpid(), socket.gethostname())
        with pytest.raises(SessionBusyError) as caught:
            await persistence(b).acquire("s1")
        busy = caught.value
        assert (busy.session_id, busy.pid, busy.host) == ("s1", os.getpid(), socket.gethostname())
        assert f"trio-agent (pid {os.getpid()} on host {socket.gethostname()})" in str(busy)
        # The holder writes and detaches the session: its final write releases the lease.
        sessions = a.require(SessionStore)
        session = sessions.create("s1")
        append_tool_turn(session)
        await sessions.flush(session)
        sessions.detach(session)
        with trio.fail_after(GUARD):
            while lease_row(dsn, "s1")[1] is not None:
                await trio.testing.wait_all_tasks_blocked()
        await persistence(b).acquire("s1")
        assert lease_row(dsn, "s1")[0] == 2


async def test_one_lease_connection_holds_every_session(dsn: str) -> None:
    async with open_worker(dsn) as ctx:
        for n in range(40):
            await persistence(ctx).acquire(f"s{n}")
        backend_pid = lease_row(dsn, "s0")[4]
        with admin(dsn) as conn:
            holders = conn.execute(
                "SELECT DISTINCT holder_backend FROM trio_agent_leases"
            ).fetchall()
            locks = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s "
                "AND granted",
                (backend_pid,),
            ).fetchone()
            ours = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'trio-agent'"
            ).fetchone()
        assert holders == [(backend_pid,)]
        assert locks == (40,)
        # The pool (4 at most) and the one lease connection, whatever the number of sessions.
        assert ours is not None and ours[0] <= 5


async def test_a_claim_in_progress_is_waited_for_so_busy_names_its_holder(dsn: str) -> None:
    # Another worker's claim between taking the lock and recording itself (here done by hand,
    # the way _take does it: the lease row locked first). A claim meanwhile waits for the row,
    # so it never reports the lock held by "not a trio-agent worker".
    async with open_worker(dsn) as ctx:
        await persistence(ctx).acquire("warm-up")  # the tables exist now
        with admin(dsn) as conn:
            conn.execute("INSERT INTO trio_agent_leases (session_id, lock_key) VALUES ('s1', 42)")
        with admin(dsn) as other:
            other.execute("BEGIN")
            other.execute("SELECT 1 FROM trio_agent_leases WHERE session_id = 's1' FOR UPDATE")
            assert other.execute("SELECT pg_try_advisory_lock(42)").fetchone() == (True,)
            refused: list[SessionBusyError] = []

            async def claim() -> None:
                with pytest.raises(SessionBusyError) as caught:
                    await persistence(ctx).acquire("s1")
                refused.append(caught.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(claim)
                await until_a_statement_waits(dsn, "transactionid")
                other.execute(
                    "UPDATE trio_agent_leases SET generation = generation + 1, "
                    "holder_name = 'elsewhere', holder_pid = 4242, holder_host = 'worker-3', "
                    "holder_backend = pg_backend_pid() WHERE session_id = 's1'"
                )
                other.execute("COMMIT")
        (busy,) = refused
        assert (busy.pid, busy.host) == (4242, "worker-3")
        assert "elsewhere (pid 4242 on host worker-3) holds its lease" in str(busy)


async def test_a_lock_key_collision_gets_a_key_of_its_own(dsn: str, tmp_path: Path) -> None:
    schema = schema_for(tmp_path)
    async with open_worker(dsn) as a, open_worker(dsn) as b:
        await persistence(a).acquire("warm-up")  # the tables exist now
        # Another session already has the hash of "b" as its key.
        taken = advisory_key("lease", schema, "b", "0")
        with admin(dsn) as conn:
            conn.execute(
                "INSERT INTO trio_agent_leases (session_id, lock_key) VALUES ('squatter', %s)",
                (taken,),
            )
        await persistence(a).acquire("b")
        await persistence(b).acquire("squatter")  # not blocked by "b"'s lease
        with admin(dsn) as conn:
            keys: dict[str, int] = dict(
                conn.execute(
                    "SELECT session_id, lock_key FROM trio_agent_leases "
                    "WHERE session_id IN ('b', 'squatter')"
                ).fetchall()
            )
        assert keys == {"squatter": taken, "b": advisory_key("lease", schema, "b", "1")}
        with pytest.raises(SessionBusyError):
            await persistence(b).acquire("b")


async def test_a_stale_writer_never_appends_after_a_takeover(dsn: str) -> None:
    # Worker A does not listen, so it learns of the lost lease only from its own writes.
    async with open_worker(dsn, listen=False) as a:
        await persistence(a).acquire("s1")
        stale = a.require(SessionStore).create("s1")
        append_tool_turn(stale, prompt="from A")
        await a.require(SessionStore).flush(stale)
        first = stored_types(dsn, "s1")
        terminate_lease_connection(dsn, "s1")

        async with open_worker(dsn) as b:
            await persistence(b).acquire("s1")
            stored = await persistence(b).load("s1")
            assert [e.type for e in stored.events] == first
            assert lease_row(dsn, "s1")[0] == 2

            append_tool_turn(stale, prompt="A again")
            with pytest.raises(SessionTamperedError, match="lost its lease") as caught:
                await a.require(SessionStore).flush(stale)
            assert caught.value.session_id == "s1"
            assert "took it over" in str(caught.value)
            # Once refused, it does not try again.
            with pytest.raises(SessionTamperedError):
                await a.require(SessionStore).flush(stale)
            assert stored_types(dsn, "s1") == first
            a.require(SessionStore).detach(stale)


async def test_a_lost_lease_refuses_writes_even_before_anyone_takes_over(dsn: str) -> None:
    async with open_worker(dsn, listen=False) as a:
        await persistence(a).acquire("s1")
        session = a.require(SessionStore).create("s1")
        append_tool_turn(session)
        await a.require(SessionStore).flush(session)
        first = stored_types(dsn, "s1")
        terminate_lease_connection(dsn, "s1")
        append_tool_turn(session, prompt="after the partition")
        with pytest.raises(SessionTamperedError, match="no longer held"):
            await a.require(SessionStore).flush(session)
        assert stored_types(dsn, "s1") == first
        a.require(SessionStore).detach(session)


async def test_a_write_of_an_unclaimed_session_is_refused_while_another_holds_it(
    dsn: str,
) -> None:
    async with open_worker(dsn) as a, open_worker(dsn) as b:
        await persistence(b).acquire("s1")
        session = a.require(SessionStore).create("s1")
        append_tool_turn(session)
        with pytest.raises(SessionBusyError, match="acquire the session"):
            await a.require(SessionStore).flush(session)
        assert stored_types(dsn, "s1") == []
        a.require(SessionStore).detach(session)


async def test_a_raw_write_of_a_session_another_worker_holds_is_busy_and_stores_nothing(
    dsn: str,
) -> None:
    # The fence's own refusal (the writer always acquires first, so only a bare backend gets
    # here): the same SessionBusyError, saying the same thing, as a refused acquire.
    async with open_worker(dsn) as holder:
        await persistence(holder).acquire("s1")
        session = holder.require(SessionStore).create("s1")
        append_tool_turn(session)
        await holder.require(SessionStore).flush(session)
        first = stored_types(dsn, "s1")
        other = PostgresBackend(dsn)
        try:
            read = await other.read(SessionId("s1"))
            assert read is not None
            extra = SessionEvent(read.position.count, "plugin/other", 1.0, {})
            with pytest.raises(SessionBusyError, match="acquire the session") as caught:
                await other.write(read.header, read.position, [extra])
            with pytest.raises(SessionBusyError, match="acquire the session") as refused:
                await other.acquire(SessionId("s1"))
        finally:
            await other.aclose()
        busy = caught.value
        assert (busy.session_id, busy.pid, busy.host) == ("s1", os.getpid(), socket.gethostname())
        assert "1 events not written" in str(busy)
        assert str(refused.value).split(" holds its lease")[0] == str(busy).split(" holds")[0]
        assert stored_types(dsn, "s1") == first
        holder.require(SessionStore).detach(session)


async def test_a_log_changed_under_a_held_lease_is_refused_and_the_lease_released(
    dsn: str,
) -> None:
    # A log found changed (not a lost lease): writing stops, but the lease is still this
    # worker's, and detaching the session unlocks it for the next one.
    async with open_worker(dsn) as a, open_worker(dsn) as b:
        await persistence(a).acquire("s1")
        session = a.require(SessionStore).create("s1")
        append_tool_turn(session)
        await a.require(SessionStore).flush(session)
        with admin(dsn) as conn:
            conn.execute("UPDATE trio_agent_sessions SET event_count = event_count - 1")
        append_tool_turn(session, prompt="mine")
        with pytest.raises(SessionTamperedError, match="another program changed it"):
            await a.require(SessionStore).flush(session)
        with pytest.raises(SessionBusyError):
            await persistence(b).acquire("s1")
        a.require(SessionStore).detach(session)
        with trio.fail_after(GUARD):
            while lease_row(dsn, "s1")[1] is not None:
                await trio.testing.wait_all_tasks_blocked()
        await persistence(b).acquire("s1")


async def test_a_worker_that_lost_a_lease_can_claim_the_session_again_once_detached(
    dsn: str,
) -> None:
    config = PostgresPersistence.Config(dsn=dsn)
    async with open_test_harness(
        [text("one"), text("two")], persistence=PostgresPersistence, persistence_config=config
    ) as h:
        store = h.ctx.require(PostgresPersistence)
        agents = h.ctx.require(AgentRegistry)
        handle = await agents.create(agent_id="a", session_id="s1")
        handle.agent.send("before")
        await handle.agent.wait_idle()
        first = stored_types(dsn, "s1")
        with lease_loss_logged() as lost:
            terminate_lease_connection(dsn, "s1")
            with trio.fail_after(GUARD):
                await lost.wait()
        # Appended after the loss and never flushed: the final write is the one refused, and
        # the claim goes back with it (nothing is left to retry at unload).
        append_tool_turn(handle.agent.session, prompt="after the partition")
        with logged("never written") as dropped:
            await handle.aclose()
            with trio.fail_after(GUARD):
                await dropped.wait()
        await trio.testing.wait_all_tasks_blocked()
        # The same worker claims it again, on a new lease connection, and goes on.
        handle = await agents.resume(agent_id="a", resume_session_id="s1")
        assert store.backend.leases.holds(SessionId("s1"))
        assert lease_row(dsn, "s1")[0] == 2
        handle.agent.send("again")
        await handle.agent.wait_idle()
        await handle.aclose()
    types = stored_types(dsn, "s1")
    assert types[: len(first)] == first
    assert types.count("turn/start") == 2 and types[-1] == "turn/end"


async def test_a_session_claimed_by_its_final_write_at_unload_is_stored(dsn: str) -> None:
    # Published without a claim and never flushed: the unload's write claims it, after the
    # inbox delivery task has already stopped (its wake-up must not fail the write).
    async with open_worker(dsn) as a:
        session = a.require(SessionStore).create("late")
        append_tool_turn(session)
    assert stored_types(dsn, "late") == [e.type for e in session.events]


async def test_a_partitioned_holder_stops_writing_and_reports_it(dsn: str) -> None:
    async with open_worker(dsn) as a:
        store = persistence(a)
        assert isinstance(store, PostgresPersistence)
        await store.acquire("s1")
        session = a.require(SessionStore).create("s1")
        append_tool_turn(session)
        await a.require(SessionStore).flush(session)
        first = stored_types(dsn, "s1")
        with lease_loss_logged() as lost:
            terminate_lease_connection(dsn, "s1")
            with trio.fail_after(GUARD):
                await lost.wait()
        assert not store.backend.leases.holds(SessionId("s1"))
        append_tool_turn(session, prompt="after the partition")
        with pytest.raises(SessionTamperedError, match="connection holding its lease ended"):
            await a.require(SessionStore).flush(session)
        assert stored_types(dsn, "s1") == first
        # The worker goes on: a new lease connection serves new claims.
        await store.acquire("s2")
        assert store.backend.leases.holds(SessionId("s2"))
        a.require(SessionStore).detach(session)
