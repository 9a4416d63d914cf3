"""The conformance kit (trio_agent.testing.BackendConformance) on the jsonl, sqlite and memory
backends, and a backend written against the public protocol only."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from persistence_helpers import (
    JSONL,
    JSONL_THREADED,
    SQLITE,
    SQLITE_THREADED,
    BackendKind,
    open_store,
)
from protocol_backend import DictBackend, DictStorage

from trio_agent.persistence import (
    Backend,
    JsonlBackend,
    MemoryBackend,
    MemoryStorage,
    SqliteBackend,
)
from trio_agent.testing import BackendConformance, append_tool_turn, check_backend


class TestJsonl(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return JsonlBackend(str(root / "sessions"))


class TestJsonlThreaded(BackendConformance):
    """Every write in a worker thread, as when the run loop is busy."""

    def make_backend(self, root: Path) -> Backend:
        return JsonlBackend(str(root / "sessions"), inline_when_idle=False)


class TestSqlite(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return SqliteBackend(str(root / "db" / "sessions.sqlite3"))


class TestSqliteThreaded(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return SqliteBackend(str(root / "db" / "sessions.sqlite3"), inline_when_idle=False)


class TestMemory(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        # One storage per test directory: a second backend on the same root sees the first's logs.
        return MemoryBackend(STORAGES.setdefault(root, MemoryStorage()))


class TestDictBackend(BackendConformance):
    """The backend of docs/persistence.md, built on public names only, passes the kit too."""

    def make_backend(self, root: Path) -> Backend:
        return DictBackend(DICT_STORAGES.setdefault(root, DictStorage()))


STORAGES: dict[Path, MemoryStorage] = {}
DICT_STORAGES: dict[Path, DictStorage] = {}


async def test_check_backend_runs_the_kit_without_pytest(tmp_path: Path) -> None:
    storages: dict[Path, MemoryStorage] = {}
    await check_backend(lambda root: MemoryBackend(storages.setdefault(root, MemoryStorage())))
    await check_backend(
        lambda root: MemoryBackend(storages.setdefault(root, MemoryStorage())), tmp_path
    )
    assert sorted(os.listdir(tmp_path)) == sorted(
        name for name in dir(BackendConformance) if name.startswith("test_")
    )


async def test_check_backend_names_the_failing_test(tmp_path: Path) -> None:
    def forgetful(root: Path) -> Backend:
        return MemoryBackend()  # a fresh storage each time: a restart finds nothing

    try:
        await check_backend(forgetful, tmp_path)
    except Exception as exc:
        notes = getattr(exc, "__notes__", [])
        assert any(note.startswith("in the backend conformance test test_") for note in notes)
    else:
        raise AssertionError("a backend that forgets everything passed the kit")


@pytest.mark.parametrize(
    ("kind", "backend", "method", "inline_when_idle"),
    [
        (JSONL, JsonlBackend, "_append", True),
        (JSONL_THREADED, JsonlBackend, "_append", False),
        (SQLITE, SqliteBackend, "_write", True),
        (SQLITE_THREADED, SqliteBackend, "_write", False),
    ],
    ids=lambda value: getattr(value, "name", None),
)
async def test_an_idle_loop_writes_in_its_own_thread_unless_told_not_to(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: BackendKind,
    backend: type[Backend],
    method: str,
    inline_when_idle: bool,
) -> None:
    """The write of a flush runs in the trio thread when nothing else is ready to run (two
    thread wake-ups saved, #13), in a worker thread with ``inline_when_idle=False``. (A JSONL
    log is created in a worker thread either way, by ``_create``.)"""
    threads: list[int] = []
    write = getattr(backend, method)

    def recorded(self: Backend, *args: Any) -> Any:
        threads.append(threading.get_ident())
        return write(self, *args)

    monkeypatch.setattr(backend, method, recorded)
    async with open_store(kind, tmp_path) as ctx:
        session = ctx.sessions.create("s1")
        for _ in range(3):
            append_tool_turn(session)
            await ctx.sessions.flush(session)
    assert threads
    assert all((ident == threading.get_ident()) == inline_when_idle for ident in threads)
