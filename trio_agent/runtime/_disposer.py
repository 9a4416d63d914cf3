"""Single-shot teardown handles."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import final

import trio

__all__ = ["Disposer", "Teardown"]

#: What a disposer runs: a sync callable, or an async callable / callable returning an awaitable.
Teardown = Callable[[], object]


@final
class Disposer:
    """A handle that undoes one registration or effect, exactly once.

    Every registration in trio-agent returns one (``ctx.on``, ``ctx.effect``, ``ctx.provide``,
    ``tools.register`` ...). Call it to undo the registration early; the owning fiber calls it
    otherwise, in LIFO order, when it unloads.

    * ``off()`` runs a synchronous teardown on the spot. For an async teardown it raises
      :class:`TypeError`: use ``await off.aclose()``.
    * ``await off.aclose()`` works for both kinds. Concurrent and later calls wait for the first
      one to finish and never run the teardown twice.
    """

    __slots__ = ("_done", "_finished", "_on_done", "_running", "_teardown", "is_async", "label")

    def __init__(
        self,
        teardown: Teardown | None,
        *,
        label: str = "",
        is_async: bool | None = None,
    ) -> None:
        self._teardown = teardown
        self.label = label
        #: True when the teardown must be awaited (``aclose()`` only).
        self.is_async = (
            bool(teardown is not None and _looks_async(teardown)) if is_async is None else is_async
        )
        self._done = False
        self._running = False
        self._finished: trio.Event | None = None
        #: Called once, after the teardown ran; the owning fiber uses it to forget the handle.
        self._on_done: Callable[[Disposer], None] | None = None

    def __repr__(self) -> str:
        state = "done" if self._done else ("running" if self._running else "armed")
        return f"<Disposer {self.label or '?'} {state}>"

    @property
    def disposed(self) -> bool:
        """True once the teardown has started (it never runs again)."""
        return self._done or self._running

    def __call__(self) -> None:
        """Run a synchronous teardown now (no-op when already disposed)."""
        if self._done or self._running:
            return
        if self.is_async:
            raise TypeError(
                f"disposer {self.label or '?'} has an async teardown; use 'await off.aclose()'"
            )
        self._running = True
        try:
            result = self._teardown() if self._teardown is not None else None
            if inspect.isawaitable(result):
                _discard(result)
                raise TypeError(
                    f"disposer {self.label or '?'} returned an awaitable from a sync call; "
                    "use 'await off.aclose()'"
                )
        finally:
            self._finish()

    async def aclose(self) -> None:
        """Run the teardown (sync or async), or wait for the run already in progress."""
        if self._done:
            await trio.lowlevel.checkpoint()
            return
        if self._running:
            if self._finished is None:
                self._finished = trio.Event()
            await self._finished.wait()
            return
        self._running = True
        try:
            result = self._teardown() if self._teardown is not None else None
            if inspect.isawaitable(result):
                await result
            else:
                await trio.lowlevel.checkpoint()
        finally:
            self._finish()

    def release(self) -> None:
        """Forget this registration without running its teardown.

        For a resource that went away by other means (an agent that closed itself): the owner
        stops holding the disposer, so owners that outlive many such resources do not grow.
        """
        if not (self._done or self._running):
            self._finish()

    def _finish(self) -> None:
        self._done = True
        self._running = False
        self._teardown = None
        if self._finished is not None:
            self._finished.set()
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(self)


def _looks_async(fn: Callable[..., object]) -> bool:
    if isinstance(fn, Disposer):
        return fn.is_async
    return inspect.iscoroutinefunction(fn)


def _discard(awaitable: Awaitable[object]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
