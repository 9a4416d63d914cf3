"""The tables of the PostgreSQL backend, created and versioned on first use.

Schema version 1, in the connection's current schema (the first of its ``search_path``; put
``options=-csearch_path=myschema`` in the DSN to choose another)::

    trio_agent_schema(version)                               one row: the version of the tables
    trio_agent_sessions(id PK, header, created_at, updated_at, event_count)
    trio_agent_events(session_id, seq, type, time, data, PRIMARY KEY (session_id, seq))
                      + an index over the turn starts (what ``infos()`` counts; tables
                      of earlier builds: over every event's type)
    trio_agent_leases(session_id PK, lock_key UNIQUE, generation, holder_name, holder_pid,
                      holder_host, holder_backend, acquired_at)
    trio_agent_inbox(id bigserial PK, session_id, content, enqueued_at)

``header``, ``data`` and ``content`` are JSON text, exactly as the other backends write it (a
``jsonb`` column would reorder keys and normalise numbers). ``event_count`` is the number of
stored events, checked and advanced by every append in the same transaction.

The first connection of a process checks the version under a transaction-scoped advisory lock
(so two processes creating the tables at once do not collide): no tables → create them; version
1 → use them; any other version (a newer build's) is refused with
:class:`~trio_agent.persistence.SessionFormatError`, and nothing is changed.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ._errors import PersistenceError, SessionFormatError

if TYPE_CHECKING:
    import psycopg

__all__ = ["INBOX_CHANNEL", "SCHEMA_VERSION", "advisory_key", "ensure_schema"]

#: The version of the tables this build reads and writes.
SCHEMA_VERSION = 1

#: The ``LISTEN``/``NOTIFY`` channel of the inbox; the payload is ``<schema>/<session id>``.
INBOX_CHANNEL = "trio_agent_inbox"

_TABLES = (
    "trio_agent_schema",
    "trio_agent_sessions",
    "trio_agent_events",
    "trio_agent_leases",
    "trio_agent_inbox",
)

#: Partial, as the SQLite backend's (docs/design.md, "SQLite indexes only the turn starts"): an
#: index over every event's type puts a commit's rows into one index page per type. Tables of
#: an earlier build keep their ``trio_agent_events_by_type``, which serves the same queries:
#: replacing it here would block every writer while the new index is built (docs/postgres.md
#: has the statements that replace it without blocking).
_TURN_STARTS_INDEX = (
    "CREATE INDEX trio_agent_events_turn_starts ON trio_agent_events "
    "(session_id, type, seq) WHERE type = 'turn/start'"
)

_DDL = (
    """CREATE TABLE trio_agent_schema (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        version integer NOT NULL
    )""",
    """CREATE TABLE trio_agent_sessions (
        id text PRIMARY KEY,
        header text NOT NULL,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        event_count integer NOT NULL
    )""",
    """CREATE TABLE trio_agent_events (
        session_id text NOT NULL REFERENCES trio_agent_sessions (id) ON DELETE CASCADE,
        seq integer NOT NULL,
        type text NOT NULL,
        time double precision NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    _TURN_STARTS_INDEX,
    """CREATE TABLE trio_agent_leases (
        session_id text PRIMARY KEY,
        lock_key bigint NOT NULL UNIQUE,
        generation bigint NOT NULL DEFAULT 0,
        holder_name text,
        holder_pid integer,
        holder_host text,
        holder_backend integer,
        acquired_at timestamptz
    )""",
    """CREATE TABLE trio_agent_inbox (
        id bigserial PRIMARY KEY,
        session_id text NOT NULL,
        content text NOT NULL,
        enqueued_at double precision NOT NULL
    )""",
    "CREATE INDEX trio_agent_inbox_by_session ON trio_agent_inbox (session_id, id)",
)


def advisory_key(*parts: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_lock`` from ``parts`` (BLAKE2b)."""
    digest = hashlib.blake2b(
        "\x00".join(parts).encode(), digest_size=8, person=b"trio-agent"
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def ensure_schema(conn: psycopg.Connection[Any], where: str) -> str:
    """Create the tables if the current schema has none, check their version otherwise, and
    return the schema's name. ``where`` names the database in messages.

    Raises:
        SessionFormatError: the tables have another version (or are incomplete).
        PersistenceError: the connection has no current schema to create tables in.
    """
    with conn.transaction():
        schema = conn.execute("SELECT current_schema()").fetchone()
        if schema is None or schema[0] is None:
            raise PersistenceError(
                f"{where} has no current schema to keep sessions in (the search_path names no "
                "existing schema); create the schema, or set search_path in the DSN "
                "(options=-csearch_path=NAME)"
            )
        name: str = schema[0]
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("schema", name),))
        present = {
            table
            for table in _TABLES
            if conn.execute(
                "SELECT to_regclass(quote_ident(%s) || '.' || %s)", (name, table)
            ).fetchone()
            not in (None, (None,))
        }
        if not present:
            for statement in _DDL:
                conn.execute(statement)
            conn.execute("INSERT INTO trio_agent_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            return name
        row = (
            conn.execute("SELECT max(version) FROM trio_agent_schema").fetchone()
            if "trio_agent_schema" in present
            else None
        )
        version = None if row is None else row[0]
        if version != SCHEMA_VERSION or present != set(_TABLES):
            if isinstance(version, int) and version > SCHEMA_VERSION:
                advice = "it was created by a newer trio-agent: upgrade to use it"
            elif version == SCHEMA_VERSION:
                advice = f"tables are missing ({', '.join(sorted(set(_TABLES) - present))})"
            else:
                advice = "this build cannot use it"
            raise SessionFormatError(
                f"the trio-agent tables in schema {name!r} of {where} have schema version "
                f"{version!r} (this build uses version {SCHEMA_VERSION}); {advice}, or point "
                "the DSN at another schema or database",
                path=where,
                found=version,
                supported=(SCHEMA_VERSION,),
            )
    return name
