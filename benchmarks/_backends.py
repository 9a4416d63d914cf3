"""A persistence backend wrapper for the benchmarks: it passes every call through and times
the writes, so a benchmark can count and time flushes without a ``session/flush`` listener of
its own (a second listener puts every flush's dispatch in a nursery)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from trio_agent.ids import SessionId
from trio_agent.persistence import Backend, Position, ReadResult, SessionInfo
from trio_agent.session import SessionEvent, SessionHeader

__all__ = ["TimedBackend"]


class TimedBackend(Backend):
    """``inner`` with the seconds of each ``write`` appended to :attr:`writes`."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        #: The duration of every write so far, in order.
        self.writes: list[float] = []

    def location(self, session_id: SessionId) -> str:
        return self.inner.location(session_id)

    async def read(self, session_id: SessionId) -> ReadResult | None:
        return await self.inner.read(session_id)

    async def exists(self, session_id: SessionId) -> bool:
        return await self.inner.exists(session_id)

    async def infos(self) -> list[SessionInfo]:
        return await self.inner.infos()

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        start = time.perf_counter()
        result = await self.inner.write(header, position, events)
        self.writes.append(time.perf_counter() - start)
        return result

    async def acquire(self, session_id: SessionId) -> None:
        await self.inner.acquire(session_id)

    async def release(self, session_id: SessionId) -> None:
        await self.inner.release(session_id)

    async def aclose(self) -> None:
        await self.inner.aclose()
