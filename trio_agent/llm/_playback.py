"""A receive channel that plays back precomputed chunks (no background task)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import final

import trio

from ._types import GenerateRequest, StreamChunk

__all__ = ["Playback", "PlaybackStream"]


@final
class Playback(trio.abc.ReceiveChannel[StreamChunk]):
    """Deliver ``chunks`` one per :meth:`receive`, each after ``delay`` seconds (or at least a
    checkpoint); then hang forever if ``hang``, raise ``error`` if given, else end."""

    __slots__ = ("_chunks", "_closed", "_delay", "_error", "_hang", "_pos")

    def __init__(
        self,
        chunks: Sequence[StreamChunk],
        *,
        delay: float = 0.0,
        hang: bool = False,
        error: BaseException | None = None,
    ) -> None:
        self._chunks = chunks
        self._delay = delay
        self._hang = hang
        self._error = error
        self._pos = 0
        self._closed = False

    async def receive(self) -> StreamChunk:
        if self._closed:
            raise trio.ClosedResourceError("this scripted stream was closed")
        if self._pos < len(self._chunks):
            if self._delay > 0:
                await trio.sleep(self._delay)
            else:
                await trio.lowlevel.checkpoint()
            chunk = self._chunks[self._pos]
            self._pos += 1
            return chunk
        if self._hang:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        error, self._error = self._error, None
        if error is not None:
            raise error
        raise trio.EndOfChannel

    def close(self) -> None:
        """Close without a checkpoint (for ``finally`` blocks)."""
        self._closed = True

    async def aclose(self) -> None:
        self._closed = True
        await trio.lowlevel.checkpoint()


@final
class PlaybackStream:
    """What an adapter's ``stream(request)`` returns when its answer is precomputed: on entry a
    checkpoint, then ``play(request)``'s :class:`Playback`, closed on exit. A class, not a
    generator-based context manager: the loop opens one per step (#17)."""

    __slots__ = ("_channel", "_play", "_request")

    def __init__(
        self, play: Callable[[GenerateRequest], Playback], request: GenerateRequest
    ) -> None:
        self._play = play
        self._request = request
        self._channel: Playback | None = None

    async def __aenter__(self) -> Playback:
        await trio.lowlevel.checkpoint()
        self._channel = self._play(self._request)
        return self._channel

    async def __aexit__(self, *exc_info: object) -> None:
        if self._channel is not None:
            self._channel.close()
