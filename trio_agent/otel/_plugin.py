"""The OpenTelemetry plugin: GenAI spans for turns, model calls and tool calls.

Span tree of one turn::

    invoke_agent <agent>          one per turn (agent/turn-start → agent/turn-end)
    ├── chat <model>              one per model call, retries and summary calls included
    ├── execute_tool <tool>       one per tool call (tools/pre-execute → tools/result)
    │   └── invoke_agent <child>  an agent whose loop was started inside the tool's body
    └── chat <model>

Parenting never relies on "whatever span is current" in a long-lived task: a turn's span is
kept per agent and a model call's per session, so agents running at once in one process cannot
adopt each other's spans. Only two things flow through the OTel context (contextvars, which trio
copies into every task it starts): the context current when a turn starts (the application's
span, or the tool span of a parent agent) becomes its parent, and an ``execute_tool`` span is
current for the tool's body (spans the tool makes, and agents it starts, nest under it).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
from collections.abc import AsyncIterator
from contextvars import Token
from typing import Any, final

import attrs
import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..agent import Agent, AgentDisposed, TurnEnded, TurnStarted
from ..llm import (
    BlockAssembler,
    Finish,
    GenerateRequest,
    LlmAdapter,
    LlmError,
    LlmStreamCall,
    StreamChunk,
    Usage,
    UsageChunk,
)
from ..lowlevel import Next
from ..runtime import Context
from ..session import TurnEnd
from ..tools import ToolExecution, ToolResultNotice
from . import _semconv as sc

__all__ = ["OtelTracing"]

logger = logging.getLogger("trio_agent.otel")

try:
    _VERSION: str | None = importlib.metadata.version("trio-agent")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
    _VERSION = None

_Attributes = dict[str, str | int | float | bool | list[str]]


def _error_type(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, trio.Cancelled):
        return "ABORTED"
    if isinstance(exc, LlmError):
        return exc.failure.code
    return type(exc).__qualname__


def _fail(span: trace.Span, error_type: str, description: str | None = None) -> None:
    span.set_attribute(sc.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, description or error_type))


@final
@attrs.define(eq=False)
class _Turn:
    """An open ``invoke_agent`` span and what its model calls reported."""

    span: trace.Span
    context: otel_context.Context
    provider: str | None
    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0


@final
@attrs.define(eq=False)
class _ToolSpan:
    execution: ToolExecution
    span: trace.Span
    token: Token[otel_context.Context]


@final
class _Chat:
    """One ``chat`` span, fed the chunks of its stream."""

    __slots__ = ("_assembler", "_finish", "_span", "_turn", "_usage")

    def __init__(self, span: trace.Span, turn: _Turn | None, capture: bool) -> None:
        self._span = span
        self._turn = turn
        self._usage: Usage | None = None
        self._finish: Finish | None = None
        self._assembler = BlockAssembler() if capture else None

    def see(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, UsageChunk):
            self._usage = chunk.usage
        elif isinstance(chunk, Finish):
            self._finish = chunk
        if self._assembler is not None:
            self._assembler.feed(chunk)

    def end(self, error: BaseException | None) -> None:
        span = self._span
        finish = self._finish
        usage = self._usage
        if usage is not None:
            prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            span.set_attribute(sc.USAGE_INPUT, prompt)
            span.set_attribute(sc.USAGE_OUTPUT, usage.output_tokens)
            if usage.cache_read_tokens:
                span.set_attribute(sc.USAGE_CACHE_READ, usage.cache_read_tokens)
            if usage.cache_write_tokens:
                span.set_attribute(sc.USAGE_CACHE_CREATION, usage.cache_write_tokens)
            if usage.reasoning_tokens:
                span.set_attribute(sc.USAGE_REASONING, usage.reasoning_tokens)
            if self._turn is not None:
                self._turn.input_tokens += prompt
                self._turn.output_tokens += usage.output_tokens
        if finish is not None:
            if finish.reason in ("error", "aborted"):
                failure = finish.failure
                if failure is None:
                    _fail(span, "_OTHER")
                else:
                    _fail(span, failure.code, failure.message)
            else:
                span.set_attribute(sc.RESPONSE_FINISH_REASONS, [sc.FINISH_REASONS[finish.reason]])
                if self._assembler is not None:
                    message = self._assembler.message()
                    span.set_attribute(
                        sc.OUTPUT_MESSAGES, sc.output_messages(message, finish.reason)
                    )
        elif error is not None:
            _fail(span, _error_type(error))
        else:
            _fail(span, "STREAM_CLOSED", "the stream ended without a finish")
        span.end()


@final
class _ObservedChannel(trio.abc.ReceiveChannel[StreamChunk]):
    """The adapter's chunk channel, shown to a :class:`_Chat` on the way through."""

    __slots__ = ("_chat", "_inner")

    def __init__(self, inner: trio.abc.ReceiveChannel[StreamChunk], chat: _Chat) -> None:
        self._inner = inner
        self._chat = chat

    async def receive(self) -> StreamChunk:
        chunk = await self._inner.receive()
        self._chat.see(chunk)
        return chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


@final
class _TracedAdapter:
    """Wraps the adapter ``llm/stream`` chose: each ``stream`` is one ``chat`` span."""

    __slots__ = ("_inner", "_parent", "_plugin", "_turn")

    def __init__(
        self,
        inner: LlmAdapter,
        plugin: OtelTracing,
        parent: otel_context.Context,
        turn: _Turn | None,
    ) -> None:
        self._inner = inner
        self._plugin = plugin
        self._parent = parent
        self._turn = turn

    @property
    def name(self) -> str:
        return self._inner.name

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        return self._stream(request)

    @contextlib.asynccontextmanager
    async def _stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        plugin = self._plugin
        span = plugin.tracer.start_span(
            f"chat {request.config.model}",
            context=self._parent,
            kind=SpanKind.CLIENT,
            attributes=plugin.chat_attributes(request),
        )
        chat = _Chat(span, self._turn, plugin.capture)
        if self._turn is not None:
            self._turn.provider = request.config.provider
            self._turn.model = request.config.model
        error: BaseException | None = None
        try:
            async with self._inner.stream(request) as chunks:
                yield _ObservedChannel(chunks, chat)
        except BaseException as exc:
            error = exc
            raise
        finally:
            chat.end(error)
            error = None


@final
class OtelTracing:
    """Plugin: OpenTelemetry spans following the GenAI semantic conventions.

    ``invoke_agent`` per turn (agent id, session id as ``gen_ai.conversation.id``, the turn's
    end reason and token totals), ``chat`` per model call (provider, model, request settings,
    ``gen_ai.usage.*``, finish reason, ``error.type`` and an error status for a failed or cut
    call), ``execute_tool`` per tool call (tool name, call id, ``error.type`` = the result's
    error code). See the module docstring for how spans are parented.

    Spans go to the global ``TracerProvider`` the application configured (exporters through
    the standard ``OTEL_*`` environment variables); with none configured the OTel API drops
    them, so nothing is sent anywhere. Message and tool content is recorded only with
    ``capture_content: true``: prompts and tool output may hold data a trace store should not.
    Unloading the plugin ends the spans still open.
    """

    @attrs.frozen
    class Config:
        """``capture_content``: record prompts, answers, tool arguments and results."""

        capture_content: bool = False

    def __init__(self, ctx: Context, config: OtelTracing.Config | None = None) -> None:
        self.capture = (config or OtelTracing.Config()).capture_content
        self.tracer = trace.get_tracer("trio_agent", _VERSION)
        self._turns: dict[object, _Turn] = {}
        self._by_session: dict[str, _Turn] = {}
        self._tools: dict[int, _ToolSpan] = {}
        ctx.on("agent/turn-start", self._on_turn_start)
        ctx.on("agent/turn-end", self._on_turn_end)
        ctx.on("agent/disposed", self._on_disposed)
        ctx.on("llm/stream", self._on_stream)
        # Outermost, so the span covers policy and approval too, and the tool's body runs
        # with it current.
        ctx.on("tools/pre-execute", self._on_pre_execute, prepend=True)
        ctx.on("tools/result", self._on_tool_result)
        ctx.defer(self._end_open_spans, label="end open OTel spans")

    # --- turns ------------------------------------------------------------------------------

    def _on_turn_start(self, event: TurnStarted) -> None:
        agent = event.agent
        self._close_turn(agent, reason=None)
        session = agent.session
        header = session.request_header
        provider = header.config.provider if header else agent.options.provider
        model = header.config.model if header else agent.options.model
        attributes: _Attributes = {
            sc.OPERATION: "invoke_agent",
            sc.AGENT_ID: agent.id,
            sc.AGENT_NAME: agent.id,
            sc.CONVERSATION_ID: session.id,
            sc.TURN: event.turn,
        }
        if provider:
            attributes[sc.PROVIDER] = provider
        if model:
            attributes[sc.REQUEST_MODEL] = model
        span = self.tracer.start_span(
            f"invoke_agent {agent.id}",
            context=otel_context.get_current(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )
        turn = _Turn(span, trace.set_span_in_context(span), provider, model)
        self._turns[agent] = turn
        self._by_session[session.id] = turn

    def _on_turn_end(self, event: TurnEnded) -> None:
        self._close_turn(event.agent, reason=event.reason)

    def _on_disposed(self, event: AgentDisposed) -> None:
        self._close_turn(event.agent, reason="disposed")

    def _close_turn(self, agent: Agent, *, reason: str | None) -> None:
        turn = self._turns.pop(agent, None)
        if turn is None:
            return
        session = agent.session
        if self._by_session.get(session.id) is turn:
            del self._by_session[session.id]
        span = turn.span
        if turn.provider:
            span.set_attribute(sc.PROVIDER, turn.provider)
        if turn.model:
            span.set_attribute(sc.REQUEST_MODEL, turn.model)
        span.set_attribute(sc.USAGE_INPUT, turn.input_tokens)
        span.set_attribute(sc.USAGE_OUTPUT, turn.output_tokens)
        if reason is not None:
            span.set_attribute(sc.TURN_END_REASON, reason)
        if reason == "error":
            ends = session.events_of_type(TurnEnd.event_type)
            failure = ends[-1].payload_as(TurnEnd).error if ends else None
            if failure is not None:
                _fail(span, failure.code, failure.message)
            else:
                _fail(span, "_OTHER", "the turn failed")
        span.end()

    # --- model calls ------------------------------------------------------------------------

    async def _on_stream(self, call: LlmStreamCall, next: Next) -> Any:
        adapter = await next()
        session_id = call.request.session_id
        turn = self._by_session.get(session_id) if session_id is not None else None
        parent = turn.context if turn is not None else otel_context.get_current()
        return _TracedAdapter(adapter, self, parent, turn)

    def chat_attributes(self, request: GenerateRequest) -> _Attributes:
        config = request.config
        attributes: _Attributes = {
            sc.OPERATION: "chat",
            sc.PROVIDER: config.provider,
            sc.REQUEST_MODEL: config.model,
        }
        if request.session_id is not None:
            attributes[sc.CONVERSATION_ID] = request.session_id
        if config.max_tokens is not None:
            attributes[sc.REQUEST_MAX_TOKENS] = config.max_tokens
        if config.temperature is not None:
            attributes[sc.REQUEST_TEMPERATURE] = config.temperature
        if config.stop:
            attributes[sc.REQUEST_STOP] = list(config.stop)
        if self.capture:
            attributes[sc.INPUT_MESSAGES] = sc.input_messages(request.messages)
            if request.system:
                attributes[sc.SYSTEM_INSTRUCTIONS] = sc.system_instructions(request.system)
            if request.tools:
                attributes[sc.TOOL_DEFINITIONS] = sc.tool_definitions(request.tools)
        return attributes

    # --- tool calls -------------------------------------------------------------------------

    def _start_tool(self, execution: ToolExecution) -> trace.Span:
        turn = self._turns.get(execution.agent) if execution.agent is not None else None
        attributes: _Attributes = {
            sc.OPERATION: "execute_tool",
            sc.TOOL_NAME: execution.name,
            sc.TOOL_CALL_ID: execution.call_id,
            sc.TOOL_TYPE: "function",
        }
        if execution.tool is not None and execution.tool.description:
            attributes[sc.TOOL_DESCRIPTION] = execution.tool.description
        if self.capture:
            attributes[sc.TOOL_CALL_ARGUMENTS] = execution.arguments
        return self.tracer.start_span(
            f"execute_tool {execution.name}",
            context=turn.context if turn is not None else otel_context.get_current(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
        )

    async def _on_pre_execute(self, execution: ToolExecution, next: Next) -> Any:
        key = id(execution)
        if key not in self._tools:
            span = self._start_tool(execution)
            # Detached by tools/result, which the registry emits in this same task.
            token = otel_context.attach(trace.set_span_in_context(span))
            self._tools[key] = _ToolSpan(execution, span, token)
        return await next()

    def _on_tool_result(self, notice: ToolResultNotice) -> None:
        execution = notice.execution
        state = self._tools.pop(id(execution), None)
        if state is not None and state.execution is execution:
            span = state.span
            otel_context.detach(state.token)
        else:
            # An outer tools/pre-execute listener decided without reaching ours.
            span = self._start_tool(execution)
        result = notice.result
        if result.is_error:
            _fail(span, result.code or "TOOL_ERROR")
        if self.capture:
            span.set_attribute(sc.TOOL_CALL_RESULT, result.text)
        span.end()

    # --- unload -----------------------------------------------------------------------------

    def _end_open_spans(self) -> None:
        for state in self._tools.values():
            state.span.end()
        self._tools.clear()
        for turn in self._turns.values():
            turn.span.end()
        self._turns.clear()
        self._by_session.clear()
