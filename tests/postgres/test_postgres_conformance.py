"""The shared backend conformance kit (trio_agent.testing.BackendConformance) on PostgreSQL:
one fresh schema per test directory, so a second backend on the same directory (a restart,
another process) sees the same logs."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from pg_helpers import admin, schema_dsn, schema_for

from trio_agent.persistence import Backend, PostgresBackend
from trio_agent.session import SessionEvent
from trio_agent.testing import BackendConformance


class TestPostgres(BackendConformance):
    def make_backend(self, root: Path) -> Backend:
        return PostgresBackend(schema_dsn(schema_for(root)))

    async def change_behind_the_writer(
        self, root: Path, session_id: str, event: SessionEvent
    ) -> None:
        # The backend's fence refuses an unclaimed write while a worker holds the session
        # (SessionBusyError; the kit checks that too), so the intruder is a program that
        # bypasses trio-agent: plain SQL, one transaction, the way the backend would append.
        dsn = schema_dsn(schema_for(root))

        def append() -> None:
            with admin(dsn) as conn, conn.transaction():
                conn.execute(
                    "UPDATE trio_agent_sessions SET event_count = event_count + 1, "
                    "updated_at = %s WHERE id = %s",
                    (event.time, session_id),
                )
                conn.execute(
                    "INSERT INTO trio_agent_events (session_id, seq, type, time, data) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (session_id, event.seq, event.type, event.time, json.dumps(event.data)),
                )

        await trio.to_thread.run_sync(append)
