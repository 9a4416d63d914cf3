"""One writer per session (the file backends' locks) and never writing over what is not ours
(JSONL tamper checks, torn tails cut only under the claim)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from persistence_helpers import JSONL, SQLITE, open_store, plain

from trio_agent.persistence import SessionBusyError, SessionTamperedError
from trio_agent.session import repair_events
from trio_agent.testing import append_tool_turn, open_test_harness, text, tool_call
from trio_agent.tools import ToolCallContext, tool


def log_path(root: Path, session_id: str) -> Path:
    return root / "sessions" / f"{session_id}.jsonl"


def holder_path(root: Path, session_id: str) -> Path:
    return root / "sessions" / f".{session_id}.holder"


def locked_elsewhere(path: Path) -> bool:
    """Whether another open file description holds ``path``'s flock."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


async def stored_log(root: Path) -> list[Any]:
    async with open_store(JSONL, root) as ctx:
        return plain((await ctx.session_persistence.load("s1")).events)


# --- the JSONL lock -------------------------------------------------------------------------


async def test_the_lock_is_on_the_log_itself_and_names_its_holder(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")
    async with open_store(JSONL, tmp_path) as ctx:
        await ctx.session_persistence.acquire("s1")  # no log yet: nothing is made for it
        assert not (tmp_path / "sessions").exists()
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)  # the first write creates the log, locked
        assert locked_elsewhere(path)
        note = json.loads(holder_path(tmp_path, "s1").read_text())
        assert note == {"pid": os.getpid(), "host": socket.gethostname()}
        async with open_store(JSONL, tmp_path) as other:
            with pytest.raises(SessionBusyError) as caught:
                await other.session_persistence.acquire("s1")
        error = caught.value
        assert (error.session_id, error.pid, error.host) == (
            "s1",
            os.getpid(),
            socket.gethostname(),
        )
        assert f"(pid {os.getpid()})" in str(error) and str(path) in str(error)
        ctx.sessions.detach(session)
    # Released after the final write: the lock is free and the note is gone.
    assert not locked_elsewhere(path)
    assert sorted(p.name for p in (tmp_path / "sessions").iterdir()) == ["s1.jsonl"]


async def test_a_missing_holder_note_still_reports_busy(tmp_path: Path) -> None:
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        holder_path(tmp_path, "s1").write_text("not json")
        async with open_store(JSONL, tmp_path) as other:
            with pytest.raises(SessionBusyError, match="open in another process") as caught:
                await other.session_persistence.acquire("s1")
        assert (caught.value.pid, caught.value.host) == (None, None)


async def test_a_note_written_just_after_the_lock_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The holder writes its note just after it takes the lock: an opener that comes between
    # finds no note, pauses, and then names the holder (the CI flake of the two-writer test).
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        note = holder_path(tmp_path, "s1").read_bytes()
        holder_path(tmp_path, "s1").unlink()
        pauses: list[float] = []

        def the_holder_writes_its_note(seconds: float) -> None:
            pauses.append(seconds)
            holder_path(tmp_path, "s1").write_bytes(note)

        monkeypatch.setattr(time, "sleep", the_holder_writes_its_note)
        async with open_store(JSONL, tmp_path) as other:
            with pytest.raises(SessionBusyError) as caught:
                await other.session_persistence.acquire("s1")
        assert caught.value.pid == os.getpid() and len(pauses) == 1


async def test_a_dead_processs_stale_note_is_not_named(tmp_path: Path) -> None:
    dead = await trio.run_process(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_stdout=True
    )
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        holder_path(tmp_path, "s1").write_text(json.dumps({"pid": int(dead.stdout), "host": None}))
        async with open_store(JSONL, tmp_path) as other:
            with pytest.raises(SessionBusyError, match="open in another process ") as caught:
                await other.session_persistence.acquire("s1")
        assert caught.value.pid is None


async def test_a_log_replaced_before_the_lock_is_taken_is_locked_as_it_is_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log_path(tmp_path, "s1")
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        ctx.sessions.detach(session)
    real_flock = fcntl.flock
    swapped: list[int] = []

    def flock_after_a_swap(fd: int, operation: int) -> None:
        if not swapped:  # someone renames another copy over the log between open and lock
            swapped.append(fd)
            copy = path.with_name("copy")
            copy.write_bytes(path.read_bytes())
            os.replace(copy, path)
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_swap)
    async with open_store(JSONL, tmp_path) as ctx:
        await ctx.session_persistence.acquire("s1")
        monkeypatch.setattr(fcntl, "flock", real_flock)
        assert swapped and locked_elsewhere(path)  # the file the name holds now


# --- tampering ------------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["replaced", "truncated", "appended", "torn"])
async def test_a_log_changed_under_a_live_session_is_never_written_over(
    tmp_path: Path, change: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = log_path(tmp_path, "s1")
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        written = len(session.events)
        original = path.read_bytes()
        if change == "replaced":  # the same bytes in another file
            copy = path.with_name("copy")
            copy.write_bytes(original)
            os.replace(copy, path)
        elif change == "truncated":
            os.truncate(path, len(original) - 10)
        elif change == "appended":
            with path.open("ab") as file:
                file.write(b'{"seq":12,"type":"plugin/theirs","time":1.0,"data":{}}\n')
        else:  # what looks like a torn tail is someone else's too while the session is live
            with path.open("ab") as file:
                file.write(b'{"seq":12,"type":"plu')
        theirs = path.read_bytes()
        append_tool_turn(session, prompt="mine")
        with caplog.at_level(logging.ERROR), pytest.raises(SessionTamperedError) as caught:
            await ctx.sessions.flush(session)
        assert (caught.value.session_id, caught.value.path) == ("s1", str(path))
        unwritten = len(session.events) - written
        assert f"its {unwritten} unwritten events (seq {written}-{len(session.events) - 1})" in (
            caplog.text
        )
        assert path.read_bytes() == theirs  # nothing truncated, nothing appended
        assert session.events[-1].type == "turn/end"  # our events are kept in memory
        with pytest.raises(SessionTamperedError, match=f"{unwritten} events are kept"):
            await ctx.sessions.flush(session)
        ctx.sessions.detach(session)
    assert path.read_bytes() == theirs
    assert "detached with" in caplog.text


async def test_the_loop_ends_the_turn_error_when_its_log_is_changed(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")

    @tool
    async def meddle(*, call: ToolCallContext) -> str:
        """Append to the session's own log file, as another program might."""
        with path.open("ab") as file:
            file.write(b'{"seq":99,"type":"plugin/theirs","time":1.0,"data":{}}\n')
        return "meddled"

    async with open_test_harness(
        [tool_call("c1", "meddle"), text("never")],
        tools=[meddle],
        persistence=JSONL.plugin,
        persistence_config=JSONL.config(tmp_path),
    ) as h:
        errors: list[BaseException] = []
        h.ctx.on("agent/error", lambda event: errors.append(event.error))
        handle = await h.ctx.agents.create(agent_id="a", session_id="s1")
        agent = handle.agent
        agent.send("go")
        await agent.wait_idle()
        theirs = path.read_bytes()
        # The step-end flush found the change: the turn ends error, the model is not called
        # again, and the turn-end flush refuses too.
        assert isinstance(errors[0], SessionTamperedError)
        assert all(isinstance(e, SessionTamperedError) for e in errors)
        assert len(h.model.requests) == 1
        assert agent.session.events[-1].data["reason"] == "error"
        await handle.aclose()
    assert path.read_bytes() == theirs


# --- torn tails -----------------------------------------------------------------------------


async def test_resume_cuts_a_torn_tail_under_the_claim_and_only_then(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        ctx.sessions.detach(session)
    intact = path.read_bytes()
    with path.open("ab") as file:
        file.write(b'{"seq":12,"type":"tool/ca')
    assert await stored_log(tmp_path)  # reading leaves the tail alone
    assert path.read_bytes() != intact
    async with open_test_harness(
        [text("again")], persistence=JSONL.plugin, persistence_config=JSONL.config(tmp_path)
    ) as h:
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="s1")
        assert path.read_bytes() == intact  # cut at the claim, before anything is written
        handle.agent.send("go on")
        await handle.agent.wait_idle()
        await handle.aclose()
    async with open_store(JSONL, tmp_path) as ctx:
        stored = await ctx.session_persistence.load("s1")
    assert repair_events(stored.events) == [] and stored.events[-1].type == "turn/end"
    assert path.read_bytes().startswith(intact)


# --- SQLite ---------------------------------------------------------------------------------


async def test_sqlite_locks_a_file_beside_the_database(tmp_path: Path) -> None:
    database = tmp_path / "db" / "sessions.sqlite3"
    lock = database.with_name("sessions.sqlite3.s1.lock")
    async with open_store(SQLITE, tmp_path) as ctx:
        await ctx.session_persistence.acquire("s1")
        assert locked_elsewhere(lock)
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        async with open_store(SQLITE, tmp_path) as other:
            with pytest.raises(SessionBusyError, match=f"pid {os.getpid()}") as caught:
                await other.session_persistence.acquire("s1")
            assert caught.value.pid == os.getpid()
            await other.session_persistence.acquire("s2")
        await ctx.session_persistence.release("s1")
        assert not lock.exists()  # removed, still locked, when released
    assert sorted(p.name for p in database.parent.iterdir()) == []


async def test_sqlite_never_writes_over_another_writers_rows(tmp_path: Path) -> None:
    database = tmp_path / "db" / "sessions.sqlite3"
    async with open_store(SQLITE, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        written = plain(session.events)
        # Another program appends a row to the live session, ignoring the lock.
        db = sqlite3.connect(database)
        with db:
            db.execute(
                "INSERT INTO events VALUES ('s1', ?, 'plugin/theirs', 1.0, '{}')",
                (len(session.events),),
            )
        db.close()
        append_tool_turn(session, prompt="mine")
        with pytest.raises(SessionTamperedError, match="another program changed it"):
            await ctx.sessions.flush(session)
        async with open_store(SQLITE, tmp_path) as reader:
            stored = plain((await reader.session_persistence.load("s1")).events)
        assert stored[:-1] == written and stored[-1][1] == "plugin/theirs"
        ctx.sessions.detach(session)
