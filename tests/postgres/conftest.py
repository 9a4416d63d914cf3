"""Fixtures of the PostgreSQL tests: a DSN on a schema of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest
from pg_helpers import schema_dsn, schema_for


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    """The test server's DSN, on a fresh schema for this test."""
    return schema_dsn(schema_for(tmp_path))
