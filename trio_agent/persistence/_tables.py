"""What the table backends (SQLite, PostgreSQL) share: one row per session holding the header as
JSON text, one row per event, and the same queries over them.

Both keep a session's header in a ``header`` column and its events' ``data`` in a ``data``
column, as the JSON text the JSONL backend writes (:func:`~trio_agent.persistence._format.encode_json`);
:func:`decode_column` reads such a column back, :func:`infos_query` and :func:`infos_from_rows`
make ``infos()`` (the JSONL backend folds its files instead).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import attrs

from ..ids import SessionId
from ._errors import PersistenceError, SessionCorruptError
from ._format import InfoBuilder, decode_json, header_from_json, title_of
from ._types import SessionInfo

__all__ = ["decode_column", "infos_from_rows", "infos_query"]

logger = logging.getLogger("trio_agent.persistence")


def decode_column(text: object, *, session_id: str, what: str, place: str, path: str) -> object:
    """The JSON value of a stored column (``what``: "header", "event 3", ...).

    ``place`` names the store in the message ("session database /x.db", "session store
    postgresql://..."), ``path`` becomes the error's ``path``.

    Raises:
        SessionCorruptError: the column is not JSON text.
    """
    try:
        if type(text) is not str:
            raise ValueError(f"found {type(text).__name__}, expected JSON text")
        return decode_json(text)
    except ValueError as exc:
        raise SessionCorruptError(
            f"{place}, session {session_id!r}: the {what} is not valid JSON ({exc}); restore "
            "the database from a backup",
            path=path,
        ) from None


def infos_query(sessions: str, events: str) -> str:
    """The query whose rows :func:`infos_from_rows` folds, over the ``sessions`` table (``id``,
    ``header``, ``updated_at``) and the ``events`` table (``session_id``, ``seq``, ``type``,
    ``data``): per session its id, header, update time, ``turn/start`` count and first
    ``user/message`` data."""
    return f"""SELECT s.id, s.header, s.updated_at,
            (SELECT count(*) FROM {events} e
                WHERE e.session_id = s.id AND e.type = 'turn/start'),
            (SELECT data FROM {events} e
                WHERE e.session_id = s.id AND e.type = 'user/message'
                ORDER BY e.seq LIMIT 1)
        FROM {sessions} s"""


def infos_from_rows(rows: Iterable[Any], *, place: str, path: str) -> list[SessionInfo]:
    """A :class:`SessionInfo` per row of :func:`infos_query`; a session whose header or first
    prompt cannot be read is skipped with a warning naming it and ``path``."""
    infos = []
    for sid, head, updated_at, turns, prompt in rows:
        try:
            header = header_from_json(
                decode_column(head, session_id=sid, what="header", place=place, path=path),
                path=path,
                line=None,
                session_id=SessionId(sid),
            )
            title = (
                None
                if prompt is None
                else title_of(
                    decode_column(prompt, session_id=sid, what="prompt", place=place, path=path)
                )
            )
        except PersistenceError as exc:
            logger.warning("skipping unreadable session %r in %s: %s", sid, path, exc)
            continue
        info = InfoBuilder(header).info()
        infos.append(attrs.evolve(info, updated_at=updated_at, turns=int(turns), title=title))
    return infos
