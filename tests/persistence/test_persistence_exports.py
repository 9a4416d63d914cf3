"""The public surface of trio_agent.persistence: names, finality, the error tree."""

from __future__ import annotations

import inspect

import pytest

import trio_agent.persistence as persistence
from trio_agent.errors import TrioAgentError


def test_all_is_pinned() -> None:
    assert persistence.__all__ == [
        "FORMAT_TAG",
        "SUPPORTED_VERSIONS",
        "JsonlPersistence",
        "MemoryPersistence",
        "MemoryStorage",
        "PersistenceError",
        "SessionCorruptError",
        "SessionFormatError",
        "SessionInfo",
        "SessionPersistence",
        "SessionWriteError",
        "SqlitePersistence",
        "StoredSession",
        "StoredSessionExistsError",
        "StoredSessionNotFoundError",
        "jsonl_lines",
    ]
    for name in persistence.__all__:
        assert getattr(persistence, name) is not None
        obj = getattr(persistence, name)
        if inspect.isclass(obj):
            assert obj.__doc__, name


@pytest.mark.parametrize(
    "cls",
    [
        persistence.JsonlPersistence,
        persistence.SqlitePersistence,
        persistence.MemoryPersistence,
        persistence.MemoryStorage,
    ],
)
def test_final_classes(cls: type) -> None:
    assert getattr(cls, "__final__", False)


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (persistence.PersistenceError, Exception),
        (persistence.SessionCorruptError, ValueError),
        (persistence.SessionFormatError, ValueError),
        (persistence.StoredSessionNotFoundError, LookupError),
        (persistence.StoredSessionExistsError, ValueError),
        (persistence.SessionWriteError, OSError),
    ],
)
def test_error_tree(cls: type, builtin: type) -> None:
    assert issubclass(cls, TrioAgentError) and issubclass(cls, builtin)
    assert issubclass(cls, persistence.PersistenceError)


def test_services_implement_the_protocol() -> None:
    for cls in (
        persistence.JsonlPersistence,
        persistence.SqlitePersistence,
        persistence.MemoryPersistence,
    ):
        assert cls.service_name == "session_persistence"
        for method in ("load", "list", "exists"):
            assert inspect.iscoroutinefunction(getattr(cls, method))
        assert hasattr(cls, "Config")
