"""The agent side of one ACP connection: the method table and the open sessions."""

from __future__ import annotations

import datetime
import logging
import os
import uuid
from pathlib import Path
from typing import final

import attrs
import trio

from .. import __version__
from ..agent import AgentExistsError, AgentOptions, AgentRegistry
from ..config import HarnessConfig
from ..ids import validate_session_id
from ..persistence import (
    SESSION_PERSISTENCE,
    PersistenceError,
    SessionPersistence,
    StoredSessionNotFoundError,
)
from ..redaction import redact_known
from ..runtime import Context
from ..tools.builtin import BuiltinToolsConfig
from ._content import prompt_blocks
from ._errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    RpcError,
    invalid_params,
)
from ._jsonrpc import JsonObject, JsonRpcPeer, Reply
from ._mcp import ClientMcpServer, mcp_available, parse_mcp_servers
from ._permissions import AcpApprovalService, PermissionBridge
from ._session import AcpSession

__all__ = ["PROTOCOL_VERSION", "AcpOptions", "AcpServer"]

logger = logging.getLogger("trio_agent.acp")

#: The ACP protocol version this server speaks.
PROTOCOL_VERSION = 1
_LIST_PAGE = 50


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value <= 0:
        raise ValueError(f"AcpOptions.{attribute.name} must be a positive integer, got {value!r}")


@attrs.frozen
class AcpOptions:
    """How the ACP server runs.

    Attributes:
        agent: A configured agent (``agents[].id``) whose provider, model and max_tokens every
            ACP session uses; None for the config's defaults.
        context_window: The context window size, in tokens, reported in ``usage_update``.
        max_message_bytes: The longest frame accepted from the client; a longer one is
            answered with a parse error and skipped.
    """

    agent: str | None = None
    context_window: int = attrs.field(default=128_000, validator=_positive)
    max_message_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive)


def _string(method: str, params: JsonObject, key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise invalid_params(method, key, f"expected a string, got {type(value).__name__}")
    return value


@final
class AcpServer:
    """Serves the ACP agent methods for one connection.

    Sessions are hosted by tasks in ``nursery`` (the connection's nursery): each task holds its
    agent's :class:`~trio_agent.AgentHandle` and closes it when the session or the connection
    closes. :attr:`approvals` is the approval service to provide as ``ctx.approval``.
    """

    def __init__(
        self,
        ctx: Context,
        peer: JsonRpcPeer,
        nursery: trio.Nursery,
        *,
        config: HarnessConfig,
        options: AcpOptions,
        agent_options: AgentOptions | None,
    ) -> None:
        self._ctx = ctx
        self._peer = peer
        self._nursery = nursery
        self._options = options
        self._agent_options = agent_options
        self._tools = BuiltinToolsConfig(
            enabled=config.tools.builtin,
            shell=config.tools.shell,
            shell_timeout=config.tools.shell_timeout,
        )
        self._root = Path(os.path.realpath(config.tools.root)) if config.tools.root else None
        self._sessions: dict[str, AcpSession] = {}
        self._initialized = False
        self._closing = False
        self._bridge = PermissionBridge(peer, self._sessions.get)
        #: The approval service asking this connection's client (``ctx.approval``).
        self.approvals = AcpApprovalService(self._bridge)
        self._requests = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
            "session/load": self._load,
            "session/prompt": self._prompt,
            "session/list": self._list,
            "session/close": self._close,
        }

    # --- dispatch (called by the peer, in arrival order) ------------------------------------

    def handle_request(self, method: str, params: JsonObject) -> Reply:
        """Answer ``method``; see :class:`~trio_agent.acp._jsonrpc.RequestHandler`."""
        handler = self._requests.get(method)
        if handler is None:
            raise RpcError(
                METHOD_NOT_FOUND, f"unknown method {method!r:.100}", {"method": method[:100]}
            )
        if method != "initialize" and not self._initialized:
            raise RpcError(INVALID_REQUEST, f"{method}: call initialize first")
        return handler(params)

    def handle_notification(self, method: str, params: JsonObject) -> None:
        """``session/cancel``; any other notification is ignored."""
        if method != "session/cancel":
            logger.debug("ignored the notification %.100r", method)
            return
        session_id = params.get("sessionId")
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            logger.info("session/cancel for no open session (%.100r)", session_id)
            return
        session.cancel()

    # --- initialize / authenticate ----------------------------------------------------------

    def _persistence(self) -> SessionPersistence | None:
        return self._ctx.get(SESSION_PERSISTENCE)

    def _initialize(self, params: JsonObject) -> Reply:
        version = params.get("protocolVersion")
        # Some clients sent a date string before versions were integers: answer with ours.
        if isinstance(version, bool) or not isinstance(version, int | str):
            raise invalid_params("initialize", "protocolVersion", "expected an integer")
        self._initialized = True
        persistent = self._persistence() is not None
        sessions: JsonObject = {"close": {}}
        if persistent:
            sessions["list"] = {}
        mcp = mcp_available()
        note = (
            "mounted per session: stdio and http; sse is not supported"
            if mcp
            else "not mounted: the mcp extra is not installed (pip install 'trio-agent[mcp]')"
        )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": persistent,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": mcp, "sse": False},
                "sessionCapabilities": sessions,
                "_meta": {"trio-agent": {"clientMcpServers": note}},
            },
            "authMethods": [],
            "agentInfo": {"name": "trio-agent", "title": "trio-agent", "version": __version__},
        }

    def _authenticate(self, params: JsonObject) -> Reply:
        _string("authenticate", params, "methodId")
        return {}

    # --- sessions ---------------------------------------------------------------------------

    def _cwd(self, method: str, params: JsonObject) -> Path:
        text = _string(method, params, "cwd")
        if "\0" in text or not os.path.isabs(text):
            raise invalid_params(method, "cwd", f"expected an absolute path, got {text!r:.200}")
        cwd = Path(os.path.realpath(text))
        if not cwd.is_dir():
            raise invalid_params(method, "cwd", f"{text!r:.200} is not an existing directory")
        if self._root is not None and not (cwd == self._root or self._root in cwd.parents):
            raise invalid_params(
                method,
                "cwd",
                f"{text!r:.200} is outside the configured workspace root {self._root} "
                "(tools.root); open a folder inside it",
            )
        return cwd

    def _session(self, method: str, params: JsonObject) -> AcpSession:
        session_id = _string(method, params, "sessionId")
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(
                RESOURCE_NOT_FOUND,
                f"{method}: no open session {session_id!r:.200}; create one with session/new "
                "or load it with session/load",
                {"sessionId": session_id[:200]},
            )
        return session

    def _new(self, params: JsonObject) -> Reply:
        cwd = self._cwd("session/new", params)
        servers = parse_mcp_servers("session/new", params)
        session_id = f"acp-{uuid.uuid4()}"

        async def body() -> JsonObject:
            session = await self._open(session_id, cwd, servers, resume=False)
            return {"sessionId": session_id, **session.response_meta()}

        return body

    def _load(self, params: JsonObject) -> Reply:
        method = "session/load"
        session_id = _string(method, params, "sessionId")
        try:
            validate_session_id(session_id)
        except ValueError as exc:
            raise invalid_params(method, "sessionId", str(exc)) from None
        cwd = self._cwd(method, params)
        servers = parse_mcp_servers(method, params)
        persistence = self._persistence()
        if persistence is None:
            raise RpcError(
                INVALID_REQUEST,
                "session/load needs persistence, and this server has none (loadSession is false); "
                "set persistence in the config",
            )
        if session_id in self._sessions:
            raise RpcError(
                INVALID_REQUEST,
                f"session {session_id} is already open on this connection; keep using it",
            )

        async def body() -> JsonObject:
            if not await persistence.exists(session_id):
                raise _not_stored(session_id)
            session = await self._open(session_id, cwd, servers, resume=True)
            session.replay()
            return session.response_meta()

        return body

    def _prompt(self, params: JsonObject) -> Reply:
        session = self._session("session/prompt", params)
        return session.start_prompt(prompt_blocks(params.get("prompt")))

    def _close(self, params: JsonObject) -> Reply:
        session = self._session("session/close", params)

        async def body() -> JsonObject:
            await session.close()
            return {}

        return body

    def _list(self, params: JsonObject) -> Reply:
        method = "session/list"
        persistence = self._persistence()
        if persistence is None:
            raise RpcError(
                INVALID_REQUEST, "session/list needs persistence, and this server has none"
            )
        wanted = params.get("cwd")
        if wanted is not None and (not isinstance(wanted, str) or not os.path.isabs(wanted)):
            raise invalid_params(method, "cwd", "expected an absolute path")
        cursor = params.get("cursor")
        if cursor is not None and (not isinstance(cursor, str) or not cursor.isdigit()):
            raise invalid_params(
                method, "cursor", "expected a cursor returned by an earlier session/list"
            )
        skip = int(cursor) if cursor else 0

        async def body() -> JsonObject:
            return await _list_page(persistence, wanted, skip)

        return body

    async def _open(
        self,
        session_id: str,
        cwd: Path,
        servers: tuple[ClientMcpServer, ...],
        *,
        resume: bool,
    ) -> AcpSession:
        if self._closing:
            raise RpcError(INVALID_REQUEST, "the server is shutting down; no new sessions")
        session = AcpSession(
            session_id,
            cwd,
            peer=self._peer,
            tools=self._tools,
            mcp_servers=servers,
            context_window=self._options.context_window,
        )
        opened: AcpSession = await self._nursery.start(self._host, session, resume)
        return opened

    async def _host(
        self,
        session: AcpSession,
        resume: bool,
        *,
        task_status: trio.TaskStatus[AcpSession] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Own one session's agent handle until the session or the connection closes."""
        registry = self._ctx.require(AgentRegistry)
        session_id = session.session_id
        try:
            try:
                if resume:
                    handle = await registry.resume(
                        agent_id=session_id,
                        resume_session_id=session_id,
                        agent_options=self._agent_options,
                        setup=session.attach,
                    )
                else:
                    handle = await registry.create(
                        agent_id=session_id,
                        session_id=session_id,
                        meta={"cwd": str(session.cwd)},
                        agent_options=self._agent_options,
                        setup=session.attach,
                    )
            except StoredSessionNotFoundError:
                raise _not_stored(session_id) from None
            except AgentExistsError as exc:
                raise RpcError(INVALID_REQUEST, str(exc)) from None
            except PersistenceError as exc:
                problem = redact_known(str(exc))
                raise RpcError(
                    INTERNAL_ERROR,
                    f"session {session_id} could not be opened: {problem}",
                    {"code": type(exc).__name__, "message": problem[:500]},
                ) from None
            async with handle:
                self._sessions[session_id] = session
                try:
                    task_status.started(session)
                    await session.wait_closing()
                finally:
                    del self._sessions[session_id]
                    self._bridge.forget(session_id)
        finally:
            session.mark_closed()

    async def aclose(self) -> None:
        """Close every session, newest first; no new sessions open afterwards."""
        self._closing = True
        for session in reversed(list(self._sessions.values())):
            await session.close()


def _not_stored(session_id: str) -> RpcError:
    return RpcError(
        RESOURCE_NOT_FOUND,
        f"session/load: no stored session {session_id!r}; session/list shows the stored ones",
        {"sessionId": session_id},
    )


async def _list_page(persistence: SessionPersistence, cwd: str | None, skip: int) -> JsonObject:
    """One ``session/list`` page: stored sessions, most recently updated first.

    The store's listing has no working directory, so each candidate's header is read by
    loading it; without a ``cwd`` filter only the page itself is loaded.
    """
    infos = sorted(await persistence.list(), key=lambda info: info.updated_at, reverse=True)
    rows: list[JsonObject] = []
    matched = 0
    for info in infos:
        if cwd is None and matched < skip:
            matched += 1
            continue
        try:
            stored = await persistence.load(info.session_id)
        except PersistenceError as exc:
            logger.warning("session/list: skipped session %s: %s", info.session_id, exc)
            continue
        where = stored.header.cwd or os.getcwd()
        if cwd is not None and where != cwd:
            continue
        matched += 1
        if matched <= skip:
            continue
        if len(rows) == _LIST_PAGE:
            return {"sessions": rows, "nextCursor": str(skip + _LIST_PAGE)}
        row: JsonObject = {
            "sessionId": info.session_id,
            "cwd": where,
            "updatedAt": datetime.datetime.fromtimestamp(info.updated_at, datetime.UTC).isoformat(),
        }
        if info.title:
            row["title"] = info.title
        rows.append(row)
    return {"sessions": rows}
