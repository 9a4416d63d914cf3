"""Contexts, fibers, effects and services: the plugin runtime on trio.

The ownership tree is the nursery tree:

* the runtime's nursery hosts the root fiber;
* every fiber owns a nursery (opened lazily, on its first task) hosted in its parent's nursery;
* every fiber owns a LIFO stack of :class:`Disposer` s - its effects, including its children.

Unloading a fiber is one fixed sequence: withdraw the services it provides (their dependents
unload first), cancel its nursery and wait for its tasks, then run its disposers strictly LIFO,
each in a shielded scope under the runtime's teardown budget.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar, final, overload

import attrs
import cattrs
import trio

from .. import _serde
from .._buffers import appended
from ._disposer import Disposer, Teardown
from ._errors import (
    InactiveContextError,
    PluginConfigError,
    ServiceConflictError,
    ServiceNotFoundError,
)
from ._events import EventBus, Hook, Next, is_async_callable

__all__ = [
    "Context",
    "Fiber",
    "FiberState",
    "Plugin",
    "Scope",
    "Service",
    "ServiceKey",
    "open_runtime",
]

logger = logging.getLogger("trio_agent.runtime")

T = TypeVar("T")

#: A plugin is a callable ``(ctx, config)``: a function (sync or async) or a class such as a
#: :class:`Service` subclass. Optional class attributes: ``inject`` (service names it needs) and
#: ``Config`` (an attrs class its config is structured into).
Plugin = Callable[..., Any]

_fiber_ids = itertools.count()


class FiberState(enum.Enum):
    """Where a fiber is in its life."""

    PENDING = "pending"
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADING = "unloading"
    DISPOSED = "disposed"
    FAILED = "failed"


_ACCEPTS_EFFECTS = frozenset({FiberState.PENDING, FiberState.LOADING, FiberState.ACTIVE})


@final
class Scope:
    """A registration scope, such as one agent's. ``chain`` is the scope and its ancestors."""

    __slots__ = ("chain", "key", "parent")

    def __init__(self, key: str, parent: Scope | None = None) -> None:
        self.key = key
        self.parent = parent
        self.chain: tuple[Scope, ...] = (self, *(parent.chain if parent else ()))

    def __repr__(self) -> str:
        return f"<Scope {'/'.join(s.key for s in reversed(self.chain))}>"


_GLOBAL: tuple[Scope, ...] = ()


class _Unset(enum.Enum):
    UNSET = "UNSET"


#: Sentinel for "dispatch at the dispatching context's own scope".
_SAME_SCOPE = _Unset.UNSET


S = TypeVar("S")


@final
class ServiceKey(Generic[S]):
    """The typed name of a service whose providers share a protocol, not a class.

    ``SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")``
    lets ``ctx.require(SESSION_PERSISTENCE)`` return a ``SessionPersistence`` whichever backend
    is mounted. Services that are one class are keyed by the class itself
    (``ctx.require(ToolRegistry)``).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


def _key_of(key: str | type[Any] | ServiceKey[Any]) -> tuple[str, type[Any] | None]:
    """The service name ``key`` stands for, and the class the service must be (if any)."""
    if isinstance(key, str):
        return key, None
    if isinstance(key, ServiceKey):
        return key.name, None
    name = getattr(key, "service_name", None) if isinstance(key, type) else None
    if not isinstance(name, str):
        raise TypeError(
            f"{key!r} does not name a service: pass a Service subclass declared with "
            "name=..., a ServiceKey, or a service name"
        )
    return name, key


# ------------------------------------------------------------------------------------------------
# Services
# ------------------------------------------------------------------------------------------------


class Service:
    """Base class for plugins that provide a ``ctx.<name>`` service.

    Declare the name when subclassing, and the services it needs::

        class Greeter(Service, name="greeter"):
            inject = ("llm",)

            def __init__(self, ctx: Context, config: None = None) -> None:
                super().__init__(ctx, config)

    ``ctx.greeter`` then returns a *view* of the one instance whose :attr:`caller` is the
    reading context, so a registration method can file what it registers under the caller's
    fiber and scope (``agent.ctx.tools.register(t)`` is scoped to that agent). A view shares the
    instance's attributes by reference: keep mutable state in containers created in
    ``__init__``, never rebind attributes after construction.

    Override :meth:`start` for asynchronous set-up; it runs while the fiber is loading.
    """

    service_name: ClassVar[str | None] = None
    inject: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, *, name: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.service_name = name
            _service_attribute(name)  # ctx.<name> reads it, with a clear error while absent

    def __init__(self, ctx: Context, config: Any = None) -> None:
        #: The providing fiber's context.
        self.ctx = ctx
        #: The context this view was read from (``self.ctx`` on the instance itself).
        self.caller = ctx
        self.config = config
        if self.service_name is not None:
            ctx.provide(self.service_name, self)

    def bind(self, caller: Context) -> Self:
        """Return a view of this service whose :attr:`caller` is ``caller``."""
        if caller is self.caller:
            return self
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)
        view.caller = caller
        return view

    async def start(self) -> None:
        """Asynchronous set-up, run once while the providing fiber loads."""


@attrs.define(eq=False)
class _ServiceEntry:
    impl: object
    fiber: Fiber
    #: Set while dependents unload; the service is still readable but nothing new loads on it.
    withdrawing: bool = False


@final
class _ServiceTable:
    def __init__(self, runtime: _Runtime) -> None:
        self._runtime = runtime
        self.entries: dict[str, _ServiceEntry] = {}
        #: Fibers with a non-empty ``inject``, alive (not disposed).
        self.dependents: set[Fiber] = set()

    def available(self, name: str) -> bool:
        entry = self.entries.get(name)
        return (
            entry is not None and not entry.withdrawing and entry.fiber.state is FiberState.ACTIVE
        )

    def satisfied(self, fiber: Fiber) -> bool:
        return all(self.available(name) for name in fiber.inject)

    def missing(self, fiber: Fiber) -> list[str]:
        return [name for name in fiber.inject if not self.available(name)]

    def provide(self, name: str, impl: object, fiber: Fiber) -> Disposer:
        current = self.entries.get(name)
        if current is not None:
            raise ServiceConflictError(
                f"service {name!r} is already provided by plugin {current.fiber.name!r}; "
                "dispose that plugin first, or provide this one under another name"
            )
        entry = _ServiceEntry(impl, fiber)
        self.entries[name] = entry

        async def withdraw() -> None:
            if self.entries.get(name) is not entry:
                return
            # Dependents unload first, while the service they used is still readable.
            entry.withdrawing = True
            try:
                await self._unload_dependents_of(name)
            finally:
                del self.entries[name]

        if fiber.state is FiberState.ACTIVE:
            self.wake_pending()
        return Disposer(withdraw, label=f"provide {name}", is_async=True)

    async def _unload_dependents_of(self, name: str) -> None:
        users = [
            f
            for f in self.dependents
            if name in f.inject and f.state in (FiberState.ACTIVE, FiberState.LOADING)
        ]
        for user in sorted(users, key=lambda f: -f.id):
            logger.info("service %r went away; unloading dependent plugin %r", name, user.name)
            await user._unload(final=False)

    def wake_pending(self) -> None:
        """Start loading every pending fiber whose services are all available now."""
        for fiber in sorted(self.dependents, key=lambda f: f.id):
            if fiber.state is FiberState.PENDING and self.satisfied(fiber):
                parent = fiber.parent
                assert parent is not None
                try:
                    parent.start_soon(fiber._load_in_background, name=f"load {fiber.name}")
                except InactiveContextError:
                    pass


# ------------------------------------------------------------------------------------------------
# Fibers
# ------------------------------------------------------------------------------------------------


#: A task a fiber starts once its nursery runs: ``(fn, args, name)``.
_Spawn = tuple[Callable[..., Awaitable[object]], tuple[Any, ...], str | None]


@final
class Fiber:
    """One mounted plugin (or scope): its state, its nursery and its disposer stack.

    States run ``pending → loading → active → unloading → disposed``; a plugin that raises while
    loading, or whose task crashes, ends ``failed`` after its effects are rolled back. A fiber
    that loses an injected service unloads back to ``pending`` and loads again when the service
    returns.
    """

    # Slots: an agent's scope is a fiber, so 10,000 agents are 10,000 of them (#17).
    __slots__ = (
        "__weakref__",
        "_effects",
        "_forget_hook",
        "_handle",
        "_host_done",
        "_host_stop",
        "_lock",
        "_nursery",
        "_provided",
        "_spawns",
        "_state",
        "config",
        "ctx",
        "error",
        "id",
        "inject",
        "instance",
        "name",
        "parent",
        "plugin",
        "runtime",
    )

    def __init__(
        self,
        runtime: _Runtime,
        parent: Fiber | None,
        *,
        name: str,
        scope: Scope | None,
        plugin: Plugin | None = None,
        config: Any = None,
        inject: tuple[str, ...] = (),
    ) -> None:
        self.id = next(_fiber_ids)
        self.name = name
        self.runtime = runtime
        self.parent = parent
        self.plugin = plugin
        self.config = config
        self.inject = inject
        self._state = FiberState.PENDING
        #: The exception that failed this fiber, if any.
        self.error: BaseException | None = None
        #: What the plugin callable returned (the service instance for a Service class).
        self.instance: Any = None
        self.ctx = Context(runtime, self, scope)
        # An insertion-ordered dict used as a stack: O(1) push, pop and early removal.
        self._effects: dict[Disposer, None] = {}
        #: One bound method for every disposer of this fiber (not one per disposer: #17).
        self._forget_hook = self._forget
        # Both () while empty (trio_agent._buffers): most fibers never provide or spawn before
        # their nursery runs.
        self._provided: Sequence[Disposer] = ()
        #: Serialises load and unload; built by the first of them (an agent's scope fiber lives
        #: without one until it is disposed: #17's memory per agent).
        self._lock: trio.Lock | None = None
        self._nursery: trio.Nursery | None = None
        self._spawns: Sequence[_Spawn] = ()
        self._host_stop: trio.Event | None = None
        self._host_done: trio.Event | None = None
        #: The parent's effect that disposes this fiber; set by the parent when it adopts us.
        self._handle: Disposer | None = None

    def __repr__(self) -> str:
        return f"<Fiber #{self.id} {self.name} {self.state.value}>"

    @property
    def state(self) -> FiberState:
        """The current :class:`FiberState`."""
        return self._state

    @state.setter
    def state(self, value: FiberState) -> None:
        if value is not self._state:
            self._state = value
            self.runtime.changed()

    # --- effects ----------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """True while the fiber accepts effects (pending, loading or active)."""
        return self.state in _ACCEPTS_EFFECTS

    def check_active(self, what: str = "register on") -> None:
        """Raise :class:`InactiveContextError` unless this fiber accepts effects."""
        if self.state not in _ACCEPTS_EFFECTS:
            raise InactiveContextError(
                f"cannot {what} plugin {self.name!r}: it is {self.state.value}; "
                "register from a live context (the fiber's own ctx while it is loaded)"
            )

    def add(self, disposer: Disposer) -> Disposer:
        """Push ``disposer`` onto this fiber's stack; it runs (LIFO) when the fiber unloads."""
        self.check_active()
        self._effects[disposer] = None
        disposer._on_done = self._forget_hook
        return disposer

    def note_provided(self, disposer: Disposer) -> None:
        """Remember ``disposer`` (on this fiber's stack) as a service withdrawal: teardown runs
        those first, before the tasks stop."""
        self._provided = appended(self._provided, disposer)

    def _forget(self, disposer: Disposer) -> None:
        self._effects.pop(disposer, None)

    def _adopt(self, disposer: Disposer) -> None:
        """Take ``disposer`` off this fiber's stack (it is nested inside another effect)."""
        if disposer._on_done is self._forget_hook:
            disposer._on_done = None
            self._forget(disposer)

    # --- tasks ------------------------------------------------------------------------------

    def start_soon(
        self, fn: Callable[..., Awaitable[object]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``fn(*args)`` as a task in this fiber's nursery.

        The task is cancelled when the fiber unloads. If it raises, the error is logged and
        the fiber unloads as failed (a crash never takes its siblings down with it), except
        for the root fiber, where the error propagates out of :func:`open_runtime`.
        """
        self._check_can_spawn()
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args, name=name)
            return
        self._spawns = appended(self._spawns, (fn, args, name))
        if self._host_done is None:
            self._host_stop = trio.Event()
            self._host_done = trio.Event()
            if self.parent is None:
                self.runtime.nursery.start_soon(self._host, name=f"fiber {self.name}")
            else:
                self.parent.start_soon(self._host, name=f"fiber {self.name}")

    def _check_can_spawn(self) -> None:
        fiber: Fiber | None = self
        while fiber is not None:
            if fiber.state not in _ACCEPTS_EFFECTS:
                raise InactiveContextError(
                    f"cannot start a task in plugin {self.name!r}: plugin {fiber.name!r} is "
                    f"{fiber.state.value}"
                )
            fiber = fiber.parent

    def _in_own_nursery(self) -> bool:
        """Whether the current task runs inside this fiber's nursery (or a descendant's)."""
        if self._nursery is None:
            return False
        task: trio.lowlevel.Task | None = trio.lowlevel.current_task()
        while task is not None:
            nursery = task.parent_nursery
            if nursery is None:
                return False
            if nursery is self._nursery:
                return True
            task = nursery.parent_task
        return False

    async def _host(self) -> None:
        assert self._host_stop is not None and self._host_done is not None
        stop, done = self._host_stop, self._host_done
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                spawns, self._spawns = self._spawns, ()
                for fn, args, name in spawns:
                    nursery.start_soon(fn, *args, name=name)
                await stop.wait()
                nursery.cancel_scope.cancel()
        except* Exception as group:
            if self.parent is None:
                raise
            self._crashed(group)
        finally:
            self._nursery = None
            self._spawns = ()
            if self._host_done is done:
                self._host_stop = self._host_done = None
            done.set()

    def _crashed(self, group: BaseExceptionGroup[Exception]) -> None:
        logger.error(
            "a task of plugin %r crashed; unloading the plugin",
            self.name,
            exc_info=group,
        )
        if self.state in (FiberState.ACTIVE, FiberState.LOADING, FiberState.PENDING):
            self.error = group
            assert self.parent is not None
            with contextlib.suppress(InactiveContextError):
                self.parent.start_soon(self._fail, name=f"fail {self.name}")

    async def _fail(self) -> None:
        await self._dispose_via_handle()
        self.state = FiberState.FAILED

    async def stop_tasks(self) -> None:
        """Cancel this fiber's tasks and wait until every one has exited.

        The fiber stays as it is (its effects are untouched, and a task started later runs in a
        fresh nursery). Unloading does this too, between withdrawing the services and running
        the disposers; an agent's host calls it on ``agent.ctx``'s fiber when the agent stops,
        so the agent's background tasks end before it is unregistered. Not shielded: run it
        under a shielded, budgeted scope when it must finish during a cancellation.
        """
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        if self._host_done is None:
            return
        assert self._host_stop is not None
        self._host_stop.set()
        await self._host_done.wait()

    # --- transitions ------------------------------------------------------------------------

    def _transition_lock(self) -> trio.Lock:
        if self._lock is None:
            self._lock = trio.Lock()
        return self._lock

    async def _load(self) -> None:
        """Load the plugin if its services are available; leave it pending otherwise."""
        async with self._transition_lock():
            if self.state is not FiberState.PENDING or not self.runtime.services.satisfied(self):
                return
            self.state = FiberState.LOADING
            await trio.lowlevel.checkpoint()
            try:
                assert self.plugin is not None
                result = self.plugin(self.ctx, self.config)
                if inspect.isawaitable(result):
                    result = await result
                if isinstance(result, Service):
                    await result.start()
            except BaseException as exc:
                self.error = exc
                with trio.CancelScope(shield=True):
                    await self._teardown()
                self.state = FiberState.FAILED
                raise
            self.instance = result
            self.state = FiberState.ACTIVE
        self.runtime.services.wake_pending()

    async def _load_in_background(self) -> None:
        try:
            await self._load()
        except Exception:
            logger.exception("plugin %r failed to load", self.name)

    async def _unload(self, *, final: bool) -> None:
        if self.state in (FiberState.DISPOSED, FiberState.UNLOADING):
            return
        with trio.CancelScope(shield=True):
            async with self._transition_lock():
                was_failed = self.state is FiberState.FAILED
                self.state = FiberState.UNLOADING
                await self._teardown()
                if final or was_failed:
                    self.state = FiberState.FAILED if was_failed else FiberState.DISPOSED
                    self.runtime.services.dependents.discard(self)
                else:
                    self.state = FiberState.PENDING
        if not final and self.state is FiberState.PENDING:
            self.runtime.services.wake_pending()

    async def _teardown(self) -> None:
        """Withdraw services, stop tasks, then run disposers LIFO (all shielded, budgeted)."""
        deadline = trio.current_time() + self.runtime.teardown_timeout
        provided, self._provided = self._provided, ()
        for disposer in reversed(provided):
            if not disposer.disposed:
                await self._run_disposer(disposer, deadline)
        with trio.CancelScope(deadline=deadline, shield=True) as scope:
            await self._stop_tasks()
        if scope.cancelled_caught:
            logger.error("tasks of plugin %r did not stop within the teardown budget", self.name)
        while self._effects:
            await self._run_disposer(next(reversed(self._effects)), deadline)

    async def _run_disposer(self, disposer: Disposer, deadline: float) -> None:
        with trio.CancelScope(deadline=deadline, shield=True) as scope:
            try:
                await disposer.aclose()
            except Exception:
                logger.exception(
                    "disposer %s of plugin %r raised; the remaining disposers still run",
                    disposer.label or "?",
                    self.name,
                )
        if scope.cancelled_caught:
            logger.error(
                "disposer %s of plugin %r overran the teardown budget and was cancelled",
                disposer.label or "?",
                self.name,
            )
        if not disposer.disposed or disposer in self._effects:
            self._forget(disposer)

    async def dispose(self) -> None:
        """Unload this fiber for good. Idempotent; concurrent callers wait for the same unload.

        Called from one of the fiber's own tasks, the unload runs in the parent's nursery and the
        calling task is cancelled with the rest of the fiber's tasks.
        """
        if self._in_own_nursery() and self.parent is not None:
            # The unload must cancel this very task, so it runs in the parent's nursery and
            # this task waits here to be cancelled.
            self.parent.start_soon(self._dispose_via_handle, name=f"dispose {self.name}")
            await trio.sleep_forever()
        await self._dispose_via_handle()

    async def _dispose_via_handle(self) -> None:
        if self._handle is not None:
            await self._handle.aclose()
        else:
            await self._unload(final=True)

    def discard(self) -> None:
        """Dispose synchronously a fiber that never started a task and holds only synchronous
        effects - for rolling back a scope from synchronous code. Its effects run LIFO.

        Raises:
            RuntimeError: the fiber has tasks or an async effect; use ``await dispose()``.
        """
        if self.state in (FiberState.DISPOSED, FiberState.FAILED):
            return
        if self._host_done is not None or any(d.is_async for d in self._effects):
            raise RuntimeError(
                f"plugin {self.name!r} has tasks or async effects and cannot be discarded "
                "synchronously; use 'await fiber.dispose()'"
            )
        self.state = FiberState.UNLOADING
        while self._effects:
            disposer = next(reversed(self._effects))
            try:
                disposer()
            except Exception:
                logger.exception(
                    "disposer %s of plugin %r raised; the remaining disposers still run",
                    disposer.label or "?",
                    self.name,
                )
            self._forget(disposer)
        self.state = FiberState.DISPOSED
        self.runtime.services.dependents.discard(self)
        if self._handle is not None:
            self._handle._finish()

    async def wait_active(self) -> None:
        """Wait until the fiber is active; raise :class:`InactiveContextError` if it ends first."""
        while self.state is not FiberState.ACTIVE:
            if self.state in (FiberState.DISPOSED, FiberState.FAILED):
                raise InactiveContextError(f"plugin {self.name!r} ended {self.state.value}")
            await self.runtime.state_changed.wait()
        await trio.lowlevel.checkpoint()


# ------------------------------------------------------------------------------------------------
# Context
# ------------------------------------------------------------------------------------------------


@final
class Context:
    """The handle every plugin works through.

    A context belongs to one fiber (registrations made through it are that fiber's effects) and
    to one scope (``None`` for global). Services are attributes: ``ctx.llm``, ``ctx.sessions``.
    """

    __slots__ = ("__weakref__", "_listeners", "_views", "fiber", "runtime", "scope")

    def __init__(self, runtime: _Runtime, fiber: Fiber, scope: Scope | None) -> None:
        self.runtime = runtime
        self.fiber = fiber
        self.scope = scope
        self._listeners = runtime.bus.table
        # Service views bound to this context, by service name, with the instance they view:
        # made once per (context, instance) instead of per lookup (#17, many agents).
        self._views: dict[str, tuple[Service, Service]] | None = None

    def __repr__(self) -> str:
        return f"<Context {self.fiber.name}{' ' + repr(self.scope) if self.scope else ''}>"

    # --- plugins and scopes -----------------------------------------------------------------

    async def plugin(self, plugin: Plugin, config: Any = None, *, name: str | None = None) -> Fiber:
        """Mount ``plugin`` as a child of this context's fiber and wait until it settles.

        Returns the child :class:`Fiber`: active, or pending when an injected service is still
        missing (it loads by itself once the service appears). A plugin that raises while
        loading is rolled back and the error propagates here.

        Raises:
            PluginConfigError: ``config`` does not structure into ``plugin.Config``.
            InactiveContextError: this context's fiber is unloading or gone.
        """
        parent = self.fiber
        parent.check_active("mount a plugin on")
        label = name or getattr(plugin, "__qualname__", None) or repr(plugin)
        structured = _structure_config(plugin, config, label)
        inject = tuple(getattr(plugin, "inject", ()) or ())
        child = Fiber(
            self.runtime,
            parent,
            name=label,
            scope=self.scope,
            plugin=plugin,
            config=structured,
            inject=inject,
        )
        # The parent owns the child before anything can observe it.
        child._handle = parent.add(
            Disposer(lambda: child._unload(final=True), label=f"plugin {label}", is_async=True)
        )
        if inject:
            self.runtime.services.dependents.add(child)
        self.emit("internal/plugin", child, target=None)
        try:
            await child._load()
        except BaseException:
            with trio.CancelScope(shield=True):
                await child._handle.aclose()
            child.state = FiberState.FAILED
            raise
        return child

    def scope_context(self, key: str) -> Context:
        """Return a new scoped child context (for example an agent's ``agent.ctx``).

        Registrations made through it are visible to dispatches aimed at this scope only, and
        are undone when ``scoped.fiber.dispose()`` runs (or when this context's fiber unloads).
        """
        parent = self.fiber
        parent.check_active("open a scope on")
        child = Fiber(
            self.runtime,
            parent,
            name=f"scope:{key}",
            scope=Scope(key, self.scope),
        )
        child.state = FiberState.ACTIVE
        child._handle = parent.add(
            Disposer(lambda: child._unload(final=True), label=f"scope {key}", is_async=True)
        )
        return child.ctx

    # --- effects ----------------------------------------------------------------------------

    def effect(
        self, setup: Callable[[], object] | contextlib.AbstractContextManager[Any]
    ) -> Disposer:
        """Run ``setup`` now and register what it returns as a teardown of this fiber.

        ``setup`` is either a synchronous context manager (entered now, exited at teardown) or
        a callable with no arguments returning ``None``, a teardown callable (sync or async), or
        another :class:`Disposer` (which is then nested inside this effect). For async set-up
        use :meth:`async_effect`.
        """
        self.fiber.check_active()
        if isinstance(setup, contextlib.AbstractContextManager):
            setup.__enter__()
            cm = setup
            return self.fiber.add(
                Disposer(lambda: cm.__exit__(None, None, None), label=_label(setup))
            )
        if isinstance(setup, contextlib.AbstractAsyncContextManager):
            raise TypeError(
                "ctx.effect() got an async context manager; use 'await ctx.async_effect(...)'"
            )
        result = setup()
        return self._adopt_teardown(result, _label(setup))

    async def async_effect(
        self,
        setup: Callable[[], Awaitable[object]] | contextlib.AbstractAsyncContextManager[Any],
    ) -> Disposer:
        """Like :meth:`effect` for asynchronous set-up: an async context manager, or an async
        callable returning a teardown. If the fiber starts unloading during set-up, the
        teardown runs as soon as set-up finishes."""
        self.fiber.check_active()
        if isinstance(setup, contextlib.AbstractAsyncContextManager):
            acm = setup
            await acm.__aenter__()

            async def exit_cm() -> None:
                await acm.__aexit__(None, None, None)

            disposer = Disposer(exit_cm, label=_label(setup), is_async=True)
        else:
            result = await setup()
            disposer = self._make_teardown(result, _label(setup))
        if not self.fiber.active:
            await disposer.aclose()
            raise InactiveContextError(
                f"plugin {self.fiber.name!r} began unloading during effect set-up; it was undone"
            )
        return self.fiber.add(disposer)

    def _adopt_teardown(self, result: object, label: str) -> Disposer:
        return self.fiber.add(self._make_teardown(result, label))

    def _make_teardown(self, result: object, label: str) -> Disposer:
        if result is None:
            return Disposer(None, label=label)
        if isinstance(result, Disposer):
            self.fiber._adopt(result)
            return Disposer(
                result.aclose if result.is_async else result, label=label, is_async=result.is_async
            )
        if callable(result):
            return Disposer(result, label=label)
        raise TypeError(
            f"effect set-up {label} returned {type(result).__name__}; expected None, a teardown "
            "callable or a Disposer"
        )

    def defer(self, teardown: Teardown, *, label: str = "") -> Disposer:
        """Register ``teardown`` (sync or async callable) to run when this fiber unloads."""
        return self.fiber.add(Disposer(teardown, label=label or _label(teardown)))

    def start_soon(
        self, fn: Callable[..., Awaitable[object]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``fn(*args)`` in this context's fiber nursery; see :meth:`Fiber.start_soon`."""
        self.fiber.start_soon(fn, *args, name=name)

    # --- events -----------------------------------------------------------------------------

    def on(self, name: str, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Listen to ``name``; the listener is an effect of this context's fiber.

        A listener registered through a scoped context hears only dispatches aimed at that scope
        (or a descendant). ``prepend=True`` puts it first (a later prepend lands before an
        earlier one).
        """
        self.fiber.check_active()
        bus = self.runtime.bus
        if bus.is_waterfall(name) and not is_async_callable(listener):
            raise TypeError(
                f"{name!r} is a waterfall event: its listener must be "
                f"`async def listener(payload, next)`, got the synchronous {listener!r}"
            )
        hook = Hook(name, listener, self.scope, self.fiber)
        bus.add(hook, prepend=prepend)
        return self.fiber.add(Disposer(lambda: bus.remove(hook), label=f"on {name}"))

    def emit(
        self, name: str, payload: Any = None, *, target: Scope | _Unset | None = _SAME_SCOPE
    ) -> None:
        """Call every listener of ``name`` synchronously, in order.

        A raising listener is logged and the rest still run. ``target`` picks the scope the
        dispatch is aimed at (default: this context's scope; ``None`` reaches global listeners
        only).
        """
        # No listener: one dict membership test, no allocation (a hot-path guarantee, #17).
        if name in self._listeners:
            self.runtime.bus.emit(name, payload, self._chain(target))

    def hears(self, name: str) -> bool:
        """Whether any listener of ``name`` is registered (in any scope); O(1), no allocation.

        Hot paths use it to skip building a notification payload nobody would receive::

            if ctx.hears("agent/stream-chunk"):
                ctx.emit("agent/stream-chunk", StreamChunkReceived(...))
        """
        return name in self._listeners

    async def waterfall(
        self,
        name: str,
        payload: Any,
        default: Callable[[], Awaitable[T]],
        *,
        target: Scope | _Unset | None = _SAME_SCOPE,
    ) -> T:
        """Run ``name`` as middleware: ``async def listener(payload, next)``.

        The first registered listener is outermost; ``await next()`` runs the rest of the chain
        and finally ``default()``. The outermost return value is the result. A raising listener
        propagates to the caller.
        """
        if name not in self._listeners:
            # Nobody listens: the same cancellation point, then the default (#17: no chain, no
            # listener snapshot, no extra coroutine frame on the loop's hot path).
            await trio.lowlevel.checkpoint_if_cancelled()
            self.runtime.bus.note_waterfall(name)
            return await default()
        result: T = await self.runtime.bus.waterfall(name, payload, default, self._chain(target))
        return result

    async def serial(
        self, name: str, payload: Any, *, target: Scope | _Unset | None = _SAME_SCOPE
    ) -> Any:
        """Await the listeners one after another; the first non-``None`` result stops the chain
        and is returned. A raising listener propagates."""
        if name not in self._listeners:  # nobody listens: the cancellation point only (#17)
            await trio.lowlevel.checkpoint_if_cancelled()
            return None
        return await self.runtime.bus.serial(name, payload, self._chain(target))

    async def parallel(
        self, name: str, payload: Any, *, target: Scope | _Unset | None = _SAME_SCOPE
    ) -> None:
        """Run every listener concurrently; one failing never cancels the others. When all are
        done, failures are raised together as an :class:`ExceptionGroup`."""
        await self.runtime.bus.parallel(name, payload, self._chain(target))

    def _chain(self, target: Scope | _Unset | None) -> tuple[Scope, ...]:
        scope = self.scope if target is _SAME_SCOPE else target
        return _GLOBAL if scope is None else scope.chain

    # --- services ---------------------------------------------------------------------------

    def provide(self, name: str, impl: object) -> Disposer:
        """Make ``impl`` available as ``ctx.<name>`` to every context of this runtime.

        Raises:
            ServiceConflictError: another live plugin already provides ``name``.
        """
        self.fiber.check_active()
        if name.startswith("_") or name in _RESERVED:
            raise ValueError(f"{name!r} cannot be a service name: it is reserved by Context")
        _service_attribute(name)
        disposer = self.fiber.add(self.runtime.services.provide(name, impl, self.fiber))
        self.fiber.note_provided(disposer)
        return disposer

    @overload
    def get(self, key: str) -> Any: ...

    @overload
    def get(self, key: type[S] | ServiceKey[S]) -> S | None: ...

    def get(self, key: str | type[Any] | ServiceKey[Any]) -> Any:
        """The service ``key`` names (bound to this context), or ``None`` if none is live.

        ``key`` is a :class:`Service` subclass (``ctx.get(ToolRegistry)``), a
        :class:`ServiceKey` (``ctx.get(SESSION_PERSISTENCE)``), both typed, or a plain name.

        Raises:
            TypeError: the live service is not an instance of the class ``key`` names.
        """
        name, cls = _key_of(key)
        entry = self.runtime.services.entries.get(name)
        if entry is None:
            return None
        impl = entry.impl
        if cls is not None and not isinstance(impl, cls):
            raise TypeError(
                f"service {name!r} is a {type(impl).__name__}, not a {cls.__name__}; it is "
                f"provided by plugin {entry.fiber.name!r}"
            )
        if not isinstance(impl, Service):
            return impl
        views = self._views
        if views is None:
            views = self._views = {}
        else:
            cached = views.get(name)
            if cached is not None and cached[0] is impl:
                return cached[1]
        view = impl.bind(self)
        views[name] = (impl, view)
        return view

    def require(self, key: type[S] | ServiceKey[S]) -> S:
        """The live service ``key`` names, bound to this context; typed by ``key``.

        This is how library code reads services: ``ctx.require(ToolRegistry).register(t)`` is
        checked by mypy, where the ``ctx.tools`` sugar is ``Any``.

        Raises:
            ServiceNotFoundError: no live plugin provides it.
            TypeError: the live service is not an instance of the class ``key`` names.
        """
        service = self.get(key)
        if service is None:
            raise self._not_found(_key_of(key)[0])
        return service

    @overload
    async def wait_for_service(self, key: str) -> Any: ...

    @overload
    async def wait_for_service(self, key: type[S] | ServiceKey[S]) -> S: ...

    async def wait_for_service(self, key: str | type[Any] | ServiceKey[Any]) -> Any:
        """Wait until a live, loaded plugin provides ``key``; return it (bound to this context).

        Use it for optional services that may appear later (``inject`` is the declarative way).
        Always a checkpoint.
        """
        name, _ = _key_of(key)
        while not self.runtime.services.available(name):
            await self.runtime.state_changed.wait()
        await trio.lowlevel.checkpoint()
        return self.get(key)

    async def wait_for_change(self) -> None:
        """Wait until some fiber of this runtime changes state (a plugin loads, unloads, fails).

        For code that waits on a condition about the plugin tree it cannot express with
        :meth:`wait_for_service`; re-check the condition after each wake-up.
        """
        await self.runtime.state_changed.wait()

    @property
    def teardown_timeout(self) -> float:
        """The budget, in seconds, of one fiber's teardown (``open_runtime(teardown_timeout=)``);
        plugins use it to bound their own shielded cleanup."""
        return self.runtime.teardown_timeout

    def _not_found(self, name: str) -> ServiceNotFoundError:
        known = ", ".join(sorted(self.runtime.services.entries)) or "none"
        return ServiceNotFoundError(
            f"no service {name!r} is provided in this runtime (provided: {known}); mount "
            f"the plugin that provides it, or use ctx.get({name!r}) when it is optional"
        )

    if TYPE_CHECKING:
        # ``ctx.tools`` (sugar for scripts; library code uses the typed ``require``) is a class
        # attribute per service name (:class:`_ServiceAttribute`), which a type checker cannot
        # see; this ``__getattr__`` is for the type checker alone. At run time one would leave
        # every attribute read and method call on a context unspecialised in CPython 3.11
        # (``ctx.emit`` with no listener: 156 ns with it, 84 without; docs/design.md).
        def __getattr__(self, name: str) -> Any: ...


_RESERVED = frozenset(dir(Context))


@final
class _ServiceAttribute:
    """``ctx.<name>``: the live service ``name`` bound to the reading context (``ctx.get``), or
    :class:`ServiceNotFoundError` naming what is provided. A class attribute of
    :class:`Context`, installed by :func:`_service_attribute`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, ctx: Context | None, owner: type[Context]) -> Any:
        if ctx is None:
            return self
        service = ctx.get(self.name)
        if service is None:
            raise ctx._not_found(self.name)
        return service


def _service_attribute(name: str) -> None:
    """Make ``ctx.<name>`` read the service ``name`` (once per name; reserved names are left to
    ``provide`` to refuse). Called for every name a :class:`Service` subclass declares and every
    name given to ``provide``; a name never declared or provided is a plain ``AttributeError``."""
    if name.startswith("_") or name in _RESERVED or name in Context.__dict__:
        return
    setattr(Context, name, _ServiceAttribute(name))


def _label(obj: object) -> str:
    return str(getattr(obj, "__qualname__", None) or type(obj).__name__)


def _structure_config(plugin: Plugin, config: Any, label: str) -> Any:
    config_cls = getattr(plugin, "Config", None)
    if config_cls is None or not attrs.has(config_cls):
        return config
    if isinstance(config, config_cls):
        return config
    try:
        return _serde.converter.structure({} if config is None else config, config_cls)
    except (cattrs.BaseValidationError, TypeError, ValueError) as exc:
        details = (
            "; ".join(cattrs.transform_error(exc, path=label))
            if isinstance(exc, cattrs.BaseValidationError)
            else str(exc)
        )
        raise PluginConfigError(f"invalid config for plugin {label}: {details}") from exc


# ------------------------------------------------------------------------------------------------
# Runtime
# ------------------------------------------------------------------------------------------------


@final
class _Runtime:
    def __init__(self, nursery: trio.Nursery, teardown_timeout: float) -> None:
        self.nursery = nursery
        self.teardown_timeout = teardown_timeout
        self.bus = EventBus()
        self.services = _ServiceTable(self)
        self.state_changed = trio.Event()
        self.root = Fiber(self, None, name="root", scope=None)
        self.root.state = FiberState.ACTIVE

    def changed(self) -> None:
        self.state_changed.set()
        self.state_changed = trio.Event()


@contextlib.asynccontextmanager
async def open_runtime(*, teardown_timeout: float = 10.0) -> AsyncIterator[Context]:
    """Open a plugin runtime and yield its root :class:`Context`.

    Everything mounted on the root context is disposed, LIFO, when the block exits; each
    fiber's teardown is shielded and bounded by ``teardown_timeout`` seconds.

    Exceptions: an exception raised by the body of the ``async with`` propagates unchanged. A
    task started on the root context that raises cancels the body, and its error propagates
    inside an :class:`ExceptionGroup` (tasks of mounted plugins never do this: a crash unloads
    their plugin and is logged).
    """
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        runtime = _Runtime(nursery, teardown_timeout)
        try:
            yield runtime.root.ctx
        except trio.Cancelled:
            raise
        except BaseException as exc:
            body_error = exc
        finally:
            with trio.CancelScope(shield=True):
                await runtime.root._unload(final=True)
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error


# Re-exported for type annotations of waterfall listeners.
__all__ += ["Next"]
