"""The conformance kit (trio_agent.testing.BackendConformance) on the jsonl, sqlite and memory
backends, and a backend written against the public protocol only."""

from __future__ import annotations

import os
from pathlib import Path

from protocol_backend import DictBackend, DictStorage

from trio_agent.persistence import (
    Backend,
    JsonlBackend,
    MemoryBackend,
    MemoryStorage,
    SqliteBackend,
)
from trio_agent.testing import BackendConformance, check_backend


class TestJsonl(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return JsonlBackend(str(root / "sessions"))


class TestSqlite(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return SqliteBackend(str(root / "db" / "sessions.sqlite3"))


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
