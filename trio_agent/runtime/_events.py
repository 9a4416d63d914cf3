"""The event bus: four dispatch modes over one listener table, with scope filtering."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any, Protocol, final

import attrs
import trio

__all__ = ["EventBus", "Hook", "Next"]

logger = logging.getLogger("trio_agent.events")

#: The ``next`` argument of a waterfall listener: call it to run the rest of the chain.
Next = Callable[[], Awaitable[Any]]


class _Owner(Protocol):
    """What a hook needs of the fiber that registered it: a name for log messages."""

    @property
    def name(self) -> str: ...


@final
@attrs.define(eq=False)
class Hook:
    """One registered listener.

    The bus knows scopes (``_core.Scope``) only by identity and fibers only by name, so it does
    not import ``_core`` (which imports the bus).
    """

    name: str
    fn: Callable[..., Any]
    scope: Hashable | None
    fiber: _Owner

    def delivers_to(self, chain: tuple[Hashable, ...]) -> bool:
        """Whether a dispatch aimed at the scope chain ``chain`` reaches this hook."""
        return self.scope is None or self.scope in chain


WATERFALL_EVENTS: frozenset[str] = frozenset(
    {
        "agent/prompt-submit",
        "agent/session-prefix",
        "agent/request",
        "agent/request-error",
        "agent/step-result",
        "agent/turn-continuation",
        "tools/pre-execute",
        "tools/execute",
        "tools/post-execute",
        "llm/stream",
        "system-prompt/assemble",
    }
)
"""The library's waterfall events: ``ctx.on`` rejects a synchronous listener for any of them."""


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (``async def``, also through a partial or an
    ``async def __call__``)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    method = getattr(type(fn), "__call__", None)  # noqa: B004 - the class's own method
    return method is not None and inspect.iscoroutinefunction(method)


@final
class EventBus:
    """Listener table shared by every context of one runtime.

    Each name maps to an immutable tuple that is replaced on every change, so a dispatch iterates
    a snapshot for free: listeners added or removed during a dispatch take effect on the next one.

    The async modes are cancellation points (``checkpoint_if_cancelled`` on entry) but yield to
    the scheduler only when a listener or the default does: dispatch sits on the agent loop's hot
    path, and a full checkpoint per dispatch would cost more than the dispatch itself.
    """

    __slots__ = ("_hooks", "_waterfalls", "table")

    def __init__(self) -> None:
        self._hooks: dict[str, tuple[Hook, ...]] = {}
        #: The listener table itself, read-only for callers: a name is a key only while it has
        #: at least one listener, and the dict object never changes, so a context may keep a
        #: reference and answer "does anyone listen?" with one ``in`` test (#17).
        self.table: Mapping[str, tuple[Hook, ...]] = self._hooks
        self._waterfalls: set[str] = set(WATERFALL_EVENTS)

    def is_waterfall(self, name: str) -> bool:
        """Whether ``name`` is a library waterfall event or has been dispatched as one."""
        return name in self._waterfalls

    def note_waterfall(self, name: str) -> None:
        """Remember that ``name`` was dispatched as a waterfall (its listeners must be async)."""
        if name not in self._waterfalls:
            self._waterfalls.add(name)

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

    def listeners(self, name: str, chain: tuple[Hashable, ...]) -> tuple[Hook, ...]:
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

    def emit(self, name: str, payload: Any, chain: tuple[Hashable, ...]) -> None:
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
        chain: tuple[Hashable, ...],
    ) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        self.note_waterfall(name)
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

    async def serial(self, name: str, payload: Any, chain: tuple[Hashable, ...]) -> Any:
        await trio.lowlevel.checkpoint_if_cancelled()
        for hook in self.listeners(name, chain):
            result = hook.fn(payload)
            if result is not None and inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result
        return None

    async def parallel(self, name: str, payload: Any, chain: tuple[Hashable, ...]) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        hooks = self.listeners(name, chain)
        if not hooks:  # like serial and waterfall: a cancel point, no nursery to open (#17)
            return
        errors: list[Exception] = []

        async def run(hook: Hook) -> None:
            try:
                result = hook.fn(payload)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                errors.append(exc)

        if len(hooks) == 1:  # nothing to run beside it: in this task, no nursery (#13)
            await run(hooks[0])
        else:
            async with trio.open_nursery() as nursery:
                for hook in hooks:
                    nursery.start_soon(run, hook)
        if errors:
            raise ExceptionGroup(f"{len(errors)} listener(s) of {name!r} failed", errors)


def _describe(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
