"""SQLite specifics: schema, pragmas, one row per event, transactions, refusing foreign files."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from persistence_helpers import BACKENDS, open_store, write_turn

from trio_agent.persistence import (
    PersistenceError,
    SessionCorruptError,
    SessionFormatError,
    SessionWriteError,
    SqlitePersistence,
)

SQLITE = BACKENDS[1]
assert SQLITE.name == "sqlite"


def db_path(root: Path) -> Path:
    return root / "db" / "sessions.sqlite3"


def plain(events: Any) -> list[Any]:
    return [(e.seq, e.type, e.time, e.data) for e in events]


async def make_db(root: Path) -> list[Any]:
    async with open_store(SQLITE, root) as ctx:
        session = ctx.sessions.create("s1", meta={"k": "v"})
        write_turn(session)
        await ctx.sessions.flush(session)
        write_turn(session)
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


async def test_reads_never_create_the_database(tmp_path: Path) -> None:
    async with open_store(SQLITE, tmp_path) as ctx:
        p = ctx.session_persistence
        assert await p.list() == ()
        assert not await p.exists("s1")
        assert p.path == str(db_path(tmp_path))
    assert not db_path(tmp_path).parent.exists()


async def test_a_failed_transaction_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(SQLITE, tmp_path) as ctx:
        p = ctx.session_persistence
        session = ctx.sessions.create("s1")
        write_turn(session)
        session.append("plugin/x", {"n": 1})
        real = p._backend._write

        def write_with_a_duplicate(
            db: Any, header: Any, head: Any, position: Any, rows: Any
        ) -> Any:
            return real(db, header, head, position, [*rows, rows[-1]])  # violates the key

        monkeypatch.setattr(p._backend, "_write", write_with_a_duplicate)
        with pytest.raises(SessionWriteError, match="UNIQUE constraint"):
            await ctx.sessions.flush(session)
        assert not await p.exists("s1")  # the session row was rolled back with the events
        monkeypatch.undo()
        await ctx.sessions.flush(session)
        assert plain((await p.load("s1")).events) == plain(session.events)


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
