"""``ctx.llm``: the adapter registry and the guarded ``llm/stream`` pipeline."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, final

import attrs
import trio

from ..redaction import Redactor
from ..runtime import Context, Disposer, Service
from ._adapter import LlmAdapter
from ._assembler import BlockAssembler
from ._errors import AdapterConflictError, NoAdapterError
from ._groups import raise_single
from ._models import ModelList, ModelSpec, to_model_list
from ._retry import RetryPolicy
from ._types import (
    BlockEnd,
    BlockStart,
    Finish,
    GenerateRequest,
    LlmError,
    LlmFailure,
    Message,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

__all__ = ["Generation", "LlmService", "LlmStreamCall"]

logger = logging.getLogger("trio_agent.llm")

_DELTA_TYPES = (TextDelta, ReasoningDelta, ToolCallDelta, BlockStart, BlockEnd)
_DEFAULT_POLICY = RetryPolicy()


@final
@attrs.define(eq=False)
class LlmStreamCall:
    """The payload of the ``llm/stream`` waterfall.

    A listener ``async def listener(call, next) -> LlmAdapter`` may replace :attr:`request`
    before ``await next()`` (to re-route to another provider or model, or rewrite messages), or
    return an adapter of its own instead of calling ``next()`` (short-circuit), or wrap the
    adapter ``next()`` returns. The innermost ``next()`` returns the adapter registered under
    ``call.request.config.provider`` (one that fails with ``NO_ADAPTER`` if there is none).
    """

    request: GenerateRequest


@attrs.frozen
class Generation:
    """The outcome of :meth:`LlmService.generate`: the assembled message, usage and finish."""

    message: Message
    usage: Usage | None
    finish: Finish


@final
@attrs.define(eq=False)
class _Route:
    adapter: LlmAdapter
    policy: RetryPolicy
    models: ModelList


@final
class _Unavailable:
    """The adapter ``next()`` answers with when no adapter serves the provider."""

    #: Raising from ``stream`` starts no task: the guard may run it inline.
    streams_inline = True

    def __init__(self, provider: str, registered: tuple[str, ...]) -> None:
        self.name = provider
        self._registered = registered

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        raise NoAdapterError(self.name, self._registered)


@final
class LlmService(Service, name="llm"):
    """``ctx.llm``: register adapters by name and stream model calls through them.

    :meth:`stream` is the one way the rest of the harness calls a model. It runs the
    ``llm/stream`` waterfall (see :class:`LlmStreamCall`) to pick the adapter, then guards the
    adapter's stream so that the caller always sees a well-formed one:

    * every adapter failure - no adapter (``NO_ADAPTER``, naming the registered adapters), an
      exception while opening or reading the stream (an :class:`LlmError` gives its
      ``failure``; anything else becomes ``UNKNOWN`` with the exception text), or a stream
      that ends without :class:`Finish` (``STREAM_CLOSED``) - becomes exactly one final
      ``Finish("error", failure)``;
    * the last chunk is always a :class:`Finish`, nothing follows it, and at most one
      :class:`UsageChunk` (the latest the adapter reported) comes right before it;
    * exceptions raised by ``llm/stream`` listeners propagate to the caller unchanged: they
      are plugin bugs, not model failures.

    Cancellation: the stream belongs to the caller's trio cancel scope. When that scope is
    cancelled, :class:`trio.Cancelled` propagates out of ``receive()`` and the ``async with``;
    it is never turned into a chunk inside the cancelled scope and never swallowed, and the
    adapter's connection is released on the way out. ``Finish("aborted")`` appears only when an
    adapter itself reports an abort (or raises an :class:`LlmError` with code ``ABORTED``). To
    record what a cancelled call had produced, keep a :class:`BlockAssembler` and ask it for
    :meth:`~BlockAssembler.interrupted_message` after the cancelled scope has exited.
    """

    def __init__(self, ctx: Context, config: Any = None) -> None:
        super().__init__(ctx, config)
        self._routes: dict[str, _Route] = {}

    # --- registry ---------------------------------------------------------------------------

    def register(
        self,
        adapter: LlmAdapter,
        *,
        retry_policy: RetryPolicy | None = None,
        models: Iterable[str | ModelSpec] = (),
    ) -> Disposer:
        """Serve requests whose ``config.provider`` is ``adapter.name`` with ``adapter``.

        The registration belongs to the calling context's fiber: it is undone when that plugin
        unloads, or earlier by calling the returned disposer. ``retry_policy`` is what
        :meth:`retry_policy` answers for this provider; ``models`` (names or
        :class:`ModelSpec` s) is what :meth:`context_window` knows about its models.

        Raises:
            AdapterConflictError: an adapter with the same name is already registered.
            TypeError: ``adapter`` does not implement :class:`LlmAdapter`.
        """
        if not isinstance(adapter, LlmAdapter):
            raise TypeError(
                f"ctx.llm.register() expects an LlmAdapter (a 'name' and a 'stream(request)' "
                f"method), got {type(adapter).__name__}"
            )
        name = adapter.name
        if name in self._routes:
            raise AdapterConflictError(
                f"an LLM adapter named {name!r} is already registered; unregister it first "
                "(dispose the plugin that registered it) or give this adapter another name"
            )
        route = _Route(adapter, retry_policy or _DEFAULT_POLICY, to_model_list(models))
        self.caller.fiber.check_active("register an LLM adapter on")
        self._routes[name] = route

        def unregister() -> None:
            if self._routes.get(name) is route:
                del self._routes[name]

        return self.caller.defer(unregister, label=f"llm adapter {name}")

    def get(self, name: str) -> LlmAdapter | None:
        """The adapter registered under ``name``, or ``None``."""
        route = self._routes.get(name)
        return None if route is None else route.adapter

    def names(self) -> tuple[str, ...]:
        """The registered adapter names, in registration order."""
        return tuple(self._routes)

    def retry_policy(self, name: str) -> RetryPolicy:
        """The retry policy registered with adapter ``name`` (the default policy otherwise)."""
        route = self._routes.get(name)
        return _DEFAULT_POLICY if route is None else route.policy

    def context_window(self, provider: str, model: str) -> int | None:
        """The context window (tokens) configured for ``model`` on ``provider``, or ``None``."""
        route = self._routes.get(provider)
        return None if route is None else route.models.context_window(model)

    # --- calls ------------------------------------------------------------------------------

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Call the model: an async context manager yielding a channel of chunks.

        ::

            async with ctx.llm.stream(request) as chunks:
                async for chunk in chunks:
                    ...

        See the class docstring for failures and cancellation.
        """
        return _StreamCall(self, request)

    async def _adapter_for(self, request: GenerateRequest) -> tuple[LlmAdapter, GenerateRequest]:
        """The adapter the ``llm/stream`` listeners choose for ``request`` (by default the
        provider's), and the request as they left it. Unheard, :class:`_StreamCall` takes the
        provider's adapter itself."""
        caller = self.caller
        call = LlmStreamCall(request)
        chosen: list[LlmAdapter] = []

        async def default() -> LlmAdapter:
            adapter = self._registered_for(call.request)
            chosen.append(adapter)
            return adapter

        adapter = await caller.waterfall("llm/stream", call, default)
        # The default's answer was checked at register(); only a listener's needs the (slow,
        # runtime-Protocol) isinstance check.
        if not (chosen and adapter is chosen[0]) and not isinstance(adapter, LlmAdapter):
            raise TypeError(
                f"an 'llm/stream' listener returned {type(adapter).__name__}; listeners must "
                "return an LlmAdapter (usually the result of 'await next()')"
            )
        return adapter, call.request

    def _registered_for(self, request: GenerateRequest) -> LlmAdapter:
        """The adapter registered for the request's provider (one failing with ``NO_ADAPTER``
        when there is none)."""
        provider = request.config.provider
        route = self._routes.get(provider)
        return _Unavailable(provider, tuple(self._routes)) if route is None else route.adapter

    async def generate(self, request: GenerateRequest) -> Generation:
        """Call the model and wait for the whole answer (failures are in ``finish``)."""
        assembler = BlockAssembler()
        async with self.stream(request) as chunks:
            async for chunk in chunks:
                assembler.feed(chunk)
        return Generation(assembler.message(), assembler.usage, assembler.finish)


def _failure_of(exc: BaseException, adapter: LlmAdapter) -> LlmFailure:
    # Unwrap groups of one (an adapter's nursery) to report the real error.
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, LlmError):
        return exc.failure
    name = _adapter_name(adapter)
    logger.warning("LLM adapter %r raised; reporting it as an error finish", name, exc_info=exc)
    text = str(exc) or type(exc).__name__
    return LlmFailure("UNKNOWN", f"LLM adapter {name!r} failed: {type(exc).__name__}: {text}")


def _adapter_name(adapter: LlmAdapter) -> str:
    try:
        return str(adapter.name)
    except Exception:
        return type(adapter).__name__


def _final(finish: Finish) -> Finish:
    if finish.reason == "error" and finish.failure is None:
        return Finish(
            "error", LlmFailure("UNKNOWN", "the adapter reported an error without details")
        )
    if finish.reason == "aborted" and finish.failure is None:
        return Finish("aborted", LlmFailure("ABORTED", "the adapter aborted the call"))
    return finish


def _redacted(finish: Finish, redactor: Redactor | None) -> Finish:
    """``finish`` with the secrets masked in every field of its failure (issue 15)."""
    if redactor is None or finish.failure is None:
        return finish
    return attrs.evolve(finish, failure=redactor.redact_failure(finish.failure))


def _finish_for(failure: LlmFailure) -> Finish:
    return Finish("aborted" if failure.code == "ABORTED" else "error", failure)


_DELTA_SET: frozenset[type] = frozenset(_DELTA_TYPES)


def _stream_closed(adapter: LlmAdapter) -> Finish:
    return Finish(
        "error",
        LlmFailure(
            "STREAM_CLOSED",
            f"the stream of LLM adapter {_adapter_name(adapter)!r} ended without a finish",
        ),
    )


@final
class _InlineChannel(trio.abc.ReceiveChannel[StreamChunk]):
    """The normalised stream of an adapter that runs no background task, read in the caller's
    task: the same chunks, in the same order, as :func:`_guarded`'s pump would deliver."""

    __slots__ = ("_adapter", "_closed", "_exit", "_redactor", "_source", "_tail", "_usage")

    def __init__(self, adapter: LlmAdapter, redactor: Redactor | None = None) -> None:
        self._adapter = adapter
        self._redactor = redactor
        self._source: trio.abc.ReceiveChannel[StreamChunk] | None = None
        #: The adapter's stream context, while it is open.
        self._exit: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._usage: UsageChunk | None = None
        #: Chunks still to deliver once the adapter's stream has ended (usage, finish).
        self._tail: list[StreamChunk] | None = None
        self._closed = False

    async def _end(self, finish: Finish | None, exc: BaseException | None) -> None:
        """The adapter's stream is over: close it, then queue ``[usage,] finish``.

        ``finish`` is the adapter's own (it stands even if closing fails); otherwise ``exc``
        (the error that ended the stream, or ``None`` for a stream that just stopped) decides.
        """
        manager, self._exit = self._exit, None
        if manager is not None:
            try:
                if exc is None:
                    await manager.__aexit__(None, None, None)
                else:
                    await manager.__aexit__(type(exc), exc, exc.__traceback__)
            except Exception as close_exc:
                if finish is not None:
                    logger.warning(
                        "LLM adapter %r failed while closing a finished stream; the finish stands",
                        _adapter_name(self._adapter),
                        exc_info=close_exc,
                    )
                else:
                    exc = close_exc
        if finish is None:
            finish = (
                _stream_closed(self._adapter)
                if exc is None
                else _finish_for(_failure_of(exc, self._adapter))
            )
        finish = _redacted(finish, self._redactor)
        usage = self._usage
        self._tail = [finish] if usage is None else [finish, usage]

    async def receive(self) -> StreamChunk:
        if self._closed:
            raise trio.ClosedResourceError("this model stream was closed")
        tail = self._tail
        source = self._source
        while tail is None and source is not None:
            try:
                chunk = await source.receive()
            except trio.EndOfChannel:
                await self._end(None, None)
            except Exception as exc:
                await self._end(None, exc)
            else:
                if type(chunk) in _DELTA_SET:
                    return chunk
                value: object = chunk  # the adapter is untrusted: check what it yielded
                if isinstance(value, _DELTA_TYPES):
                    return value
                if isinstance(value, UsageChunk):
                    self._usage = value
                    continue
                if isinstance(value, Finish):
                    await self._end(_final(value), None)
                else:
                    await self._end(
                        None,
                        TypeError(
                            f"the stream yielded {type(value).__name__}; adapters must yield "
                            "StreamChunk values"
                        ),
                    )
            tail = self._tail
        await trio.lowlevel.checkpoint()
        if not tail:
            raise trio.EndOfChannel
        return tail.pop()

    async def open(self, request: GenerateRequest) -> None:
        """Open the adapter's stream; a failure to open becomes the final chunk."""
        try:
            manager = self._adapter.stream(request)
            source = await manager.__aenter__()
        except Exception as exc:
            await self._end(None, exc)
            return
        self._exit = manager
        self._source = source

    def release(self) -> contextlib.AbstractAsyncContextManager[Any] | None:
        """Close this channel; return the adapter's stream context if the consumer left before
        its end (:meth:`finish` exits it), ``None`` when it ended and closed already - the
        common exit, which makes no coroutine."""
        self._closed = True
        manager, self._exit = self._exit, None
        return manager

    async def finish(
        self, manager: contextlib.AbstractAsyncContextManager[Any], exc: BaseException | None
    ) -> None:
        """Exit the adapter's stream context that :meth:`release` handed back."""
        if exc is None:
            try:
                await manager.__aexit__(None, None, None)
            except Exception as close_exc:
                logger.warning(
                    "LLM adapter %r failed while closing a stream the caller left early",
                    _adapter_name(self._adapter),
                    exc_info=close_exc,
                )
            return
        try:
            await manager.__aexit__(type(exc), exc, exc.__traceback__)
        except Exception as close_exc:
            if close_exc is not exc:
                logger.warning(
                    "LLM adapter %r failed while closing an abandoned stream",
                    _adapter_name(self._adapter),
                    exc_info=close_exc,
                )

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self._closed = True
        await trio.lowlevel.checkpoint()


@final
class _StreamCall:
    """What :meth:`LlmService.stream` returns: on entry the ``llm/stream`` waterfall picks the
    adapter, then the inline guard or the pump guard runs it. A class, not a generator-based
    context manager: it is entered once per model call."""

    __slots__ = ("_inline", "_pumped", "_request", "_service")

    def __init__(self, service: LlmService, request: GenerateRequest) -> None:
        self._service = service
        self._request = request
        #: Once entered, one of: the inline channel (read in the caller's task), or the pump
        #: guard's context.
        self._inline: _InlineChannel | None = None
        self._pumped: (
            contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]] | None
        ) = None

    async def __aenter__(self) -> trio.abc.ReceiveChannel[StreamChunk]:
        if self._inline is not None or self._pumped is not None:
            raise RuntimeError("a ctx.llm.stream(...) context is entered once; call stream again")
        service = self._service
        if service.caller.hears("llm/stream"):
            adapter, request = await service._adapter_for(self._request)
        else:
            # Unheard (#17): the waterfall's cancellation point, then its default - no payload,
            # closure or coroutine. Opening the adapter's stream is the schedule point.
            await trio.lowlevel.checkpoint_if_cancelled()
            adapter, request = service._registered_for(self._request), self._request
        redactor = service.ctx.get(Redactor)
        if getattr(type(adapter), "streams_inline", False) is True:
            # No pump task, nursery, memory channel or generator-based context manager: the
            # adapter's stream is read in the caller's task and its failures become the final
            # chunk exactly as _guarded makes them. The caller's own exception (Cancelled
            # included) reaches the adapter's stream on the way out, then propagates as itself.
            self._inline = channel = _InlineChannel(adapter, redactor)
            await channel.open(request)
            return channel
        guard = _guarded(adapter, request, redactor)
        chunks = await guard.__aenter__()
        self._pumped = guard
        return chunks

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool | None:
        inline = self._inline
        if inline is not None:
            manager = inline.release()
            if manager is not None:
                await inline.finish(manager, exc)
            return None
        assert self._pumped is not None, "exited without being entered"
        return await self._pumped.__aexit__(kind, exc, tb)


#: How many chunks the pump may read ahead of the consumer.
_READ_AHEAD = 64


@contextlib.asynccontextmanager
async def _guarded(
    adapter: LlmAdapter, request: GenerateRequest, redactor: Redactor | None = None
) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
    """Run the adapter's stream in a pump task and hand the caller a normalised channel.

    The adapter runs in its own task so that an adapter failing mid-stream (for example an
    ``as_safe_channel`` one, whose nursery cancels its body and re-raises at exit) surfaces
    in the pump, where it becomes a final chunk, instead of tearing through the caller.

    Exceptions: the body's own exception (including ``Cancelled``) propagates as itself, not
    wrapped in a group; the pump never raises (except ``Cancelled``).
    """
    send, receive = trio.open_memory_channel[StreamChunk](_READ_AHEAD)
    body_error: BaseException | None = None
    pump = _Pump(adapter, request, send, redactor)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump.run, name=f"llm stream {_adapter_name(adapter)}")
            with receive:
                try:
                    yield receive
                except BaseException as exc:
                    body_error = exc
                    raise
            if not pump.finished:
                nursery.cancel_scope.cancel()
            # else: a consumer that left after the Finish lets the pump close the adapter, as
            # reading on to the end of the channel would have (the loop stops at the Finish).
    except BaseExceptionGroup as group:
        raise_single(group, body_error)
    finally:
        body_error = None


async def _put(send: trio.MemorySendChannel[StreamChunk], chunk: StreamChunk) -> bool:
    """Queue ``chunk`` for the consumer; False once the consumer has gone away."""
    try:
        send.send_nowait(chunk)
    except trio.WouldBlock:
        try:
            await send.send(chunk)
        except trio.BrokenResourceError:
            return False
    except trio.BrokenResourceError:
        return False
    return True


@final
class _Pump:
    """Reads the adapter's stream into the consumer's channel; ``finished`` once the final
    chunk is queued."""

    __slots__ = ("_adapter", "_redactor", "_request", "_send", "finished")

    def __init__(
        self,
        adapter: LlmAdapter,
        request: GenerateRequest,
        send: trio.MemorySendChannel[StreamChunk],
        redactor: Redactor | None,
    ) -> None:
        self._adapter = adapter
        self._request = request
        self._send = send
        self._redactor = redactor
        self.finished = False

    async def run(self) -> None:
        adapter, redactor, send = self._adapter, self._redactor, self._send
        with send:
            usage: UsageChunk | None = None
            finish: Finish | None = None
            try:
                async with adapter.stream(self._request) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, _DELTA_TYPES):
                            if not await _put(send, chunk):
                                return
                        elif isinstance(chunk, UsageChunk):
                            usage = chunk
                        elif isinstance(chunk, Finish):
                            finish = _redacted(_final(chunk), redactor)
                            # Deliver the end now; the adapter is closed while the consumer
                            # reads it.
                            if usage is not None and not await _put(send, usage):
                                return
                            self.finished = await _put(send, finish)
                            break
                        else:
                            raise TypeError(
                                f"the stream yielded {type(chunk).__name__}; adapters must "
                                "yield StreamChunk values"
                            )
            except Exception as exc:
                if finish is not None:
                    logger.warning(
                        "LLM adapter %r failed while closing a finished stream; the finish stands",
                        _adapter_name(adapter),
                        exc_info=exc,
                    )
                    return
                finish = _redacted(_finish_for(_failure_of(exc, adapter)), redactor)
            else:
                if finish is not None:
                    return
                finish = Finish(
                    "error",
                    LlmFailure(
                        "STREAM_CLOSED",
                        f"the stream of LLM adapter {_adapter_name(adapter)!r} ended without a "
                        "finish",
                    ),
                )
            if usage is not None and not await _put(send, usage):
                return
            self.finished = await _put(send, finish)
