"""One ACP session: the agent serving it, and its events as ``session/update`` notifications.

The ACP ``sessionId`` is the trio-agent session id (and the agent id), so ``session/load`` in a
new process resumes the same log. While a turn runs:

==========================  ===================================================================
agent / session event       notification (``update.sessionUpdate``)
==========================  ===================================================================
text delta                  ``agent_message_chunk``
reasoning delta             ``agent_thought_chunk``
``tool/call``               ``tool_call`` (status ``pending``; kind, title, locations, rawInput)
``tools/execute`` begins    ``tool_call_update`` (status ``in_progress``)
``tool/result``             ``tool_call_update`` (``completed`` | ``failed``; content, diffs)
turn end with usage         ``usage_update``
==========================  ===================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, final

import trio

from ..agent import (
    Agent,
    AgentClosedError,
    AgentFailed,
    StreamChunkReceived,
)
from ..llm import (
    ContentBlock,
    ReasoningBlock,
    ReasoningDelta,
    TextBlock,
    TextDelta,
    ToolResult,
    Usage,
)
from ..redaction import redact_known
from ..runtime import Next
from ..session import (
    AssistantMessageEvent,
    PromptBlocked,
    SessionAppended,
    SessionEvent,
    SteeringMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)
from ..tools import ToolExecution, ToolRegistry
from ..tools.builtin import BuiltinToolsConfig, Workspace, builtin_tools
from ._content import acp_content
from ._errors import INTERNAL_ERROR, INVALID_REQUEST, RpcError
from ._jsonrpc import JsonRpcPeer
from ._mcp import ClientMcpServer, mount_client_mcp_servers
from ._toolview import EDIT_TOOLS, FileSnapshot, ToolView, read_snapshot

__all__ = ["AcpSession", "stop_reason"]

logger = logging.getLogger("trio_agent.acp")

JsonObject = dict[str, Any]

#: Turn end reason → ACP ``stopReason``. ``error`` is not here: it answers -32603.
_STOP_REASONS = {
    "completed": "end_turn",
    "max-tokens": "max_tokens",
    "max-steps": "max_turn_requests",
    "rejected": "refusal",
    "aborted": "cancelled",
    "disposed": "cancelled",
    "interrupted": "cancelled",
}


def stop_reason(reason: str) -> str:
    """The ACP ``stopReason`` for a turn that ended with ``reason``.

    Raises:
        ValueError: ``reason`` is ``error`` (answered as a JSON-RPC error) or unknown.
    """
    try:
        return _STOP_REASONS[reason]
    except KeyError:
        raise ValueError(
            f"turn end reason {reason!r} has no ACP stopReason (known: "
            f"{', '.join(_STOP_REASONS)}; 'error' is answered as a JSON-RPC error)"
        ) from None


def _chunk(kind: str, text: str) -> JsonObject:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _input_tokens(usage: Usage) -> int:
    """All input of one request (trio-agent counts cached input apart)."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


def _turn_usage(usages: Sequence[Usage]) -> JsonObject:
    inputs = sum(_input_tokens(u) for u in usages)
    outputs = sum(u.output_tokens for u in usages)
    return {
        "totalTokens": inputs + outputs,
        "inputTokens": inputs,
        "outputTokens": outputs,
        "thoughtTokens": sum(u.reasoning_tokens for u in usages),
        "cachedReadTokens": sum(u.cache_read_tokens for u in usages),
        "cachedWriteTokens": sum(u.cache_write_tokens for u in usages),
    }


@final
class AcpSession:
    """One ACP session, bound to one agent by :meth:`attach` (the agent's ``setup``).

    The server owns its lifetime: a task in the connection's nursery holds the agent's handle
    until :meth:`close` (or the connection closing) releases it.
    """

    def __init__(
        self,
        session_id: str,
        cwd: Path,
        *,
        peer: JsonRpcPeer,
        tools: BuiltinToolsConfig,
        mcp_servers: tuple[ClientMcpServer, ...],
        context_window: int,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        #: The MCP servers the client listed (mounted by :meth:`attach`).
        self.mcp_servers = mcp_servers
        #: What became of each of them (see :func:`mount_client_mcp_servers`), once attached.
        self.mcp_reports: tuple[JsonObject, ...] = ()
        self._peer = peer
        self._tools = tools
        self._workspace = Workspace(cwd)
        self._view = ToolView(self._workspace, frozenset(tools.enabled))
        self._context_window = context_window
        self._agent: Agent | None = None
        self._diffs: dict[str, tuple[FileSnapshot, FileSnapshot]] = {}
        self._last_error: str | None = None
        self._prompting = False
        self._cancelled = False
        self._closing = trio.Event()
        self._closed = trio.Event()

    @property
    def agent(self) -> Agent:
        """The agent serving this session."""
        if self._agent is None:
            raise RuntimeError(f"ACP session {self.session_id} has no agent yet")
        return self._agent

    # --- set-up (the agent's ``setup``) -----------------------------------------------------

    async def attach(self, agent: Agent) -> None:
        """Bind ``agent``: listen to its events, give it the built-in tools rooted at the
        session's ``cwd`` (agent-scoped, shadowing the global ones) and mount the client's MCP
        servers on it (:func:`mount_client_mcp_servers`; the agent owns them)."""
        self._agent = agent
        ctx = agent.ctx
        ctx.on("agent/stream-chunk", self._on_chunk)
        ctx.on("agent/error", self._on_error)
        ctx.on("session/event", self._on_session_event)
        ctx.on("tools/execute", self._around_execute)
        registry = ctx.require(ToolRegistry)
        if self._tools.enabled:
            for tool in builtin_tools(self._tools, workspace=self._workspace):
                registry.register(tool)
        self.mcp_reports = await mount_client_mcp_servers(
            agent, self.mcp_servers, cwd=str(self.cwd)
        )

    def response_meta(self) -> JsonObject:
        """The ``_meta`` of the ``session/new`` / ``session/load`` response: what became of
        the client's MCP servers (empty when it listed none)."""
        if not self.mcp_reports:
            return {}
        return {"_meta": {"trio-agent": {"mcpServers": list(self.mcp_reports)}}}

    # --- lifetime ---------------------------------------------------------------------------

    async def wait_closing(self) -> None:
        """Wait until :meth:`close` is called."""
        await self._closing.wait()

    def mark_closed(self) -> None:
        """Record that the agent's handle was closed (the owner task's last act)."""
        self._closed.set()

    async def close(self) -> None:
        """Close the session: its agent is torn down (a running turn ends ``disposed``)."""
        self._closing.set()
        await self._closed.wait()

    # --- prompts ----------------------------------------------------------------------------

    def start_prompt(self, blocks: tuple[ContentBlock, ...]) -> Callable[[], Awaitable[JsonObject]]:
        """Send ``blocks`` as one prompt now; return the wait for its ``PromptResponse``.

        Raises:
            RpcError: ``INVALID_REQUEST`` when a prompt is already running or the session is
                closing.
        """
        agent = self.agent
        if self._prompting:
            raise RpcError(
                INVALID_REQUEST,
                f"session {self.session_id} is already running a prompt; wait for its response "
                "or send session/cancel",
                {"sessionId": self.session_id},
            )
        since = len(agent.session.events)
        try:
            agent.send(list(blocks), source="user")
        except AgentClosedError as exc:
            raise RpcError(
                INVALID_REQUEST, f"session {self.session_id} is closing: {exc}"
            ) from None
        self._prompting = True
        self._cancelled = False
        self._last_error = None

        async def response() -> JsonObject:
            try:
                await agent.wait_idle()
                return self._outcome(since)
            finally:
                self._prompting = False

        return response

    def cancel(self) -> None:
        """``session/cancel``: stop the running prompt (it answers ``cancelled``)."""
        if self._prompting and self._agent is not None:
            self._cancelled = True
            self._agent.cancel("session/cancel from the ACP client")

    def _outcome(self, since: int) -> JsonObject:
        agent = self.agent
        end: TurnEnd | None = None
        usages: list[Usage] = []
        for event in agent.session.events[since:]:
            if event.type == AssistantMessageEvent.event_type:
                usage = event.payload_as(AssistantMessageEvent).usage
                if usage is not None:
                    usages.append(usage)
            elif event.type == TurnEnd.event_type:
                end = event.payload_as(TurnEnd)
        if end is None:
            if self._cancelled or agent.status == "disposed":
                return {"stopReason": "cancelled"}
            raise RpcError(INTERNAL_ERROR, "the prompt ended without a turn")
        if end.reason == "error":
            if end.error is not None:
                data = {"code": end.error.code, "message": end.error.message}
            else:
                data = {
                    "code": "TURN_ERROR",
                    "message": self._last_error or "a plugin failed during the turn",
                }
            raise RpcError(INTERNAL_ERROR, f"the turn ended with an error: {data['message']}", data)
        result: JsonObject = {"stopReason": stop_reason(end.reason)}
        if usages:
            self._update(
                {
                    "sessionUpdate": "usage_update",
                    "used": _input_tokens(usages[-1]) + usages[-1].output_tokens,
                    "size": self._context_window,
                }
            )
            result["usage"] = _turn_usage(usages)
        return result

    # --- live events ------------------------------------------------------------------------

    def _update(self, update: JsonObject) -> None:
        self._peer.notify("session/update", {"sessionId": self.session_id, "update": update})

    def _on_chunk(self, event: StreamChunkReceived) -> None:
        chunk = event.chunk
        if isinstance(chunk, TextDelta) and chunk.text:
            self._update(_chunk("agent_message_chunk", chunk.text))
        elif isinstance(chunk, ReasoningDelta) and chunk.text:
            self._update(_chunk("agent_thought_chunk", chunk.text))

    def _on_error(self, event: AgentFailed) -> None:
        self._last_error = redact_known(f"{type(event.error).__name__}: {event.error}")[:500]

    def _on_session_event(self, appended: SessionAppended) -> None:
        event: SessionEvent = appended.event
        if event.type == ToolCallEvent.event_type:
            call = event.payload_as(ToolCallEvent)
            self._tool_started(call.call_id, call.name, call.arguments)
        elif event.type == ToolResultEvent.event_type:
            done = event.payload_as(ToolResultEvent)
            self._tool_finished(done.call_id, done.result, self._diffs.pop(done.call_id, None))

    def _tool_started(self, call_id: str, name: str, arguments: str) -> None:
        self._update({"sessionUpdate": "tool_call", **self._view.start(call_id, name, arguments)})

    def _tool_finished(
        self,
        call_id: str,
        result: ToolResult,
        diff: tuple[FileSnapshot, FileSnapshot] | None = None,
    ) -> None:
        self._update(
            {"sessionUpdate": "tool_call_update", **self._view.finish(call_id, result, diff)}
        )

    async def _around_execute(self, execution: ToolExecution, next: Next) -> ToolResult:
        self._update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": execution.call_id,
                "status": "in_progress",
            }
        )
        if execution.name not in EDIT_TOOLS or execution.name not in self._view.builtin:
            outcome: ToolResult = await next()
            return outcome
        path = (execution.parsed_arguments or {}).get("path")
        before = await trio.to_thread.run_sync(read_snapshot, self._workspace, path)
        result: ToolResult = await next()
        if before is not None and not result.is_error:
            after = await trio.to_thread.run_sync(read_snapshot, self._workspace, path)
            if after is not None:
                self._diffs[execution.call_id] = (before, after)
        return result

    def describe_call(self, call_id: str, tool: str, arguments: str) -> JsonObject:
        """The ``toolCall`` of a permission request for this call."""
        return self._view.start(call_id, tool, arguments)

    # --- session/load -----------------------------------------------------------------------

    def replay(self) -> None:
        """Send the session's history as ``session/update`` notifications (``session/load``):
        prompts as ``user_message_chunk``, answers as ``agent_message_chunk`` /
        ``agent_thought_chunk``, each call as ``tool_call`` + ``tool_call_update``."""
        for event in self.agent.session.events:
            try:
                self._replay_event(event)
            except (TypeError, ValueError) as exc:
                logger.warning(
                    "session %s: event seq %d (%s) could not be replayed: %s",
                    self.session_id,
                    event.seq,
                    event.type,
                    exc,
                )

    def _replay_event(self, event: SessionEvent) -> None:
        payload = event.payload
        if isinstance(payload, UserMessageEvent | SteeringMessageEvent | PromptBlocked):
            for block in payload.message.content:
                shown = acp_content(block)
                if shown is not None:
                    self._update({"sessionUpdate": "user_message_chunk", "content": shown})
        elif isinstance(payload, AssistantMessageEvent):
            for block in payload.message.content:
                if isinstance(block, TextBlock) and block.text:
                    self._update(_chunk("agent_message_chunk", block.text))
                elif isinstance(block, ReasoningBlock) and block.text:
                    self._update(_chunk("agent_thought_chunk", block.text))
        elif isinstance(payload, ToolCallEvent):
            self._tool_started(payload.call_id, payload.name, payload.arguments)
        elif isinstance(payload, ToolResultEvent):
            self._tool_finished(payload.call_id, payload.result)
