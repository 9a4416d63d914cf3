"""Cancelling database work: a trio cancellation cancels the statement in the server (a flush
stuck in ``pg_sleep`` returns at once, storing nothing), and ``statement_timeout`` bounds what
nobody cancels."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import trio
from pg_helpers import admin, make_inserts_sleep, stop_sleeping, until_a_statement_waits

from trio_agent.persistence import PostgresPersistence, SessionWriteError
from trio_agent.runtime import Context, open_runtime
from trio_agent.session import SessionStore
from trio_agent.testing import append_tool_turn

#: Far above what a cancellation takes, far below the sleeps it interrupts.
GUARD = 60.0


@contextlib.asynccontextmanager
async def open_store(dsn: str, statement_timeout: float = 600.0) -> AsyncIterator[Context]:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        config = PostgresPersistence.Config(dsn=dsn, statement_timeout=statement_timeout)
        await ctx.plugin(PostgresPersistence, config)
        yield ctx


def stored_count(dsn: str, session_id: str) -> int:
    with admin(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM trio_agent_events WHERE session_id = %s", (session_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_cancelled_flush_stops_the_statement_and_stores_nothing(dsn: str) -> None:
    async with open_store(dsn) as ctx:
        sessions = ctx.require(SessionStore)
        await ctx.session_persistence.acquire("slow")
        session = sessions.create("slow")
        append_tool_turn(session)
        await sessions.flush(session)
        first = len(session.events)
        make_inserts_sleep(dsn)
        append_tool_turn(session)
        with trio.fail_after(GUARD):
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(sessions.flush, session)
                    await until_a_statement_waits(dsn, "PgSleep")
                    scope.cancel()
            assert scope.cancelled_caught
        assert stored_count(dsn, "slow") == first
        stop_sleeping(dsn)
        # The books are intact: the next flush writes the rest, once.
        await sessions.flush(session)
        stored = await ctx.session_persistence.load("slow")
        assert [e.seq for e in stored.events] == list(range(len(session.events)))


#: Short enough to keep the test quick, long enough that no ordinary statement on a loaded CI
#: machine (a lease taken, a commit's fsync) hits it: only the ten-minute sleep does.
SHORT_TIMEOUT = 2.0


async def test_a_statement_past_the_timeout_fails_the_flush_and_is_retried(dsn: str) -> None:
    async with open_store(dsn, statement_timeout=SHORT_TIMEOUT) as ctx:
        sessions = ctx.require(SessionStore)
        session = sessions.create("timeout")
        append_tool_turn(session)
        make_inserts_sleep(dsn)
        with trio.fail_after(GUARD), pytest.raises(SessionWriteError, match="statement_timeout"):
            await sessions.flush(session)
        assert not await ctx.session_persistence.exists("timeout")
        stop_sleeping(dsn)
        await sessions.flush(session)
        assert stored_count(dsn, "timeout") == len(session.events)


async def test_a_cancelled_read_returns_at_once(dsn: str) -> None:
    async with open_store(dsn) as ctx:
        sessions = ctx.require(SessionStore)
        session = sessions.create("locked")
        append_tool_turn(session)
        await sessions.flush(session)
        sessions.detach(session)
        with admin(dsn) as blocker:
            blocker.execute("BEGIN")
            blocker.execute("LOCK TABLE trio_agent_sessions IN ACCESS EXCLUSIVE MODE")
            with trio.fail_after(GUARD):
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(ctx.session_persistence.load, "locked")
                        await until_a_statement_waits(dsn, "relation")
                        scope.cancel()
                assert scope.cancelled_caught
            blocker.execute("ROLLBACK")
        stored = await ctx.session_persistence.load("locked")
        assert len(stored.events) == len(session.events)


async def test_a_cancelled_acquire_leaves_no_lease_behind(dsn: str) -> None:
    async with open_store(dsn) as a:
        await a.session_persistence.acquire("warm-up")
        with admin(dsn) as blocker:
            blocker.execute("BEGIN")
            blocker.execute("LOCK TABLE trio_agent_leases IN ACCESS EXCLUSIVE MODE")
            with trio.fail_after(GUARD):
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(a.session_persistence.acquire, "contested")
                        await until_a_statement_waits(dsn, "relation")
                        scope.cancel()
                assert scope.cancelled_caught
            blocker.execute("ROLLBACK")
        async with open_store(dsn) as b:
            await b.session_persistence.acquire("contested")  # nobody holds it
