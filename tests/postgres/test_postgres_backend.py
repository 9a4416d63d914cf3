"""The PostgreSQL backend's own storage: rows, the versioned schema, and the DSN's secret."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg
import pytest
import trio
from pg_helpers import admin
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from trio_agent.ids import SessionId
from trio_agent.persistence import (
    PersistenceError,
    PostgresBackend,
    PostgresPersistence,
    SessionFormatError,
)
from trio_agent.runtime import Context, open_runtime
from trio_agent.session import Session, SessionStore
from trio_agent.testing import append_tool_turn


@contextlib.asynccontextmanager
async def open_store(dsn: str) -> AsyncIterator[Context]:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await ctx.plugin(PostgresPersistence, PostgresPersistence.Config(dsn=dsn))
        yield ctx


def password_of(dsn: str) -> str:
    password = conninfo_to_dict(dsn).get("password")
    assert isinstance(password, str) and password
    return password


async def store_tool_turn(dsn: str, session_id: str) -> Session:
    """A session ``session_id`` holding one tool turn, flushed to the database."""
    async with open_store(dsn) as ctx:
        session = ctx.require(SessionStore).create(session_id)
        append_tool_turn(session)
        await ctx.require(SessionStore).flush(session)
    return session


async def test_each_event_is_one_row_keyed_by_session_and_seq(dsn: str) -> None:
    session = await store_tool_turn(dsn, "rows")
    with admin(dsn) as conn:
        rows = conn.execute(
            "SELECT seq, type FROM trio_agent_events WHERE session_id = 'rows' ORDER BY seq"
        ).fetchall()
        assert rows == [(e.seq, e.type) for e in session.events]
        assert conn.execute("SELECT version FROM trio_agent_schema").fetchall() == [(1,)]
        count = conn.execute(
            "SELECT event_count FROM trio_agent_sessions WHERE id = 'rows'"
        ).fetchone()
        assert count == (len(session.events),)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO trio_agent_events (session_id, seq, type, time, data) "
                "VALUES ('rows', 0, 'x', 0, '{}')"
            )


def event_indexes(conn: psycopg.Connection[TupleRow]) -> set[str]:
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
        "AND tablename = 'trio_agent_events' AND indexname <> 'trio_agent_events_pkey'"
    )
    return {name for (name,) in rows}


async def test_only_turn_starts_are_indexed_and_an_earlier_index_is_left_alone(dsn: str) -> None:
    await store_tool_turn(dsn, "indexed")
    with admin(dsn) as conn:
        # An index over every event's type put each commit's rows in one index page per type.
        assert event_indexes(conn) == {"trio_agent_events_turn_starts"}
        # An earlier build's tables: replacing their index would block writers while it builds.
        conn.execute("DROP INDEX trio_agent_events_turn_starts")
        conn.execute(
            "CREATE INDEX trio_agent_events_by_type ON trio_agent_events (session_id, type, seq)"
        )
    async with open_store(dsn) as ctx:
        (info,) = await ctx.session_persistence.list()
    assert info.turns == 1
    with admin(dsn) as conn:
        assert event_indexes(conn) == {"trio_agent_events_by_type"}


async def test_a_newer_schema_version_is_refused_and_left_alone(dsn: str) -> None:
    async with open_store(dsn):
        pass
    with admin(dsn) as conn:
        conn.execute("UPDATE trio_agent_schema SET version = 2")
    with pytest.raises(SessionFormatError, match="newer trio-agent: upgrade") as caught:
        async with open_store(dsn):
            pass
    assert caught.value.found == 2 and caught.value.supported == (1,)
    # The backend refuses it on every call, and changes nothing.
    backend = PostgresBackend(dsn)
    try:
        with pytest.raises(SessionFormatError):
            await backend.exists(SessionId("x"))
    finally:
        await backend.aclose()
    with admin(dsn) as conn:
        assert conn.execute("SELECT version FROM trio_agent_schema").fetchall() == [(2,)]


async def test_foreign_tables_of_the_same_names_are_refused(dsn: str) -> None:
    with admin(dsn) as conn:
        conn.execute("CREATE TABLE trio_agent_events (x int)")
    with pytest.raises(SessionFormatError, match="schema version None"):
        async with open_store(dsn):
            pass


async def test_workers_starting_at_once_create_the_tables_once(dsn: str) -> None:
    backends = [PostgresBackend(dsn) for _ in range(4)]
    try:
        async with trio.open_nursery() as nursery:
            for backend in backends:
                nursery.start_soon(backend.open)
    finally:
        for backend in backends:
            await backend.aclose()
    with admin(dsn) as conn:
        assert conn.execute("SELECT version FROM trio_agent_schema").fetchall() == [(1,)]


async def test_the_password_is_never_shown(dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    secret = password_of(dsn)
    config = PostgresPersistence.Config(dsn=dsn)
    backend = PostgresBackend(dsn)
    try:
        assert secret not in repr(config) and "127.0.0.1" in repr(config)
        assert secret not in repr(backend) and secret not in backend.location(SessionId("s"))
        assert backend.secrets() == (secret,)
    finally:
        await backend.aclose()
    async with open_store(dsn) as ctx:
        assert ctx.require(PostgresPersistence).secrets() == (secret,)

    caplog.set_level(logging.DEBUG)
    wrong = make_conninfo(dsn, password="not-the-password-7f3a")
    with pytest.raises(PersistenceError, match="password authentication failed") as caught:
        async with open_store(wrong):
            pass
    assert "not-the-password-7f3a" not in str(caught.value)

    unreachable = make_conninfo(dsn, port="1", connect_timeout="2")
    with pytest.raises(PersistenceError, match=r"127\.0\.0\.1") as caught:
        async with open_store(unreachable):
            pass
    assert secret not in str(caught.value)

    with pytest.raises(PersistenceError, match="cannot parse the PostgreSQL DSN") as caught:
        PostgresBackend(f"host=127.0.0.1 password={secret} junk")
    assert secret not in str(caught.value)
    assert secret not in caplog.text and "not-the-password-7f3a" not in caplog.text
