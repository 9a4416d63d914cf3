"""``trio-agent send``: enqueue a prompt in a session's durable PostgreSQL inbox."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..persistence import PostgresPersistence, send_prompt
from ._agents import load_cli_config, session_id_arg
from ._errors import CliExit
from ._run import read_prompt


async def send_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``trio-agent send SESSION-ID TEXT``: store the prompt in the inbox of the PostgreSQL
    backend the config names and print its inbox id. The worker holding the session runs it,
    once; a prompt for a session nobody holds waits until a worker resumes the session.

    Nothing runs here: no model, no tools, no plugins (the config's ``plugins:`` are not
    imported), only one connection to the database.
    """
    session_id = session_id_arg(args.id, "SESSION-ID")
    text = read_prompt(args)
    config, _ = load_cli_config(args.config, import_plugins=False)
    persistence = config.persistence
    if persistence.type != "postgres" or not isinstance(
        persistence.config, PostgresPersistence.Config
    ):
        raise CliExit(
            2,
            "CONFIG",
            f"persistence type {persistence.type!r} is not shared between processes; "
            "trio-agent send needs a shared backend (persistence type postgres)",
            hint="persistence: {type: postgres, dsn: ${DATABASE_URL}} (docs/postgres.md)",
        )
    # StoredSessionNotFoundError (SESSION_NOT_FOUND, 2) and PersistenceError (PERSISTENCE, 1)
    # are classified by main(); their messages name the server, never the DSN's password.
    inbox_id = await send_prompt(
        persistence.config.dsn,
        session_id,
        text,
        connect_timeout=persistence.config.connect_timeout,
    )
    out.write(f"{inbox_id}\n")
    out.flush()
    if args.verbose:
        err.write(f"trio-agent: queued prompt {inbox_id} for session {session_id}\n")
        err.flush()
    return 0
