"""Shared helpers for the backend-specific persistence tests: the file backends' plugins and a
small runtime. (The tests every backend shares are trio_agent.testing.BackendConformance.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs

from trio_agent.persistence import JsonlPersistence, SqlitePersistence
from trio_agent.runtime import Context, Plugin, open_runtime
from trio_agent.session import SessionStore


@attrs.frozen
class BackendKind:
    """One backend plugin under test and a config pointing into a test directory."""

    name: str
    plugin: Plugin
    make_config: Callable[[Path], Any]

    def config(self, root: Path) -> Any:
        return self.make_config(root)


JSONL = BackendKind(
    "jsonl", JsonlPersistence, lambda root: JsonlPersistence.Config(path=str(root / "sessions"))
)
#: JSONL with every write in a worker thread (``inline_when_idle=False``).
JSONL_THREADED = BackendKind(
    "jsonl-threaded",
    JsonlPersistence,
    lambda root: JsonlPersistence.Config(path=str(root / "sessions"), inline_when_idle=False),
)
SQLITE = BackendKind(
    "sqlite",
    SqlitePersistence,
    lambda root: SqlitePersistence.Config(path=str(root / "db" / "sessions.sqlite3")),
)
#: SQLite with every write in a worker thread.
SQLITE_THREADED = BackendKind(
    "sqlite-threaded",
    SqlitePersistence,
    lambda root: SqlitePersistence.Config(
        path=str(root / "db" / "sessions.sqlite3"), inline_when_idle=False
    ),
)


@contextlib.asynccontextmanager
async def open_store(kind: BackendKind, root: Path) -> AsyncIterator[Context]:
    """A runtime with ``ctx.sessions`` and ``ctx.session_persistence`` (``kind``, in ``root``)."""
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        await ctx.plugin(kind.plugin, kind.config(root))
        yield ctx


def plain(events: Any) -> list[tuple[int, str, float, Any]]:
    """Events as comparable tuples ``(seq, type, time, data)``."""
    return [(e.seq, e.type, e.time, e.data) for e in events]
