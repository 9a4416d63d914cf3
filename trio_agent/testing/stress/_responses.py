"""Model responses as plain values (printable in a replay snippet), and the model that plays them."""

from __future__ import annotations

import collections
import contextlib
from typing import final

import attrs
import trio

from ...llm import GenerateRequest, StreamChunk
from .. import (
    ScriptedAdapter,
    ScriptedResponse,
    error,
    hang,
    max_tokens,
    reasoning,
    text,
    tool_call,
)
from ._snippet import short_repr

__all__ = [
    "CallTools",
    "Fail",
    "Hang",
    "MaxTokens",
    "QueueModel",
    "Reply",
    "ResponseSpec",
    "ToolCallSpec",
]


class ResponseSpec:
    """One model response, as a value: :meth:`build` makes the
    :class:`~trio_agent.testing.ScriptedResponse` it stands for."""

    def build(self) -> ScriptedResponse:
        """The scripted response this value describes."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return short_repr(self)


@attrs.frozen(repr=False)
class Reply(ResponseSpec):
    """A text answer streamed in ``pieces``, after an optional reasoning block."""

    pieces: tuple[str, ...] = ("ok",)
    reasoning: tuple[str, ...] = ()

    def build(self) -> ScriptedResponse:
        answer = text(*self.pieces)
        return reasoning(*self.reasoning) + answer if self.reasoning else answer


@attrs.frozen(repr=False)
class ToolCallSpec:
    """One tool call: its id (possibly repeated or empty), tool name, raw JSON arguments text
    and the number of argument deltas it streams in."""

    id: str
    name: str
    arguments: str = "{}"
    chunks: int = 1

    def __repr__(self) -> str:
        return short_repr(self)


@attrs.frozen(repr=False)
class CallTools(ResponseSpec):
    """An answer asking for ``calls`` (in order), after optional text ``pieces``."""

    calls: tuple[ToolCallSpec, ...]
    pieces: tuple[str, ...] = ()

    def build(self) -> ScriptedResponse:
        response = text(*self.pieces)
        for call in self.calls:
            response = response + tool_call(call.id, call.name, call.arguments, chunks=call.chunks)
        return response


@attrs.frozen(repr=False)
class MaxTokens(ResponseSpec):
    """An answer cut off by the output-token limit."""

    pieces: tuple[str, ...] = ("cut",)

    def build(self) -> ScriptedResponse:
        return max_tokens(*self.pieces)


@attrs.frozen(repr=False)
class Fail(ResponseSpec):
    """A failed model call with failure ``code`` (``retry_after`` seconds, optional partial
    text first)."""

    code: str = "SERVER"
    retry_after: float | None = None
    partial: tuple[str, ...] = ()

    def build(self) -> ScriptedResponse:
        return error(self.code, retry_after=self.retry_after, partial=self.partial or None)


@attrs.frozen(repr=False)
class Hang(ResponseSpec):
    """A stream that sends ``partial`` text, then waits until it is cancelled."""

    partial: tuple[str, ...] = ()

    def build(self) -> ScriptedResponse:
        return hang(self.partial or None)


@final
class QueueModel:
    """The state machine's model adapter (name ``"stress"``): each request is answered by the
    next queued :class:`ResponseSpec`, or by a short :class:`Reply` when none is queued."""

    def __init__(self, name: str = "stress", *, delay: float = 0.0) -> None:
        self.name = name
        self.delay = delay
        self.queue: collections.deque[ResponseSpec] = collections.deque()

    def push(self, response: ResponseSpec) -> None:
        """Queue ``response`` for a later request."""
        self.queue.append(response)

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Play the next queued response."""
        response = self.queue.popleft() if self.queue else Reply()
        adapter = ScriptedAdapter(name=self.name, responses=[response.build()], delay=self.delay)
        return adapter.stream(request)
