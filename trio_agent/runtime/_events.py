"""The event bus: four dispatch modes over one listener table, with scope filtering."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

if TYPE_CHECKING:
    from ._core import Fiber, Scope

__all__ = ["EventBus", "Hook", "Next"]

logger = logging.getLogger("trio_agent.events")

#: The ``next`` argument of a waterfall listener: call it to run the rest of the chain.
Next = Callable[[], Awaitable[Any]]


@final
@attrs.define(eq=False)
class Hook:
    """One registered listener."""

    name: str
    fn: Callable[..., Any]
    scope: Scope | None
    fiber: Fiber

    def delivers_to(self, chain: tuple[Scope, ...]) -> bool:
        """Whether a dispatch aimed at the scope chain ``chain`` reaches this hook."""
        return self.scope is None or self.scope in chain


@final
class EventBus:
    """Listener table shared by every context of one runtime.

    Each name maps to an immutable tuple that is replaced on every change, so a dispatch iterates
    a snapshot for free: listeners added or removed during a dispatch take effect on the next one.

    The async modes are cancellation points (``checkpoint_if_cancelled`` on entry) but yield to
    the scheduler only when a listener or the default does: dispatch sits on the agent loop's hot
    path, and a full checkpoint per dispatch would cost more than the dispatch itself.
    """

    __slots__ = ("_hooks",)

    def __init__(self) -> None:
        self._hooks: dict[str, tuple[Hook, ...]] = {}

    def add(self, hook: Hook, *, prepend: bool) -> None:
        old = self._hooks.get(hook.name, ())
        self._hooks[hook.name] = (hook, *old) if prepend else (*old, hook)

    def remove(self, hook: Hook) -> None:
        old = self._hooks.get(hook.name, ())
        new = tuple(h for h in old if h is not hook)
        if new:
            self._hooks[hook.name] = new
        else:
            self._hooks.pop(hook.name, None)

    def listeners(self, name: str, chain: tuple[Scope, ...]) -> tuple[Hook, ...]:
        """The snapshot of hooks a dispatch of ``name`` aimed at ``chain`` reaches, in order."""
        hooks = self._hooks.get(name, ())
        if not hooks:
            return hooks
        for hook in hooks:
            if hook.scope is not None and hook.scope not in chain:
                return tuple(h for h in hooks if h.delivers_to(chain))
        return hooks

    def count(self, name: str) -> int:
        """Number of listeners registered for ``name`` in every scope."""
        return len(self._hooks.get(name, ()))

    # --- the four modes -------------------------------------------------------------------

    def emit(self, name: str, payload: Any, chain: tuple[Scope, ...]) -> None:
        hooks = self._hooks.get(name)
        if not hooks:
            return
        for hook in hooks:
            if hook.scope is not None and hook.scope not in chain:
                continue
            try:
                result = hook.fn(payload)
                if result is not None and inspect.isawaitable(result):
                    close = getattr(result, "close", None)
                    if close is not None:
                        close()
                    raise TypeError(
                        f"emit listener {_describe(hook.fn)} for {name!r} returned an awaitable; "
                        "emit listeners must be synchronous (start async work with ctx.start_soon)"
                    )
            except Exception:
                logger.exception(
                    "listener %s for %r (fiber %s) raised; the remaining listeners still run",
                    _describe(hook.fn),
                    name,
                    hook.fiber.name,
                )

    async def waterfall(
        self,
        name: str,
        payload: Any,
        default: Callable[[], Awaitable[Any]],
        chain: tuple[Scope, ...],
    ) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        hooks = self.listeners(name, chain)
        if not hooks:
            return await default()

        def level(index: int) -> Next:
            if index == len(hooks):
                return default
            fn = hooks[index].fn

            async def call() -> Any:
                return await fn(payload, level(index + 1))

            return call

        return await level(0)()

    async def serial(self, name: str, payload: Any, chain: tuple[Scope, ...]) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        for hook in self.listeners(name, chain):
            result = hook.fn(payload)
            if result is not None and inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result
        return None

    async def parallel(self, name: str, payload: Any, chain: tuple[Scope, ...]) -> None:
        hooks = self.listeners(name, chain)
        errors: list[Exception] = []

        async def run(hook: Hook) -> None:
            try:
                result = hook.fn(payload)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for hook in hooks:
                nursery.start_soon(run, hook)
        if errors:
            raise ExceptionGroup(f"{len(errors)} listener(s) of {name!r} failed", errors)


def _describe(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
