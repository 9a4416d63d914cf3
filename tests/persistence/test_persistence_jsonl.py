"""JSONL specifics: the file format, torn tails, corruption, versions, permissions."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from persistence_helpers import JSONL, JSONL_THREADED, open_store, plain

from trio_agent.persistence import (
    FORMAT_TAG,
    JsonlPersistence,
    SessionCorruptError,
    SessionFormatError,
    SessionWriteError,
)
from trio_agent.session import repair_events
from trio_agent.testing import append_tool_turn, open_test_harness, text


def log_path(root: Path, session_id: str) -> Path:
    return root / "sessions" / f"{session_id}.jsonl"


async def make_log(root: Path, session_id: str = "s1", turns: int = 2) -> list[Any]:
    async with open_store(JSONL, root) as ctx:
        session = ctx.sessions.create(session_id, meta={"who": "test"})
        for n in range(turns):
            append_tool_turn(session, prompt=f"prompt {n + 1}")
        await ctx.sessions.flush(session)
        return [(e.seq, e.type, e.time, e.data) for e in session.events]


async def load(root: Path, session_id: str = "s1") -> Any:
    async with open_store(JSONL, root) as ctx:
        return await ctx.session_persistence.load(session_id)


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


# --- the format -------------------------------------------------------------------------------


async def test_file_layout(tmp_path: Path) -> None:
    events = await make_log(tmp_path, turns=1)
    raw = log_path(tmp_path, "s1").read_bytes()
    assert raw.endswith(b"\n")
    header, *rows = (json.loads(line) for line in raw.decode().splitlines())
    assert list(header) == [
        "format",
        "version",
        "session_id",
        "created_at",
        "cwd",
        "parent_session",
        "seed_length",
        "meta",
    ]
    assert header["format"] == FORMAT_TAG and header["version"] == 1
    assert header["session_id"] == "s1" and header["meta"] == {"who": "test"}
    assert "seq" not in header
    assert [list(row) for row in rows] == [["seq", "type", "time", "data"]] * len(events)
    assert [(r["seq"], r["type"], r["time"], r["data"]) for r in rows] == events
    # Compact: no spaces after separators.
    assert b'{"seq":0,"type":"turn/start",' in raw


async def test_directory_and_file_permissions(tmp_path: Path) -> None:
    await make_log(tmp_path)
    directory = tmp_path / "sessions"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(log_path(tmp_path, "s1").stat().st_mode) == 0o600
    assert sorted(os.listdir(directory)) == ["s1.jsonl"]  # no temporary file left behind


async def test_config_default_and_resolved_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert JsonlPersistence.Config().path == ".trio-agent/sessions"
    monkeypatch.chdir(tmp_path)
    async with open_test_harness(persistence=JsonlPersistence) as h:
        assert h.ctx.session_persistence.directory == str(tmp_path / ".trio-agent" / "sessions")
        assert not (tmp_path / ".trio-agent").exists()  # created by the first write only


# --- torn tails -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        b'{"seq":18,"type":"turn/st',  # cut mid-line, no newline
        b'{"seq":18,"type":"plugin/x","time":1.0,"data":{}}',  # whole but no newline
        b'{"seq":18,"type":"plugin/x","ti\n',  # an unparsable last line
        b"\x00\x00\x00\x00",  # zeros a crash left
        b'{"seq":18,"type":"plugin/x","time":1.0,"data":{"x":"\xe2\x98',  # cut inside UTF-8
    ],
)
async def test_a_torn_last_line_is_ignored_and_cut_off_before_the_next_append(
    tmp_path: Path, tail: bytes
) -> None:
    events = await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    intact = path.read_bytes()
    with path.open("ab") as file:
        file.write(tail)
    stored = await load(tmp_path)
    assert plain(stored.events) == events
    assert path.read_bytes() == intact + tail  # reading never writes
    # Continue the session: the next append starts where the intact part ends.
    async with open_store(JSONL, tmp_path) as ctx:
        stored = await ctx.session_persistence.load("s1")
        seed = [*stored.events, *repair_events(stored.events)]
        session = ctx.sessions.create("s1", seed=seed, header=stored.header)
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        expected = plain(session.events)
    raw = path.read_bytes()
    assert raw.startswith(intact)
    assert tail not in raw
    assert all(json.loads(line) for line in raw.decode().splitlines())
    assert plain((await load(tmp_path)).events) == expected


async def test_a_lone_header_without_newline_is_corrupt(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")
    path.parent.mkdir()
    path.write_bytes(b'{"format":"trio-agent-session","version":1')
    with pytest.raises(SessionCorruptError, match="header line is incomplete") as info:
        await load(tmp_path)
    assert info.value.line == 1 and info.value.path == str(path)


# --- corruption -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "damage", "message"),
    [
        (3, b"{not json", "does not parse"),
        (5, b"", "does not parse"),
        (4, b'{"seq":2,"type":"step/start","time":1.0,"data":{"v":NaN}}', "NaN"),
        (4, b'{"seq":9,"type":"step/start","time":1.0,"data":{}}', "seq is 9, expected 2"),
        (4, b'{"seq":2,"type":"step/start","time":1.0}', "event keys"),
        (4, b'{"seq":2,"type":"","time":1.0,"data":{}}', "type is ''"),
        (4, b'{"seq":2,"type":"x","time":"now","data":{}}', "time is 'now'"),
        (4, b'{"seq":2,"type":"x","time":1.0,"data":[]}', "data is list"),
        (4, b"[1, 2]", "expected an event object"),
    ],
)
async def test_a_damaged_line_before_the_last_is_corrupt(
    tmp_path: Path, line: int, damage: bytes, message: str
) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    lines = lines_of(path)
    lines[line - 1] = damage
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorruptError, match=message) as info:
        await load(tmp_path)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.path == str(path) and error.line == line
    assert f"{path}, line {line}" in str(error)
    assert "restore" in str(error)


async def test_a_damaged_complete_line_before_a_torn_tail_is_corrupt(tmp_path: Path) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    lines = lines_of(path)
    count = len(lines) - 1  # the last element is the empty string after the final newline
    lines[count - 1] = b"{garbage"
    path.write_bytes(b"\n".join(lines) + b'{"seq":99')
    with pytest.raises(SessionCorruptError) as info:
        await load(tmp_path)
    assert info.value.line == count


async def test_a_seq_gap_at_the_end_is_corrupt_not_torn(tmp_path: Path) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    count = len(lines_of(path)) - 1
    with path.open("ab") as file:
        file.write(b'{"seq":500,"type":"plugin/x","time":1.0,"data":{}}\n')
    with pytest.raises(SessionCorruptError, match="seq is 500") as info:
        await load(tmp_path)
    assert info.value.line == count + 1


def header_line(**changes: Any) -> bytes:
    """A valid header line of session ``s1`` with ``changes`` (a ``...`` value drops the key)."""
    header: dict[str, Any] = {
        "format": "trio-agent-session",
        "version": 1,
        "session_id": "s1",
        "created_at": 1,
        "cwd": None,
        "parent_session": None,
        "seed_length": None,
        "meta": {},
    }
    header.update(changes)
    return json.dumps({k: v for k, v in header.items() if v is not ...}).encode()


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"{nope", "header does not parse"),
        (b"[]", "expected a header object, found list"),
        (
            b'{"format":"trio-agent-session","version":1,"session_id":"s1"}',
            "header keys are wrong (missing: ['created_at', 'cwd', 'meta', 'parent_session', "
            "'seed_length'], unexpected: [])",
        ),
        (
            header_line(cwd=..., extra=1, more=2),
            "header keys are wrong (missing: ['cwd'], unexpected: ['extra', 'more'])",
        ),
        (header_line(session_id="other"), "header names session 'other'"),
        (header_line(session_id=5), "session_id is 5, expected a string;"),
        (header_line(created_at="x"), "created_at is 'x', expected epoch seconds;"),
        (header_line(created_at=True), "created_at is True, expected epoch seconds;"),
        (header_line(cwd=5), "cwd is 5, expected a string or null;"),
        (header_line(parent_session="../x"), "parent_session is '../x', expected a session id"),
        (header_line(seed_length=-1), "seed_length is -1, expected a count or null;"),
        (header_line(seed_length=2.0), "seed_length is 2.0, expected a count or null;"),
        (header_line(meta=[]), "meta is list, expected an object;"),
        (
            header_line(created_at=None, meta="m"),
            "created_at is None, expected epoch seconds; meta is str, expected an object;",
        ),
    ],
)
async def test_a_damaged_header_is_corrupt_at_line_1(
    tmp_path: Path, header: bytes, message: str
) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    lines = lines_of(path)
    lines[0] = header
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionCorruptError, match=re.escape(message)) as info:
        await load(tmp_path)
    assert info.value.line == 1


# --- versions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "advice"), [(2, "newer trio-agent"), (0, "cannot read")])
async def test_an_unknown_version_is_refused(tmp_path: Path, version: int, advice: str) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    lines = lines_of(path)
    header = json.loads(lines[0])
    header["version"] = version
    header["new_field"] = "the shape may differ too: the version is checked first"
    lines[0] = json.dumps(header).encode()
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionFormatError) as info:
        await load(tmp_path)
    error = info.value
    assert isinstance(error, ValueError)
    assert error.found == version and error.supported == (1,)
    assert f"format version {version}" in str(error) and "reads version 1" in str(error)
    assert advice in str(error) and str(path) in str(error)


async def test_a_foreign_file_is_refused_as_another_format(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")
    path.parent.mkdir()
    path.write_bytes(b'{"type":"session","version":0,"id":"s1"}\n')
    with pytest.raises(SessionFormatError, match="not a trio-agent session log") as info:
        await load(tmp_path)
    assert info.value.found is None


# --- empty and header-only files --------------------------------------------------------------


async def test_an_empty_file_is_corrupt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = log_path(tmp_path, "s1")
    path.parent.mkdir()
    path.write_bytes(b"")
    async with open_store(JSONL, tmp_path) as ctx:
        p = ctx.session_persistence
        with pytest.raises(SessionCorruptError, match="the file is empty") as info:
            await p.load("s1")
        assert info.value.line == 1 and info.value.path == str(path)
        assert await p.exists("s1")
        with caplog.at_level(logging.WARNING, logger="trio_agent.persistence"):
            assert await p.list() == ()
        assert "skipping unreadable session log" in caplog.text and str(path) in caplog.text


async def test_a_header_only_file_is_a_valid_empty_log(tmp_path: Path) -> None:
    await make_log(tmp_path)
    path = log_path(tmp_path, "s1")
    path.write_bytes(lines_of(path)[0] + b"\n")
    stored = await load(tmp_path)
    assert stored.events == ()
    assert stored.header.meta == {"who": "test"}
    async with open_test_harness(
        [text("hi")], persistence=JSONL.plugin, persistence_config=JSONL.config(tmp_path)
    ) as h:
        infos = await h.ctx.session_persistence.list()
        assert [(i.session_id, i.turns, i.title, i.updated_at) for i in infos] == [
            ("s1", 0, None, stored.header.created_at)
        ]
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="s1")
        handle.agent.send("hello")
        await handle.agent.wait_idle()
        expected = plain(handle.agent.session.events)
        await handle.aclose()
    assert expected[0][1] == "session/end-seed"
    assert plain((await load(tmp_path)).events) == expected


# --- list -------------------------------------------------------------------------------------


async def test_list_skips_foreign_files_and_reads_titles(tmp_path: Path) -> None:
    await make_log(tmp_path, "s1")
    await make_log(tmp_path, "s2", turns=3)
    directory = tmp_path / "sessions"
    (directory / "notes.txt").write_text("not a log")
    (directory / "bad name.jsonl").write_text("not an id")
    (directory / ".s3.0123.tmp").write_text("a temporary file")
    with (directory / "s1.jsonl").open("ab") as file:
        file.write(b'{"seq":18,"type":"turn/start","time":9')
    async with open_store(JSONL, tmp_path) as ctx:
        infos = await ctx.session_persistence.list()
    assert [(i.session_id, i.turns, i.title) for i in infos] == [
        ("s1", 2, "prompt 1"),
        ("s2", 3, "prompt 1"),
    ]
    stored = await load(tmp_path, "s1")
    assert infos[0].updated_at == stored.events[-1].time


# --- failed appends ---------------------------------------------------------------------------


def on_file(path: Path, fd: int) -> bool:
    """Whether ``fd`` is open on the file (or directory) at ``path``."""
    here, there = os.fstat(fd), path.stat()
    return (here.st_ino, here.st_dev) == (there.st_ino, there.st_dev)


def half_then_fail(path: Path, error: OSError, fail: list[bool]) -> Callable[[int, Any, int], int]:
    """An ``os.pwrite`` (what appends write with) that, while ``fail`` holds a value, writes
    half of what is written to ``path`` and then raises ``error`` (a full disk, a dying
    device)."""
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: Any, offset: int) -> int:
        if fail and len(data) > 10 and on_file(path, fd):
            real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise error
        return real_pwrite(fd, data, offset)

    return pwrite


async def test_a_partial_append_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log_path(tmp_path, "s1")
    fail = [True]
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        intact = path.read_bytes()
        monkeypatch.setattr(os, "pwrite", half_then_fail(path, OSError(28, "No space"), fail))
        append_tool_turn(session)
        with pytest.raises(SessionWriteError, match="No space"):
            await ctx.sessions.flush(session)
        assert path.read_bytes() == intact
        fail.clear()
        await ctx.sessions.flush(session)
        expected = plain(session.events)
    assert plain((await load(tmp_path)).events) == expected


async def test_a_partial_append_left_behind_is_cut_off_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log_path(tmp_path, "s1")
    real_ftruncate = os.ftruncate
    fail = [True]

    def failing_ftruncate(fd: int, length: int) -> None:
        if fail:
            raise OSError(5, "Input/output error")
        real_ftruncate(fd, length)

    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        size = path.stat().st_size
        monkeypatch.setattr(os, "pwrite", half_then_fail(path, OSError(5, "I/O error"), fail))
        monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
        append_tool_turn(session)
        with pytest.raises(SessionWriteError):
            await ctx.sessions.flush(session)
        assert path.stat().st_size > size  # the rollback failed: half a batch is on disk
        fail.clear()
        await ctx.sessions.flush(session)
        expected = plain(session.events)
    assert plain((await load(tmp_path)).events) == expected
    assert path.read_bytes().count(b"\n") == len(expected) + 1  # no line twice, none torn


async def test_a_log_that_shrank_under_the_writer_is_refused(tmp_path: Path) -> None:
    path = log_path(tmp_path, "s1")
    async with open_store(JSONL, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)
        path.write_bytes(lines_of(path)[0] + b"\n")
        append_tool_turn(session)
        with pytest.raises(Exception, match="another program changed it"):
            await ctx.sessions.flush(session)
        ctx.sessions.detach(session)


async def test_a_create_whose_directory_sync_fails_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir(mode=0o700)
    real_fsync = os.fsync
    fail = [True]

    def fsync(fd: int) -> None:
        if fail and on_file(directory, fd):  # the sync that makes the new log's name durable
            fail.clear()
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    async with open_store(JSONL, tmp_path) as ctx:
        monkeypatch.setattr(os, "fsync", fsync)
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        with pytest.raises(SessionWriteError):
            await ctx.sessions.flush(session)
        assert not fail  # the directory sync was the one that failed
        assert os.listdir(directory) == []  # not durable, so not there
        await ctx.sessions.flush(session)
        expected = plain(session.events)
    assert plain((await load(tmp_path)).events) == expected


async def test_a_cancel_while_the_worker_thread_syncs_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log_path(tmp_path, "s1")
    entered = trio.Event()
    release = threading.Event()
    syncs: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if on_file(path, fd):  # the append's sync, in the backend's worker thread
            syncs.append(fd)
            # The backend's worker is a bare cache thread (trio_agent._threads): name the run.
            trio.from_thread.run_sync(entered.set, trio_token=token)
            assert release.wait(timeout=30)
        real_fsync(fd)

    token = trio.lowlevel.current_trio_token()
    async with open_store(JSONL_THREADED, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        append_tool_turn(session)
        await ctx.sessions.flush(session)  # the log exists: the next write is an append
        append_tool_turn(session)
        monkeypatch.setattr(os, "fsync", fsync)
        finished = trio.Event()
        scope = trio.CancelScope()

        async def flush() -> None:
            with scope:
                await ctx.sessions.flush(session)
            finished.set()

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(flush)
                await entered.wait()
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert not finished.is_set()  # the flush waits for its thread despite the cancel
                release.set()
        assert scope.cancel_called
        # The write happened and was booked: the next flush has nothing to write or sync.
        assert plain((await load(tmp_path)).events) == plain(session.events)
        count = len(syncs)
        await ctx.sessions.flush(session)
        assert len(syncs) == count == 1


async def test_nested_directories_are_created_private(tmp_path: Path) -> None:
    async with open_test_harness(
        persistence=JsonlPersistence,
        persistence_config=JsonlPersistence.Config(path=str(tmp_path / "a" / "b")),
    ) as h:
        session = h.ctx.sessions.create("s1")
        append_tool_turn(session)
        await h.ctx.sessions.flush(session)
    for directory in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
