"""One configured MCP server: its connection, its restarts, its tools and their calls.

A :class:`ServerConnection` runs as one task in the ``McpServers`` fiber's nursery. Each
connection attempt nests, in this order (so teardown is the reverse, by construction): the
stderr reader (stdio) → the transport (the subprocess, or the HTTP client) → the MCP client
session. When the session ends - the server exited, the HTTP connection broke, the listing
failed - the task records why and restarts it under the server's :class:`RestartPolicy`;
cancelling the task (the plugin unloading) unwinds the same nesting, and the SDK's stdio
transport stops the subprocess (stdin closed, then SIGTERM, then SIGKILL to its process group,
each wait bounded) and reaps it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, final

import anyio
import attrs
import httpx2
import mcp.types as mcp_types
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from .. import __version__
from ..ids import CallId
from ..llm import ToolResult
from ..redaction import redact_known, redact_text
from ..runtime import Disposer
from ..tools import (
    TOOL_ERROR,
    Tool,
    ToolCallContext,
    ToolConflictError,
    ToolDefinitionError,
    ToolRegistry,
    error_result,
)
from ._config import HttpServerConfig, RestartPolicy, ServerConfig
from ._content import tool_result
from ._errors import McpServerUnavailableError, McpToolNameError
from ._names import mcp_tool_name

__all__ = ["McpServerStatus", "Redactor", "ServerConnection", "ServerState", "restart_delay"]

logger = logging.getLogger("trio_agent.mcp")

#: Where a server is: ``starting`` (first attempt), ``up`` (tools listed and callable),
#: ``restarting`` (down, another attempt is coming), ``failed`` (given up), ``stopped``
#: (the plugin unloaded).
ServerState: TypeAlias = Literal["starting", "up", "restarting", "failed", "stopped"]

#: The longest wait between two restarts (unless the policy's first wait is longer).
MAX_BACKOFF = 30.0
#: A server up this long counts as recovered: its restart count and backoff start again.
STABLE_AFTER = 60.0
#: Bound on ``tools/list`` pages, so a paginator that never ends cannot hang a listing.
_MAX_PAGES = 100
#: What is kept of a server's stderr, for its status and the log.
_STDERR_LINES = 20
_STDERR_LINE_CHARS = 1000
#: How long, after the server process is gone, the last stderr lines may take to arrive.
_STDERR_GRACE = 1.0
#: Server texts (log messages) are cut to this length before they are logged.
_LOG_CHARS = 2000
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_CLIENT_INFO = mcp_types.Implementation(name="trio-agent", version=__version__)
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
# ``Tool.read_only`` comes with the durability work; until it exists the flag only makes the
# tool concurrency-safe.
_TOOL_HAS_READ_ONLY = "read_only" in attrs.fields_dict(Tool)


@attrs.frozen
class McpServerStatus:
    """A snapshot of one server, from :meth:`McpServers.servers`.

    Attributes:
        name: The server's configured name.
        state: ``starting``, ``up``, ``restarting``, ``failed`` or ``stopped``.
        tools: The trio-agent names of its registered tools, sorted.
        error: Why it is (or last was) down; None while it has never failed.
        restarts: How many times it was restarted.
        stderr: The last lines it wrote to stderr (stdio servers), secrets masked.
    """

    name: str
    state: ServerState
    tools: tuple[str, ...]
    error: str | None
    restarts: int
    stderr: tuple[str, ...] = ()


def restart_delay(policy: RestartPolicy, attempt: int) -> float:
    """Seconds before restart number ``attempt`` (1-based) of a run of failures: the policy's
    ``backoff``, doubled per attempt, capped at :data:`MAX_BACKOFF` (or ``backoff`` if that is
    longer)."""
    return min(policy.backoff * 2.0 ** (attempt - 1), max(MAX_BACKOFF, policy.backoff))


@final
@attrs.frozen
class Redactor:
    """Masks secret values in texts trio-agent writes itself (errors, log lines, stderr)."""

    secrets: tuple[str, ...]

    @classmethod
    def of(cls, secrets: frozenset[str]) -> Redactor:
        """A redactor for ``secrets``; values shorter than 4 characters are left alone (they
        would mask ordinary words), and longer values are masked first."""
        return cls(tuple(sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        # Every form (url-quoted, base64 ...): callers cut the result (stderr lines, logs).
        return redact_text(text, self.secrets, mask="***")


class _Problem(Exception):
    """Why a connection attempt ended, in words for the status and the log."""


@final
class _WatchedStream:
    """The transport's read stream; calls ``on_end`` when the server closes it.

    This is how the connection task learns that a stdio server exited: the SDK's session
    answers pending calls with "connection closed" but has no event of its own for it.
    """

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream  # the SDK's ReadStream
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        # The SDK's dispatcher reads the sender's contextvars snapshot from here (HTTP).
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        return item

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@attrs.frozen
class _Registration:
    signature: str
    disposer: Disposer = attrs.field(eq=False)


@final
@attrs.define(eq=False)
class ServerConnection:
    """One server's connection task, its registered tools and the bodies that call them.

    Attributes:
        config: The server's config.
        registry: ``ctx.tools`` bound to the plugin's context (global, or an agent's scope).
        names: The plugin-wide table of tool names to "tool X of MCP server Y", shared by
            every server of one ``McpServers`` so a clash names both tools.
        redact: Masks the plugin's secrets.
        startup_timeout: The bound on one attempt's ``initialize`` + ``tools/list``.
        env: The environment given to a stdio server on top of the SDK's baseline.
    """

    config: ServerConfig
    registry: ToolRegistry
    names: dict[str, str]
    redact: Redactor
    startup_timeout: float
    env: Mapping[str, str] = attrs.field(factory=dict)
    _state: ServerState = attrs.field(default="starting", init=False)
    _error: str | None = attrs.field(default=None, init=False)
    _restarts: int = attrs.field(default=0, init=False)
    _session: ClientSession | None = attrs.field(default=None, init=False)
    _up_since: float | None = attrs.field(default=None, init=False)
    _registered: dict[str, _Registration] = attrs.field(factory=dict, init=False)
    _stderr: collections.deque[str] = attrs.field(
        factory=lambda: collections.deque(maxlen=_STDERR_LINES), init=False
    )
    #: Set once the first attempt is decided (up, or down) - what start-up waits for.
    settled: trio.Event = attrs.field(factory=trio.Event, init=False)
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def name(self) -> str:
        """The server's configured name."""
        return self.config.name

    def status(self) -> McpServerStatus:
        """A snapshot of the server."""
        return McpServerStatus(
            self.name,
            self._state,
            tuple(sorted(self._registered)),
            self._error,
            self._restarts,
            tuple(self._stderr),
        )

    async def wait_ready(self) -> None:
        """Wait until the server is up (always a checkpoint).

        Raises:
            McpServerUnavailableError: it gave up restarting, or the plugin stopped.
        """
        while self._state != "up":
            if self._state in ("failed", "stopped"):
                raise McpServerUnavailableError(
                    f'MCP server "{self.name}" is unavailable ({self._state}): '
                    f"{self._error or 'the plugin was unloaded'}"
                )
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def _set(self, state: ServerState, error: str | None) -> None:
        self._state = state
        self._error = error
        if state != "starting":
            self.settled.set()
        self._changed.set()
        self._changed = trio.Event()

    # --- the connection task --------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, and restart under the policy until given up. Runs until the plugin
        unloads (which cancels it and stops the server) or the server is given up."""
        policy = self.config.restart
        failures = 0
        try:
            while True:
                problem = await self._attempt()
                stable = (
                    self._up_since is not None
                    and trio.current_time() - self._up_since >= STABLE_AFTER
                )
                self._up_since = None
                failures = 1 if stable else failures + 1
                if failures > policy.max_attempts:
                    tried = f"after {failures} attempts" if failures > 1 else "on its first attempt"
                    self._set("failed", f"{problem} (gave up {tried})")
                    logger.error(
                        "MCP server %r failed and is not restarted again: %s%s",
                        self.name,
                        self._error,
                        self._stderr_hint(),
                    )
                    return
                delay = restart_delay(policy, failures)
                self._set("restarting", problem)
                logger.warning(
                    "MCP server %r is down (%s); restart %d of %d in %.2gs%s",
                    self.name,
                    problem,
                    failures,
                    policy.max_attempts,
                    delay,
                    self._stderr_hint(),
                )
                await trio.sleep(delay)
                self._restarts += 1
        finally:
            self._session = None
            if self._state != "failed":
                self._set("stopped", self._error)

    async def _attempt(self) -> str:
        """One connection, from spawn to end; returns why it ended (it never raises an
        ``Exception``; cancellation propagates)."""
        problem = "the server closed the connection"
        try:
            await self._connect()
        except* Exception as group:
            problem = self.redact(_describe(group))
        self._session = None
        return problem

    async def _connect(self) -> None:
        lost = trio.CancelScope()
        relist, relisted = trio.open_memory_channel[None](1)

        def ended() -> None:
            # Synchronously, so no call and no wait_ready() sees a dead session as up.
            lost.cancel()
            if self._state == "up":
                self._session = None
                self._set("restarting", "the server closed the connection")

        async with contextlib.AsyncExitStack() as stack:
            read, write = await self._open_transport(stack)
            session = await stack.enter_async_context(
                ClientSession(
                    _WatchedStream(read, ended),
                    write,
                    message_handler=functools.partial(self._on_message, relist),
                    logging_callback=self._on_log,
                    client_info=_CLIENT_INFO,
                )
            )
            with trio.move_on_after(self.startup_timeout) as deadline:
                try:
                    await session.initialize()
                    listing = await _list_tools(session)
                except MCPError as exc:
                    if exc.code != mcp_types.CONNECTION_CLOSED:
                        raise
                    raise _Problem(
                        "the server closed the connection before it listed its tools (did it exit?)"
                    ) from None
            if deadline.cancelled_caught:
                raise _Problem(
                    f"it did not answer initialize and tools/list within {self.startup_timeout:g}s"
                )
            self._install(listing)
            self._session = session
            self._up_since = trio.current_time()
            self._set("up", self._error)
            logger.info("MCP server %r is up with %d tool(s)", self.name, len(self._registered))
            with lost:
                async for _ in relisted:
                    with trio.move_on_after(self.startup_timeout) as deadline:
                        listing = await _list_tools(session)
                    if deadline.cancelled_caught:
                        raise _Problem(
                            "it announced a changed tool list but did not list its tools "
                            f"within {self.startup_timeout:g}s"
                        )
                    self._install(listing)

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if isinstance(config, HttpServerConfig):
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(config.headers), timeout=_HTTP_TIMEOUT)
            )
            return await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
        # stdio: the server's stderr goes through a pipe into the log and the status.
        nursery = await stack.enter_async_context(trio.open_nursery())
        read_fd, write_fd = os.pipe()
        errlog = os.fdopen(write_fd, "w")
        eof = trio.Event()
        nursery.start_soon(self._read_stderr, trio.lowlevel.FdStream(read_fd), eof)
        stack.push_async_callback(_stop_reader, nursery, eof)
        stack.callback(errlog.close)
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(self.env),
            cwd=config.cwd,
        )
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        errlog.close()  # the child has its own copy; ours would keep the pipe open
        return streams

    async def _read_stderr(self, stream: trio.lowlevel.FdStream, eof: trio.Event) -> None:
        pending = b""
        cut = False  # whether ``pending`` lost its start (an overlong line keeps its tail)
        try:
            async with stream:
                while chunk := await stream.receive_some(65536):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        self._stderr_line(line, cut_start=cut)
                        cut = False
                    if len(pending) > _STDERR_LINE_CHARS:
                        pending, cut = pending[-_STDERR_LINE_CHARS:], True
        finally:
            if pending:
                self._stderr_line(pending, cut_start=cut)
            eof.set()

    def _stderr_line(self, raw: bytes, *, cut_start: bool = False) -> None:
        text = self.redact(raw.decode("utf-8", "replace").rstrip())
        if cut_start:  # a secret cut at the start is no longer whole: mask what is left of it
            text = redact_known(text, cut_start=True)
        text = text[:_STDERR_LINE_CHARS]
        if text:
            self._stderr.append(text)
            logger.debug("MCP server %r stderr: %s", self.name, text)

    def _stderr_hint(self) -> str:
        if not self._stderr:
            return ""
        return "; its last stderr lines: " + " | ".join(list(self._stderr)[-3:])

    async def _on_message(
        self, relist: trio.MemorySendChannel[None], message: IncomingMessage
    ) -> None:
        # Runs in the SDK's dispatcher task: never wait on the session here.
        if isinstance(message, mcp_types.ToolListChangedNotification):
            with contextlib.suppress(trio.WouldBlock):
                relist.send_nowait(None)  # one pending re-list covers any number of changes
        elif isinstance(message, Exception):
            logger.warning(
                "MCP server %r: transport problem: %s", self.name, self.redact(_describe(message))
            )
        await trio.lowlevel.checkpoint()

    async def _on_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data)
        logger.log(
            _LOG_LEVELS.get(params.level, logging.INFO),
            "MCP server %r says: %s",
            self.name,
            self.redact(data)[:_LOG_CHARS],
        )
        await trio.lowlevel.checkpoint()

    # --- tools ----------------------------------------------------------------------------

    def _install(self, listing: Sequence[mcp_types.Tool]) -> None:
        """Make the registered tools match ``listing``: unchanged ones stay, changed ones are
        registered again, missing ones are unregistered.

        Raises:
            McpToolNameError: two tools map to one name, or a name is taken.
        """
        wanted: dict[str, tuple[Tool, str, str]] = {}
        for remote in listing:
            name = mcp_tool_name(self.name, remote.name)
            if name in wanted:
                raise McpToolNameError(
                    f'MCP server "{self.name}" lists the tools {wanted[name][1]!r} and '
                    f'{remote.name!r}, which both become the tool name "{name}"; rename one of '
                    "them on the server"
                )
            try:
                tool = self._make_tool(name, remote)
            except ToolDefinitionError as exc:
                logger.warning(
                    "MCP server %r: tool %r skipped: %s",
                    self.name,
                    remote.name,
                    self.redact(str(exc)),
                )
                continue
            wanted[name] = (tool, remote.name, _signature(remote))
        for name, old in list(self._registered.items()):
            new = wanted.get(name)
            if new is None or new[2] != old.signature:
                self._unregister(name)
        for name, (tool, remote_name, signature) in wanted.items():
            if name not in self._registered:
                self._register(name, tool, remote_name, signature)

    def _register(self, name: str, tool: Tool, remote: str, signature: str) -> None:
        label = f'tool {remote!r} of MCP server "{self.name}"'
        other = self.names.get(name)
        if other is not None:
            raise McpToolNameError(
                f'the {other} and the {label} both become the tool name "{name}"; rename one '
                "of them (or one of the servers)"
            )
        try:
            disposer = self.registry.register(tool)
        except ToolConflictError as exc:
            raise McpToolNameError(f"the {label} cannot be registered as {name!r}: {exc}") from None
        self._registered[name] = _Registration(signature, disposer)
        self.names[name] = label

    def _unregister(self, name: str) -> None:
        registration = self._registered.pop(name)
        self.names.pop(name, None)
        registration.disposer()

    def _make_tool(self, name: str, remote: mcp_types.Tool) -> Tool:
        read_only = bool(remote.annotations and remote.annotations.read_only_hint is True)
        flags: dict[str, Any] = {"read_only": read_only} if _TOOL_HAS_READ_ONLY else {}

        async def body(arguments: Any, call: ToolCallContext) -> ToolResult:
            return await self.call(remote.name, arguments, call.call_id)

        return Tool(
            name=name,
            description=remote.description
            or remote.title
            or f'The tool "{remote.name}" of the MCP server "{self.name}".',
            parameters=remote.input_schema,
            body=body,
            timeout=self.config.timeout,
            concurrency_safe=read_only,
            **flags,
        )

    async def call(self, remote: str, arguments: Mapping[str, Any], call_id: CallId) -> ToolResult:
        """Call the server's tool ``remote``; every failure is an error result, never a raise.

        Cancellation: the SDK sends MCP's ``notifications/cancelled`` for the request, then
        :class:`trio.Cancelled` propagates (the registry records ``ABORTED``).
        """
        session = self._session
        if session is None:
            await trio.lowlevel.checkpoint()
            return error_result(call_id, TOOL_ERROR, self._unavailable())
        try:
            result = await session.call_tool(remote, dict(arguments))
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                problem = (
                    f'MCP server "{self.name}" went away during the call to "{remote}" '
                    "(connection closed); it is restarted if its restart policy allows. The "
                    "call may or may not have taken effect: check before repeating it"
                )
            else:
                problem = f'MCP server "{self.name}" refused the call to "{remote}": {exc.message}'
            return error_result(call_id, TOOL_ERROR, self.redact(problem))
        except Exception as exc:
            # A result the SDK could not accept (malformed, or a protocol shape we do not drive).
            problem = self.redact(
                f'MCP server "{self.name}" answered the call to "{remote}" with something '
                f"trio-agent cannot use: {_describe(exc)}"
            )
            logger.warning("%s", problem)
            return error_result(call_id, TOOL_ERROR, problem)
        return tool_result(call_id, result)

    def _unavailable(self) -> str:
        policy = self.config.restart
        if self._state == "failed":
            return (
                f'MCP server "{self.name}" is unavailable: {self._error}. It is not restarted '
                "again; tell the user to check the server and its configuration"
            )
        if self._state == "stopped":
            return f'MCP server "{self.name}" has been stopped'
        return (
            f'MCP server "{self.name}" is not running ({self._error or "starting"}); it is '
            f"being restarted (up to {policy.max_attempts} times). Try again shortly"
        )


async def _stop_reader(nursery: trio.Nursery, eof: trio.Event) -> None:
    # The process is gone: its last stderr lines are in the pipe. Read them (briefly: a
    # grandchild may still hold the pipe open), then stop the reader.
    try:
        with trio.move_on_after(_STDERR_GRACE):
            await eof.wait()
    finally:
        nursery.cancel_scope.cancel()


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise _Problem(f"its tool list did not end after {_MAX_PAGES} pages")


def _signature(remote: mcp_types.Tool) -> str:
    """What decides whether a re-listed tool must be registered again."""
    return json.dumps(
        remote.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=True
    )


def _describe(exc: BaseException) -> str:
    """A short text for an exception or a group of them (each distinct leaf once)."""
    texts: list[str] = []
    for leaf in _leaves(exc):
        if isinstance(leaf, MCPError):
            text = f"{leaf.message} (MCP error {leaf.code})"
        elif isinstance(leaf, _Problem):
            text = str(leaf)
        elif isinstance(leaf, OSError) and leaf.strerror:
            text = f"{leaf.strerror}: {leaf.filename!r}" if leaf.filename else leaf.strerror
        else:
            text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
        if text not in texts:
            texts.append(text)
    return "; ".join(texts)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
