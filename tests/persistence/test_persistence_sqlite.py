"""SQLite specifics: schema, pragmas, one row per event, transactions, refusing foreign files."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from persistence_helpers import SQLITE, SQLITE_THREADED, open_store, plain

from trio_agent.persistence import (
    PersistenceError,
    SessionCorruptError,
    SessionFormatError,
    SessionWriteError,
    SqlitePersistence,
)
from trio_agent.persistence._tables import infos_query
from trio_agent.testing import append_tool_turn


def db_path(root: Path) -> Path:
    return root / "db" / "sessions.sqlite3"


async def make_db(root: Path) -> list[Any]:
    async with open_store(SQLITE, root) as ctx:
        session = ctx.sessions.create("s1", meta={"k": "v"})
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        return plain(session.events)


async def test_schema_rows_and_pragmas(tmp_path: Path) -> None:
    events = await make_db(tmp_path)
    path = db_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        (sid, header, created_at, updated_at), *rest = db.execute(
            "SELECT id, header, created_at, updated_at FROM sessions"
        )
        assert rest == []
        head = json.loads(header)
        assert sid == "s1" and head["format"] == "trio-agent-session" and head["meta"] == {"k": "v"}
        assert created_at == head["created_at"] and updated_at == events[-1][2]
        rows = db.execute(
            "SELECT seq, type, time, data FROM events WHERE session_id = 's1' ORDER BY seq"
        ).fetchall()
    db.close()
    assert [(s, t, ts, json.loads(d)) for s, t, ts, d in rows] == events


def index_names(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    return {name for (name,) in rows}


async def test_only_turn_starts_are_indexed_and_listing_reads_that_index(tmp_path: Path) -> None:
    await make_db(tmp_path)
    db = sqlite3.connect(db_path(tmp_path))
    try:
        # An index over every event's type put each commit's rows in one index page per type.
        assert index_names(db) == {"events_turn_starts"}
        plan = db.execute("EXPLAIN QUERY PLAN " + infos_query("sessions", "events")).fetchall()
    finally:
        db.close()
    assert any("events_turn_starts" in str(row) for row in plan), plan


async def test_an_earlier_builds_index_is_replaced_at_open_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    events = await make_db(tmp_path)
    with sqlite3.connect(db_path(tmp_path)) as db:
        db.execute("DROP INDEX events_turn_starts")
        db.execute("CREATE INDEX events_by_type ON events (session_id, type, seq)")
    db.close()
    async with open_store(SQLITE, tmp_path) as ctx:
        (info,) = await ctx.session_persistence.list()
        stored = await ctx.session_persistence.load("s1")
    assert info.turns == 2 and plain(stored.events) == events
    db = sqlite3.connect(db_path(tmp_path))
    try:
        assert index_names(db) == {"events_turn_starts"}
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    finally:
        db.close()


async def test_reads_never_create_the_database(tmp_path: Path) -> None:
    async with open_store(SQLITE, tmp_path) as ctx:
        p = ctx.session_persistence
        assert await p.list() == ()
        assert not await p.exists("s1")
        assert p.path == str(db_path(tmp_path))
    assert not db_path(tmp_path).parent.exists()


async def test_a_failed_transaction_stores_nothing(tmp_path: Path) -> None:
    async with open_store(SQLITE, tmp_path) as ctx:
        p = ctx.session_persistence
        other = ctx.sessions.create("other")  # creates the database
        append_tool_turn(other)
        await ctx.sessions.flush(other)
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        session.append("plugin/x", {"n": 1})
        # The last event row of the transaction is refused, after the session row and the
        # other events went in.
        with sqlite3.connect(db_path(tmp_path)) as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.type = 'plugin/x' "
                "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )
        db.close()
        with pytest.raises(SessionWriteError, match="refused by a trigger"):
            await ctx.sessions.flush(session)
        assert not await p.exists("s1")  # the session row was rolled back with the events
        with sqlite3.connect(db_path(tmp_path)) as db:
            db.execute("DROP TRIGGER refuse")
        db.close()
        await ctx.sessions.flush(session)
        assert plain((await p.load("s1")).events) == plain(session.events)


async def test_a_cancel_while_the_worker_thread_waits_for_the_database_waits_for_it(
    tmp_path: Path,
) -> None:
    async with open_store(SQLITE_THREADED, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        append_tool_turn(session)
        # Another connection holds the write lock: the backend's thread waits for it.
        other = sqlite3.connect(db_path(tmp_path), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        finished = trio.Event()
        scope = trio.CancelScope()

        async def flush() -> None:
            with scope:
                await ctx.sessions.flush(session)
            finished.set()

        try:
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(flush)
                    await trio.testing.wait_all_tasks_blocked()
                    scope.cancel()
                    await trio.testing.wait_all_tasks_blocked()
                    assert not finished.is_set()  # it waits for its thread despite the cancel
                    other.execute("COMMIT")
        finally:
            other.close()
        assert scope.cancel_called
        stored = (await ctx.session_persistence.load("s1")).events
        assert plain(stored) == plain(session.events)
    db = sqlite3.connect(db_path(tmp_path))
    rows = db.execute("SELECT COUNT(*) FROM events").fetchone()
    db.close()
    assert rows == (len(session.events),)  # written once


async def test_another_schema_version_is_refused(tmp_path: Path) -> None:
    await make_db(tmp_path)
    with sqlite3.connect(db_path(tmp_path)) as db:
        db.execute("PRAGMA user_version = 7")
    db.close()
    async with open_store(SQLITE, tmp_path) as ctx:
        with pytest.raises(SessionFormatError, match="schema version 7") as info:
            await ctx.session_persistence.load("s1")
    assert info.value.found == 7 and info.value.supported == (1,)


async def test_a_foreign_database_is_refused(tmp_path: Path) -> None:
    db_path(tmp_path).parent.mkdir()
    with sqlite3.connect(db_path(tmp_path)) as db:
        db.execute("CREATE TABLE mine (x)")
    db.close()
    async with open_store(SQLITE, tmp_path) as ctx:
        with pytest.raises(SessionFormatError, match="other tables"):
            await ctx.session_persistence.list()


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    db_path(tmp_path).parent.mkdir()
    db_path(tmp_path).write_bytes(b"this is not a database" * 100)
    async with open_store(SQLITE, tmp_path) as ctx:
        with pytest.raises(PersistenceError, match="is it an SQLite database"):
            await ctx.session_persistence.exists("s1")


async def test_damaged_rows_are_corrupt(tmp_path: Path) -> None:
    await make_db(tmp_path)
    with sqlite3.connect(db_path(tmp_path)) as db:
        db.execute("DELETE FROM events WHERE seq = 3")
    db.close()
    async with open_store(SQLITE, tmp_path) as ctx:
        with pytest.raises(SessionCorruptError, match="seq is 4, expected 3") as info:
            await ctx.session_persistence.load("s1")
    assert info.value.path == str(db_path(tmp_path)) and info.value.line is None
    with sqlite3.connect(db_path(tmp_path)) as db:
        db.execute("UPDATE events SET data = '{oops' WHERE seq = 1")
    db.close()
    async with open_store(SQLITE, tmp_path) as ctx:
        with pytest.raises(SessionCorruptError, match="event 1 is not valid JSON"):
            await ctx.session_persistence.load("s1")


async def test_config_default() -> None:
    assert SqlitePersistence.Config().path == ".trio-agent/sessions.sqlite3"
