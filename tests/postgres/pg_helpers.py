"""Where the PostgreSQL tests find their server, and a fresh schema per test.

``scripts/with-postgres`` (which ``make test`` wraps around pytest) starts a throwaway server and
exports its DSN as ``TRIO_AGENT_TEST_POSTGRES_DSN``. Without the variable the tests skip, loudly,
only when no PostgreSQL server binary exists on the machine; with PostgreSQL installed they fail
and say how to run them.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
from pathlib import Path

import psycopg
import pytest
import trio
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow

ENV = "TRIO_AGENT_TEST_POSTGRES_DSN"


def postgres_installed() -> bool:
    """Whether this machine has PostgreSQL server binaries (the script's search)."""
    candidates = [os.environ.get("PG_BIN", ""), *glob.glob("/usr/lib/postgresql/*/bin")]
    if any(c and os.access(os.path.join(c, "initdb"), os.X_OK) for c in candidates):
        return True
    return shutil.which("initdb") is not None or shutil.which("pg_ctl") is not None


def base_dsn() -> str:
    """The test server's DSN; skips (no PostgreSQL at all) or fails (not started) without it."""
    dsn = os.environ.get(ENV)
    if dsn:
        return dsn
    if not postgres_installed():
        pytest.skip(
            "*** NO POSTGRESQL ON THIS MACHINE: the PostgreSQL backend is NOT TESTED (install "
            "postgresql-15, then run make test) ***"
        )
    pytest.fail(
        f"PostgreSQL is installed but {ENV} is not set: run the tests through make test, or "
        "scripts/with-postgres .venv/bin/python -m pytest tests/postgres",
        pytrace=False,
    )


_CREATED: set[str] = set()


def schema_dsn(schema: str) -> str:
    """The test DSN with its search_path on ``schema``, which is created if needed."""
    dsn = base_dsn()
    if schema not in _CREATED:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        _CREATED.add(schema)
    return make_conninfo(dsn, options=f"-csearch_path={schema}")


def schema_for(path: Path) -> str:
    """A schema name of its own for a test directory."""
    return "t_" + hashlib.sha1(str(path).encode()).hexdigest()[:16]


def admin(dsn: str) -> psycopg.Connection[TupleRow]:
    """A plain autocommit connection, for the test's own queries."""
    return psycopg.connect(dsn, autocommit=True)


def make_inserts_sleep(dsn: str) -> None:
    """Every event insert sleeps ten minutes in the server, until :func:`stop_sleeping`."""
    with admin(dsn) as conn:
        conn.execute(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(600); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER slow BEFORE INSERT ON trio_agent_events "
            "FOR EACH ROW EXECUTE FUNCTION slow_insert()"
        )


def stop_sleeping(dsn: str) -> None:
    with admin(dsn) as conn:
        conn.execute("DROP TRIGGER slow ON trio_agent_events")


def make_inserts_fail(dsn: str) -> None:
    """Every event insert fails in the server (a trigger raises), until :func:`stop_failing`:
    a write that fails at once, with no timeout involved."""
    with admin(dsn) as conn:
        conn.execute(
            "CREATE FUNCTION failing_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'event insert refused by the test'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER failing BEFORE INSERT ON trio_agent_events "
            "FOR EACH ROW EXECUTE FUNCTION failing_insert()"
        )


def stop_failing(dsn: str) -> None:
    with admin(dsn) as conn:
        conn.execute("DROP TRIGGER failing ON trio_agent_events")


async def until_a_statement_waits(dsn: str, event: str, *, guard: float = 60.0) -> None:
    """Wait until one of trio-agent's connections waits on ``event`` in the server (a
    ``wait_event`` such as ``PgSleep``, ``relation``, ``transactionid``). There is no event to
    await across the process boundary, so this polls ``pg_stat_activity``, under ``guard``."""
    with trio.fail_after(guard):
        while True:
            with admin(dsn) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = %s "
                    "AND application_name = 'trio-agent'",
                    (event,),
                ).fetchone()
            if row is not None and row[0]:
                return
            await trio.sleep(0.01)
