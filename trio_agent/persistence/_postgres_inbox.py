"""``ctx.inbox``: prompts for a session from any process, run by whichever worker holds it.

:meth:`Inbox.enqueue` (or :func:`send_prompt`, which needs only a DSN: the ``trio-agent send``
command) stores a prompt in ``trio_agent_inbox`` and ``NOTIFY``\\ s, in one transaction. The
worker holding the session's lease hears the notification on its lease connection, reads the
session's waiting prompts in order and ``send()``\\ s them to the agent on that session. A prompt
for a session nobody holds waits in the table: acquiring the session (a resume), and an agent
appearing on a held session, look for waiting prompts too.

Each prompt runs once: its row is deleted by the very transaction that stores the prompt's
``user/message`` (or ``prompt/blocked``) event, the write of the turn that took it
(:class:`Deliveries` tells the backend which rows a batch of events consumes). A worker that
dies before that write leaves the row for the next holder; a worker that lost its lease cannot
write, so cannot consume. A delivered prompt that never reaches the log (dropped by
``agent.cancel()`` before its turn started) is delivered again the next time the session is
acquired.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from .. import _serde
from ..agent import Agent, AgentCreated, AgentRegistry
from ..ids import MessageId, SessionId, validate_session_id
from ..llm import ContentBlock, TextBlock
from ..runtime import Context, Service
from ..session import SessionEvent
from ._errors import PersistenceError, StoredSessionNotFoundError
from ._format import decode_json, encode_json
from ._postgres_calls import Database, Interrupt, run_interruptible
from ._postgres_dsn import PostgresDsn, import_psycopg
from ._postgres_lease import Leases
from ._postgres_schema import INBOX_CHANNEL, ensure_schema
from ._types import SESSION_PERSISTENCE

if TYPE_CHECKING:
    import psycopg

__all__ = ["Deliveries", "Inbox", "InboxUnavailableError", "require_inbox", "send_prompt"]

logger = logging.getLogger("trio_agent.persistence")

#: The source of the messages the inbox sends to agents.
INBOX_SOURCE = "inbox"

#: How long the delivery task waits before it tries again after PostgreSQL failed.
_RETRY_DELAY = 1.0


class InboxUnavailableError(PersistenceError, LookupError):
    """``ctx.inbox`` was asked for, but the mounted persistence backend is not shared between
    processes (JSONL, SQLite, memory): only :class:`~trio_agent.persistence.PostgresPersistence`
    provides an inbox."""


def require_inbox(ctx: Context) -> Inbox:
    """The mounted :class:`Inbox` (``ctx.inbox``).

    Raises:
        InboxUnavailableError: the persistence backend is not a shared one (its message says
            which backend is mounted and what to mount instead).
    """
    inbox = ctx.get(Inbox)
    if inbox is not None:
        return inbox
    backend = ctx.get(SESSION_PERSISTENCE)
    mounted = "no session_persistence" if backend is None else type(backend).__name__
    raise InboxUnavailableError(
        f"ctx.inbox needs a shared persistence backend, one that every worker process reaches "
        f"(PostgresPersistence), but {mounted} is mounted; configure persistence: "
        "{type: postgres, dsn: ...} to send prompts to sessions across processes"
    )


def _encode_content(content: str | Sequence[ContentBlock]) -> str:
    blocks = (TextBlock(content),) if isinstance(content, str) else tuple(content)
    if not blocks or (isinstance(content, str) and not content.strip()):
        raise ValueError("cannot enqueue an empty prompt: give text or at least one content block")
    return encode_json(_serde.unstructure(blocks))


def insert_prompt(
    conn: psycopg.Connection[Any], *, schema: str, session_id: SessionId, content: str, where: str
) -> int:
    """Store one prompt and notify its holder, in one transaction; the row's id.

    Raises:
        StoredSessionNotFoundError: the session was never stored nor acquired.
    """
    with conn.transaction():
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM trio_agent_sessions WHERE id = %s) "
            "OR EXISTS (SELECT 1 FROM trio_agent_leases WHERE session_id = %s)",
            (session_id, session_id),
        ).fetchone()
        if row is None or not row[0]:
            raise StoredSessionNotFoundError(
                f"no session {session_id!r} at {where} (neither stored nor open in a worker); "
                "check the id with trio-agent sessions list",
                session_id=session_id,
            )
        row = conn.execute(
            "INSERT INTO trio_agent_inbox (session_id, content, enqueued_at) VALUES (%s, %s, %s) "
            "RETURNING id",
            (session_id, content, time.time()),
        ).fetchone()
        assert row is not None
        conn.execute("SELECT pg_notify(%s, %s)", (INBOX_CHANNEL, f"{schema}/{session_id}"))
    return int(row[0])


async def send_prompt(
    dsn: str,
    session_id: str,
    content: str | Sequence[ContentBlock],
    *,
    connect_timeout: float = 10.0,
) -> int:
    """Enqueue a prompt for ``session_id`` in the PostgreSQL database at ``dsn``, without a
    runtime: what ``trio-agent send SESSION-ID TEXT`` does. The worker holding the session runs
    it (or the next one to resume it). Returns the prompt's inbox id.

    Opens one connection (``connect_timeout`` bounds connecting and each statement), creates the tables
    if the database has none, and closes it. Cancellation stops it before the prompt is stored,
    or returns once it is.

    Raises:
        ValueError: an invalid session id or an empty prompt.
        StoredSessionNotFoundError: no such session in that database.
        PersistenceError: the database cannot be reached or used (the message never shows the
            DSN's password).
    """
    sid = validate_session_id(session_id)
    payload = _encode_content(content)
    parsed = PostgresDsn.parse(dsn)
    database = Database(
        parsed,
        pool_size=1,
        statement_timeout=connect_timeout,
        connect_timeout=connect_timeout,
        setup=functools.partial(ensure_schema, where=parsed.display),
    )

    def send(interrupt: Interrupt) -> int:
        psycopg = import_psycopg()
        options = database.connection_options()
        with database.translated(interrupt), psycopg.connect(parsed.conninfo, **options) as conn:
            interrupt.attach(conn)
            database.configure(conn)
            schema = ensure_schema(conn, parsed.display)
            interrupt.commit()
            return insert_prompt(
                conn, schema=schema, session_id=sid, content=payload, where=parsed.display
            )

    try:
        return await run_interruptible(send)
    except OSError as exc:
        raise PersistenceError(f"cannot send the prompt to session {sid!r}: {exc}") from None


@final
class Deliveries:
    """Which inbox rows this worker handed to agents, and which message each became (so the
    write that logs the message consumes the row)."""

    def __init__(self) -> None:
        #: session -> message id -> inbox row id, until the message is logged.
        self._expected: dict[SessionId, dict[str, int]] = {}
        #: session -> inbox rows delivered while this worker holds the session.
        self._delivered: dict[SessionId, set[int]] = {}

    def was_delivered(self, session_id: SessionId, row_id: int) -> bool:
        """Whether row ``row_id`` was already handed to an agent (it is not handed twice)."""
        return row_id in self._delivered.get(session_id, ())

    def record(self, session_id: SessionId, row_id: int, message_id: MessageId) -> None:
        """Row ``row_id`` became message ``message_id``."""
        self._delivered.setdefault(session_id, set()).add(row_id)
        self._expected.setdefault(session_id, {})[message_id] = row_id

    def consumed_by(self, session_id: SessionId, events: Sequence[SessionEvent]) -> list[int]:
        """The rows whose prompts ``events`` log (as ``user/message`` or ``prompt/blocked``)."""
        expected = self._expected.get(session_id)
        if not expected:
            return []
        rows = []
        for event in events:
            if event.type in ("user/message", "prompt/blocked"):
                message = event.data.get("message")
                key = message.get("id") if isinstance(message, dict) else None
                row = expected.get(key) if isinstance(key, str) else None
                if row is not None:
                    rows.append(row)
        return rows

    def consumed(self, session_id: SessionId, rows: Sequence[int]) -> None:
        """``rows`` were consumed by a committed write."""
        expected = self._expected.get(session_id)
        if expected and rows:
            done = set(rows)
            for message_id in [m for m, row in expected.items() if row in done]:
                del expected[message_id]

    def forget(self, session_id: SessionId) -> None:
        """This worker no longer holds ``session_id``: its unconsumed rows may go elsewhere."""
        self._expected.pop(session_id, None)
        self._delivered.pop(session_id, None)


@attrs.frozen
class _Row:
    id: int
    session_id: SessionId
    content: str


@final
class Inbox(Service, name="inbox"):
    """``ctx.inbox``: durable prompts for sessions, run by whichever worker holds the session
    (see :mod:`trio_agent.persistence._postgres_inbox`). Provided by
    :class:`~trio_agent.persistence.PostgresPersistence`; :func:`require_inbox` explains what
    is missing when another backend is mounted."""

    def __init__(
        self, ctx: Context, database: Database, leases: Leases, deliveries: Deliveries
    ) -> None:
        super().__init__(ctx, None)
        self._db = database
        self._leases = leases
        self._deliveries = deliveries
        self._wake_send, self._wake_receive = trio.open_memory_channel[SessionId](math.inf)
        leases.watch(self)
        ctx.on("agent/created", self._on_agent_created)

    async def enqueue(self, session_id: str, content: str | Sequence[ContentBlock]) -> int:
        """Store a prompt for ``session_id`` durably and notify the worker holding it; returns
        the prompt's inbox id. Callable from any process on the same database. The prompt runs
        once, after the prompts enqueued before it, when a worker holds the session (now, or
        once one resumes it).

        Raises:
            ValueError: an invalid session id or an empty prompt.
            StoredSessionNotFoundError: the session was never stored nor acquired.
            PersistenceError: PostgreSQL cannot be reached.
        """
        sid = validate_session_id(session_id)
        payload = _encode_content(content)
        where = self._db.dsn.display
        try:
            return await self._db.run(
                lambda conn, _: insert_prompt(
                    conn, schema=self._db.schema, session_id=sid, content=payload, where=where
                )
            )
        except OSError as exc:
            raise PersistenceError(f"cannot enqueue a prompt for {sid!r}: {exc}") from None

    # --- LeaseWatcher -----------------------------------------------------------------------

    def lease_acquired(self, session_id: SessionId) -> None:
        """Look for prompts that waited while nobody held the session."""
        self._wake(session_id)

    def lease_ended(self, session_id: SessionId) -> None:
        """Forget what was delivered: the next holder delivers what was not consumed."""
        self._deliveries.forget(session_id)

    def prompt_arrived(self, session_id: SessionId) -> None:
        """Deliver the new prompt."""
        self._wake(session_id)

    def _on_agent_created(self, payload: AgentCreated) -> None:
        session_id = payload.agent.session.id
        if self._leases.holds(session_id):
            self._wake(session_id)

    def _wake(self, session_id: SessionId) -> None:
        """Tell the delivery task to look at ``session_id``. Once it has stopped (the plugin is
        unloading, and its final writes may still claim sessions) there is nobody to deliver
        to: the prompts wait in the table for the next holder."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            self._wake_send.send_nowait(session_id)

    # --- delivery ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Deliver waiting prompts to the agents of held sessions until cancelled. Run it in
        the providing fiber's nursery."""
        async with self._wake_receive:
            async for first in self._wake_receive:
                wanted = {first}
                while True:
                    try:
                        wanted.add(self._wake_receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                try:
                    await self._deliver(wanted)
                except (OSError, PersistenceError) as exc:
                    logger.warning(
                        "inbox: reading waiting prompts failed (%s); trying again in %.0f s",
                        exc,
                        _RETRY_DELAY,
                    )
                    await trio.sleep(_RETRY_DELAY)
                    for sid in wanted:
                        self._wake_send.send_nowait(sid)

    def _agent_on(self, session_id: SessionId) -> Agent | None:
        registry = self.ctx.get(AgentRegistry)
        if registry is None or not self._leases.holds(session_id):
            return None
        for agent in registry.list():
            if agent.session.id == session_id and agent.status != "disposed":
                return agent
        return None

    async def _deliver(self, wanted: set[SessionId]) -> None:
        sessions = sorted(sid for sid in wanted if self._agent_on(sid) is not None)
        if not sessions:
            await trio.lowlevel.checkpoint()
            return
        rows = await self._db.run(functools.partial(_waiting, sessions=sessions))
        for row in rows:
            if self._deliveries.was_delivered(row.session_id, row.id):
                continue
            agent = self._agent_on(row.session_id)
            if agent is None:
                continue
            try:
                blocks = _serde.structure(decode_json(row.content), tuple[ContentBlock, ...])
            except Exception as exc:
                logger.error(
                    "inbox: prompt %d for session %r is malformed (%s); it is left in the inbox",
                    row.id,
                    row.session_id,
                    exc,
                )
                continue
            try:
                message_id = agent.send(blocks, source=INBOX_SOURCE)
            except Exception as exc:
                logger.warning(
                    "inbox: agent %r did not take prompt %d (%s); it stays in the inbox",
                    agent.id,
                    row.id,
                    exc,
                )
                continue
            self._deliveries.record(row.session_id, row.id, message_id)


def _waiting(
    conn: psycopg.Connection[Any], interrupt: Interrupt, *, sessions: Sequence[str]
) -> list[_Row]:
    rows = conn.execute(
        "SELECT id, session_id, content FROM trio_agent_inbox WHERE session_id = ANY(%s) "
        "ORDER BY id",
        (sessions,),
    ).fetchall()
    return [_Row(int(r[0]), SessionId(r[1]), r[2]) for r in rows]
