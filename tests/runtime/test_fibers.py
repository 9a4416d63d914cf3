"""Fibers: effects, LIFO teardown, nested plugins, services, inject, failure containment."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_agent.runtime import (
    Context,
    Disposer,
    FiberState,
    InactiveContextError,
    PluginConfigError,
    Service,
    ServiceConflictError,
    ServiceNotFoundError,
    open_runtime,
)
from trio_agent.testing import assert_no_leaked_tasks


async def test_disposers_run_lifo_sync_and_async(ctx: Context) -> None:
    log: list[str] = []

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("first"))

        async def second() -> None:
            await trio.lowlevel.checkpoint()
            log.append("second")

        pctx.defer(second)
        pctx.effect(lambda: lambda: log.append("third"))

    fiber = await ctx.plugin(plugin)
    state = fiber.state  # a local: mypy would keep the property narrowed
    assert state is FiberState.ACTIVE
    await fiber.dispose()
    assert log == ["third", "second", "first"]
    assert fiber.state is FiberState.DISPOSED


async def test_raising_disposer_is_logged_and_the_rest_still_run(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []

    def boom() -> None:
        raise RuntimeError("teardown bug")

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("outer"))
        pctx.defer(boom)
        pctx.defer(lambda: log.append("inner"))

    fiber = await ctx.plugin(plugin)
    with caplog.at_level(logging.ERROR, "trio_agent.runtime"):
        await fiber.dispose()
    assert log == ["inner", "outer"]
    assert "teardown bug" in caplog.text


async def test_hung_disposer_is_cut_off_by_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with open_runtime(teardown_timeout=5) as ctx:

        async def hangs() -> None:
            await trio.sleep_forever()

        def plugin(pctx: Context, config: None) -> None:
            pctx.defer(lambda: log.append("after the hang"))
            pctx.defer(hangs)

        fiber = await ctx.plugin(plugin)
        start = trio.current_time()
        await fiber.dispose()
        assert trio.current_time() - start == pytest.approx(5)
    assert log == ["after the hang"]


async def test_teardown_is_shielded_from_the_callers_cancellation(ctx: Context) -> None:
    log: list[str] = []

    async def slow() -> None:
        await trio.lowlevel.checkpoint()
        log.append("slow finished")

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(slow)

    fiber = await ctx.plugin(plugin)
    with trio.CancelScope() as scope:
        scope.cancel()
        await fiber.dispose()
    assert log == ["slow finished"]
    assert fiber.state is FiberState.DISPOSED


async def test_dispose_is_idempotent_and_concurrent_callers_join(ctx: Context) -> None:
    gate = trio.Event()
    runs: list[int] = []

    async def teardown() -> None:
        runs.append(1)
        await gate.wait()

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(teardown)

    fiber = await ctx.plugin(plugin)
    done: list[int] = []

    async def disposer(n: int) -> None:
        await fiber.dispose()
        done.append(n)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(disposer, 1)
        nursery.start_soon(disposer, 2)
        await trio.testing.wait_all_tasks_blocked()
        assert done == []
        gate.set()
    assert runs == [1]
    assert sorted(done) == [1, 2]
    await fiber.dispose()


async def test_child_plugin_unwinds_at_its_lifo_slot(ctx: Context) -> None:
    log: list[str] = []

    def child(cctx: Context, config: None) -> None:
        cctx.defer(lambda: log.append("child effect"))

    async def parent(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("before child"))
        await pctx.plugin(child)
        pctx.defer(lambda: log.append("after child"))

    fiber = await ctx.plugin(parent)
    await fiber.dispose()
    assert log == ["after child", "child effect", "before child"]


async def test_child_is_owned_by_its_parent_before_it_is_announced(ctx: Context) -> None:
    owned_at_announcement: list[bool] = []

    def child(cctx: Context, config: None) -> None:
        pass

    def on_plugin(fiber: Any) -> None:
        parent = fiber.parent
        owned_at_announcement.append(fiber._handle in parent._effects)

    ctx.on("internal/plugin", on_plugin)
    await ctx.plugin(child)
    assert owned_at_announcement == [True]


async def test_effect_accepts_context_managers_and_nests_disposers(ctx: Context) -> None:
    log: list[str] = []

    @contextlib.contextmanager
    def cm() -> Iterator[None]:
        log.append("enter")
        yield
        log.append("exit")

    def plugin(pctx: Context, config: None) -> None:
        pctx.effect(cm())
        inner = pctx.on("x", lambda p: log.append("heard"))
        pctx.effect(lambda: inner)  # nested: runs at this effect's slot, not its own
        pctx.defer(lambda: log.append("last registered"))

    fiber = await ctx.plugin(plugin)
    ctx.emit("x")
    await fiber.dispose()
    ctx.emit("x")
    assert log == ["enter", "heard", "last registered", "exit"]


async def test_async_effect_with_async_context_manager(ctx: Context) -> None:
    log: list[str] = []

    @contextlib.asynccontextmanager
    async def resource() -> AsyncIterator[None]:
        log.append("open")
        yield
        await trio.lowlevel.checkpoint()
        log.append("close")

    async def plugin(pctx: Context, config: None) -> None:
        await pctx.async_effect(resource())

    fiber = await ctx.plugin(plugin)
    assert log == ["open"]
    await fiber.dispose()
    assert log == ["open", "close"]


async def test_effect_rejects_async_context_manager_with_guidance(ctx: Context) -> None:
    @contextlib.asynccontextmanager
    async def resource() -> AsyncIterator[None]:
        yield

    cm = resource()
    with pytest.raises(TypeError, match="async_effect"):
        ctx.effect(cm)  # type: ignore[arg-type]


def test_sync_call_of_async_disposer_says_what_to_do() -> None:
    async def teardown() -> None:
        pass

    off = Disposer(teardown, label="x")
    with pytest.raises(TypeError, match=r"await off\.aclose"):
        off()


async def test_registering_on_a_disposed_fiber_raises(ctx: Context) -> None:
    saved: list[Context] = []

    def plugin(pctx: Context, config: None) -> None:
        saved.append(pctx)

    fiber = await ctx.plugin(plugin)
    await fiber.dispose()
    pctx = saved[0]
    with pytest.raises(InactiveContextError, match="disposed"):
        pctx.on("e", print)
    with pytest.raises(InactiveContextError):
        pctx.effect(lambda: None)
    with pytest.raises(InactiveContextError):
        pctx.start_soon(trio.sleep_forever)
    with pytest.raises(InactiveContextError):
        await pctx.plugin(plugin)


async def test_registering_while_unloading_raises(ctx: Context) -> None:
    errors: list[BaseException] = []
    saved: list[Context] = []

    def late_registration() -> None:
        try:
            saved[0].on("e", print)
        except InactiveContextError as exc:
            errors.append(exc)

    def plugin(pctx: Context, config: None) -> None:
        saved.append(pctx)
        pctx.defer(late_registration)

    fiber = await ctx.plugin(plugin)
    await fiber.dispose()
    assert len(errors) == 1
    assert "unloading" in str(errors[0])


async def test_unload_cancels_tasks_before_running_disposers(ctx: Context) -> None:
    log: list[str] = []

    async def worker() -> None:
        try:
            await trio.sleep_forever()
        finally:
            log.append("task cancelled")

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("disposer"))
        pctx.start_soon(worker)

    fiber = await ctx.plugin(plugin)
    await trio.testing.wait_all_tasks_blocked()
    await fiber.dispose()
    assert log == ["task cancelled", "disposer"]


async def test_crashing_task_unloads_its_plugin_only(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []

    async def crash() -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("worker bug")

    def bad(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("bad disposed"))
        pctx.start_soon(crash)

    def good(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("good disposed"))

    good_fiber = await ctx.plugin(good)
    with caplog.at_level(logging.ERROR, "trio_agent.runtime"):
        bad_fiber = await ctx.plugin(bad)
        with trio.fail_after(1):
            while bad_fiber.state is not FiberState.FAILED:
                await ctx.runtime.state_changed.wait()
    assert log == ["bad disposed"]
    assert good_fiber.state is FiberState.ACTIVE
    assert isinstance(bad_fiber.error, ExceptionGroup)
    assert "worker bug" in caplog.text


async def test_disposing_a_fiber_from_its_own_task(ctx: Context) -> None:
    log: list[str] = []

    async def quit_self(pctx: Context) -> None:
        try:
            await pctx.fiber.dispose()
        finally:
            log.append("own task cancelled")

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("disposer"))
        pctx.start_soon(quit_self, pctx)

    fiber = await ctx.plugin(plugin)
    with trio.fail_after(1):
        while fiber.state is not FiberState.DISPOSED:
            await ctx.runtime.state_changed.wait()
    assert log == ["own task cancelled", "disposer"]


async def test_plugin_raising_while_loading_is_rolled_back(ctx: Context) -> None:
    log: list[str] = []

    def plugin(pctx: Context, config: None) -> None:
        pctx.defer(lambda: log.append("rolled back"))
        pctx.on("e", lambda p: log.append("must not hear"))
        raise ValueError("bad plugin")

    with pytest.raises(ValueError, match="bad plugin"):
        await ctx.plugin(plugin)
    ctx.emit("e")
    assert log == ["rolled back"]
    assert not ctx.fiber._effects


@attrs.frozen
class Inner:
    limit: int


class Configured:
    @attrs.frozen
    class Config:
        name: str
        inner: Inner
        verbose: bool = False

    def __init__(self, pctx: Context, config: Configured.Config) -> None:
        self.config = config


async def test_plugin_config_is_structured_and_errors_name_the_path(ctx: Context) -> None:
    fiber = await ctx.plugin(Configured, {"name": "x", "inner": {"limit": 3}})
    assert fiber.instance.config == Configured.Config("x", Inner(3))

    with pytest.raises(PluginConfigError, match=r"inner\.limit"):
        await ctx.plugin(Configured, {"name": "x", "inner": {"limit": "lots"}})
    with pytest.raises(PluginConfigError, match="extra"):
        await ctx.plugin(Configured, {"name": "x", "inner": {"limit": 1}, "typo": 1})


class Store(Service, name="store"):
    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)
        self.items: list[str] = []


class Consumer(Service, name="consumer"):
    inject = ("store",)
    loads = 0

    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)
        type(self).loads += 1
        ctx.store.items.append("consumer loaded")
        ctx.defer(lambda: ctx.store.items.append("consumer unloaded"))


async def test_inject_waits_for_services_and_follows_them(ctx: Context) -> None:
    Consumer.loads = 0
    consumer = await ctx.plugin(Consumer)
    assert consumer.state is FiberState.PENDING
    assert ctx.get("consumer") is None

    store_fiber = await ctx.plugin(Store)
    with trio.fail_after(1):
        await consumer.wait_active()
    store = store_fiber.instance
    assert store.items == ["consumer loaded"]

    await store_fiber.dispose()
    # The dependent unloaded while the provider was still intact, and is pending again.
    assert store.items == ["consumer loaded", "consumer unloaded"]
    assert consumer.state is FiberState.PENDING

    await ctx.plugin(Store)
    with trio.fail_after(1):
        await consumer.wait_active()
    assert Consumer.loads == 2


async def test_providing_a_service_twice_raises(ctx: Context) -> None:
    await ctx.plugin(Store)
    with pytest.raises(ServiceConflictError, match="already provided by plugin 'Store'"):
        await ctx.plugin(Store)
    assert isinstance(ctx.store, Store)


async def test_missing_service_error_names_it(ctx: Context) -> None:
    with pytest.raises(ServiceNotFoundError, match="no service 'llm'"):
        _ = ctx.llm
    assert ctx.get("llm") is None
    assert not hasattr(ctx, "llm")


async def test_service_views_bind_the_caller(ctx: Context) -> None:
    fiber = await ctx.plugin(Store)
    scoped = ctx.scope_context("agent-a")
    view = scoped.store
    assert view.caller is scoped
    assert view.ctx is fiber.ctx
    view.items.append("shared")
    assert ctx.store.items == ["shared"]


async def test_scope_registrations_are_disposed_with_the_scope(ctx: Context) -> None:
    heard: list[str] = []
    scoped = ctx.scope_context("a")
    scoped.on("e", lambda p: heard.append("scoped"))
    scoped.emit("e")
    await scoped.fiber.dispose()
    scoped.emit("e")
    assert heard == ["scoped"]
    with pytest.raises(InactiveContextError):
        scoped.on("e", print)


async def test_closing_the_runtime_leaves_no_task_running() -> None:
    async def forever() -> None:
        await trio.sleep_forever()

    def plugin(pctx: Context, config: None) -> None:
        pctx.start_soon(forever)
        pctx.scope_context("s").start_soon(forever)

    with assert_no_leaked_tasks() as check:
        async with open_runtime() as ctx:
            await ctx.plugin(plugin)
            ctx.start_soon(forever)
            await trio.testing.wait_all_tasks_blocked()
            assert sum(task.name.endswith("forever") for task in check.live) == 3
    assert check.live == []


async def test_body_exception_propagates_unwrapped() -> None:
    with pytest.raises(KeyError, match="body"):
        async with open_runtime():
            raise KeyError("body")


async def test_root_task_crash_propagates_out_of_the_runtime() -> None:
    async def crash() -> None:
        raise RuntimeError("root task bug")

    with pytest.RaisesGroup(
        pytest.RaisesExc(RuntimeError, match="root task bug"), flatten_subgroups=True
    ):
        async with open_runtime() as ctx:
            ctx.start_soon(crash)
            await trio.sleep_forever()


async def test_wait_for_service_returns_once_the_provider_is_loaded(ctx: Context) -> None:
    found: list[object] = []

    async def waiter() -> None:
        found.append(await ctx.wait_for_service("store"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert found == []
        await ctx.plugin(Store)
    assert isinstance(found[0], Store)
