"""Fixtures for the persistence tests: every backend, one test directory."""

from __future__ import annotations

import pytest
from persistence_helpers import BACKENDS, BackendKind


@pytest.fixture(params=BACKENDS, ids=[kind.name for kind in BACKENDS])
def backend(request: pytest.FixtureRequest) -> BackendKind:
    """Each backend in turn (jsonl, sqlite, memory)."""
    kind: BackendKind = request.param
    return kind
