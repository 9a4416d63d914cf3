"""The probes: public listeners that record what a run did into its :class:`RunRecord`.

They are registered on the root context before the scenario's own plugins, so they hear every
agent and wrap every tool call and model stream (as the outermost layer of ``tools/execute`` and
``llm/stream``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, final

import trio

from ...agent import MessageQueued, StatusChanged, TurnEnded, TurnStarted
from ...llm import GenerateRequest, LlmAdapter, LlmStreamCall, StreamChunk, ToolResult
from ...runtime import Context
from ...session import SessionCreated
from ...tools import ToolExecution
from ._observer import Observer
from ._records import LoggedError, QueuedPrompt, RunRecord

__all__ = ["install_probes"]

_MISNESTING = "Cancel scope stack corrupted"


def install_probes(ctx: Context, record: RunRecord, observer: Observer) -> None:
    """Register the probes on ``ctx`` (global listeners: they hear every agent)."""

    def on_session(event: SessionCreated) -> None:
        record.sessions.append(event.session)

    def on_status(event: StatusChanged) -> None:
        record.trace_of(event.agent).statuses.append(event.status)

    def on_queued(event: MessageQueued) -> None:
        prompt = QueuedPrompt(str(event.message.id), event.steering, record.mark())
        record.trace_of(event.agent).queued.append(prompt)

    def on_turn_start(event: TurnStarted) -> None:
        record.trace_of(event.agent).turn_starts.append(record.mark())

    def on_turn_end(event: TurnEnded) -> None:
        record.trace_of(event.agent).turn_ends[event.turn] = (event.reason, trio.current_time())

    async def watch_tool(
        execution: ToolExecution, next: Callable[[], Awaitable[ToolResult]]
    ) -> ToolResult:
        task = trio.lowlevel.current_task()
        before = observer.deliveries.get(task, 0)
        with _misnesting_caught(record, f"tool {execution.name!r} (call {execution.call_id!r})"):
            result = await next()
        # Reaching here with our scope still cancelled after a cancel was delivered to this
        # task means the body caught trio.Cancelled and carried on.
        if (
            observer.deliveries.get(task, 0) > before
            and trio.current_effective_deadline() == -math.inf
        ):
            outcome = f"an error ({result.code})" if result.is_error else "a result"
            record.swallowed.append(
                f"tool {execution.name!r} (call {execution.call_id!r}) produced {outcome} after "
                "trio.Cancelled reached it; let Cancelled propagate (cleanup goes in finally)"
            )
        return result

    async def watch_stream(call: LlmStreamCall, next: Callable[[], Awaitable[Any]]) -> Any:
        return _WatchedAdapter(await next(), record)

    ctx.on("session/created", on_session)
    ctx.on("agent/created", lambda event: record.trace_of(event.agent))
    ctx.on("agent/status", on_status)
    ctx.on("agent/queued", on_queued)
    ctx.on("agent/turn-start", on_turn_start)
    ctx.on("agent/turn-end", on_turn_end)
    ctx.on("tools/execute", watch_tool)
    ctx.on("llm/stream", watch_stream)


@final
class _WatchedAdapter:
    """An adapter wrapper that checks the channel its adapter yielded is closed afterwards."""

    def __init__(self, inner: LlmAdapter, record: RunRecord) -> None:
        self._inner = inner
        self._record = record
        self.name = inner.name

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        return self._stream(request)

    @contextlib.asynccontextmanager
    async def _stream(
        self, request: GenerateRequest
    ) -> AsyncIterator[trio.abc.ReceiveChannel[StreamChunk]]:
        channel: trio.abc.ReceiveChannel[StreamChunk] | None = None
        try:
            with _misnesting_caught(self._record, f"model adapter {self.name!r}"):
                async with self._inner.stream(request) as channel:
                    yield channel
        finally:
            if channel is not None and _still_open(channel):
                self._record.open_streams.append(
                    f"model adapter {self.name!r} left its stream's channel open after "
                    "stream() exited; close it on the way out (async with / finally)"
                )


@contextlib.contextmanager
def _misnesting_caught(record: RunRecord, what: str) -> Iterator[None]:
    """Run the block in a cancel scope of the kit's own. A layer inside that leaves its own
    scope entered (to be exited later, maybe by another task) makes this scope's exit report
    trio's "Cancel scope stack corrupted"; the error is recorded and the block's own outcome
    (its ``Cancelled``, if any) goes on; this names the tool or adapter that misnested."""
    try:
        with trio.CancelScope():
            yield
    except RuntimeError as exc:
        if _MISNESTING not in str(exc):
            raise
        record.errors.append(LoggedError(__name__, f"{what}: {exc}".splitlines()[0], exc))
        if isinstance(exc.__context__, trio.Cancelled):
            raise exc.__context__ from None


def _still_open(channel: object) -> bool:
    """Whether a trio memory channel is still open (other channel types are not judged)."""
    probe = getattr(channel, "receive_nowait", None)
    if not callable(probe):
        return False
    try:
        probe()
    except trio.ClosedResourceError:
        return False
    except (trio.WouldBlock, trio.EndOfChannel):
        return True
    except Exception:
        return False
    return True
