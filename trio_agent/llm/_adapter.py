"""The adapter protocol every model backend implements."""

from __future__ import annotations

import contextlib
from typing import Protocol, runtime_checkable

import trio

from ._types import GenerateRequest, StreamChunk

__all__ = ["LlmAdapter"]


@runtime_checkable
class LlmAdapter(Protocol):
    """A model backend: one :meth:`stream` call is one attempt at one model call.

    Use it as::

        async with adapter.stream(request) as chunks:
            async for chunk in chunks:
                ...

    Contract for implementers:

    * ``stream`` returns an async context manager yielding a :class:`trio.abc.ReceiveChannel`
      of :data:`StreamChunk` s. Build it with :func:`trio.as_safe_channel` or as an async context
      manager around a channel - never as a bare async generator that holds a cancel scope or a
      nursery across ``yield`` (PEP 789).
    * The last chunk is a :class:`Finish`; at most one :class:`UsageChunk` comes before it.
      Known failures should be reported as ``Finish("error", failure)`` (or raised as
      :class:`LlmError`); :class:`~trio_agent.llm.LlmService` turns anything else into one too.
    * Cancellation comes from the caller's trio cancel scope. Let :class:`trio.Cancelled`
      propagate and release the connection (shielded, with a deadline) on the way out.
    * No retries inside: retrying is the agent step's decision.
    * The request is read-only: its tool schemas may be shared with later requests (the loop
      sends the tools registry's snapshots), so copy a schema's ``parameters`` before changing
      anything in them.
    """

    @property
    def name(self) -> str:
        """The provider name requests route by (``LlmCallConfig.provider``)."""
        ...

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Start one model call; see the class docstring."""
        ...
