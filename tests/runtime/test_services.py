"""Typed service access: ``ctx.require`` / ``ctx.get`` keyed by a Service class or a ServiceKey."""

from __future__ import annotations

from typing import Protocol

import pytest
import trio
import trio.testing

from trio_agent.runtime import Context, Service, ServiceKey, ServiceNotFoundError


class Greeter(Service, name="greeter"):
    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)

    def greet(self) -> str:
        return "hello"


class Speaker(Protocol):
    def speak(self) -> str: ...


SPEAKER: ServiceKey[Speaker] = ServiceKey("speaker")


class Parrot:
    def speak(self) -> str:
        return "squawk"


async def test_require_by_class_returns_a_view_bound_to_the_caller(ctx: Context) -> None:
    await ctx.plugin(Greeter)
    scoped = ctx.scope_context("a")
    greeter = scoped.require(Greeter)
    assert isinstance(greeter, Greeter)
    assert greeter.caller is scoped
    assert greeter.greet() == "hello"
    assert ctx.get(Greeter) is not None


async def test_require_by_key_returns_the_provided_object(ctx: Context) -> None:
    parrot = Parrot()
    ctx.provide("speaker", parrot)
    assert ctx.require(SPEAKER) is parrot
    assert ctx.get(SPEAKER) is parrot
    assert repr(SPEAKER) == "ServiceKey('speaker')"


async def test_require_missing_service_names_it_and_get_returns_none(ctx: Context) -> None:
    with pytest.raises(ServiceNotFoundError, match="no service 'greeter'"):
        ctx.require(Greeter)
    with pytest.raises(ServiceNotFoundError, match="no service 'speaker'"):
        ctx.require(SPEAKER)
    assert ctx.get(Greeter) is None
    assert ctx.get(SPEAKER) is None


async def test_require_refuses_a_service_of_another_class(ctx: Context) -> None:
    ctx.provide("greeter", Parrot())
    with pytest.raises(TypeError, match="is a Parrot, not a Greeter"):
        ctx.require(Greeter)


async def test_a_class_without_a_service_name_is_not_a_key(ctx: Context) -> None:
    with pytest.raises(TypeError, match="does not name a service"):
        ctx.require(Parrot)


async def test_wait_for_service_accepts_a_key(ctx: Context) -> None:
    found: list[object] = []

    async def waiter() -> None:
        found.append(await ctx.wait_for_service(Greeter))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert found == []
        await ctx.plugin(Greeter)
    assert isinstance(found[0], Greeter)


async def test_teardown_timeout_is_public() -> None:
    from trio_agent.runtime import open_runtime

    async with open_runtime(teardown_timeout=3.5) as root:
        assert root.teardown_timeout == 3.5


async def test_parallel_is_a_cancellation_point_without_listeners(ctx: Context) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await ctx.parallel("nobody/listens", None)
        pytest.fail("parallel() did not raise Cancelled")  # pragma: no cover
    assert scope.cancelled_caught


class _Unnamed(Service):
    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)


async def test_a_context_reuses_its_view_until_the_service_is_replaced(ctx: Context) -> None:
    # #17: one view per (context, instance), not one per lookup; a new instance, a new view.
    key: ServiceKey[_Unnamed] = ServiceKey("unnamed")
    first = _Unnamed(ctx)
    off = ctx.provide("unnamed", first)
    scoped = ctx.scope_context("a")
    view = scoped.require(key)
    assert view is not first and view.caller is scoped
    assert scoped.require(key) is view
    assert ctx.require(key) is first
    await off.aclose()
    second = _Unnamed(ctx)
    ctx.provide("unnamed", second)
    again = scoped.require(key)
    assert again is not view and again.ctx is ctx and again.caller is scoped
    assert scoped.require(key) is again


async def test_service_attributes_need_no_getattr_hook(ctx: Context) -> None:
    # A __getattr__ on Context would leave every attribute read and method call on a context
    # unspecialised in CPython 3.11 (docs/design.md): the sugar is a class attribute per name.
    assert "__getattr__" not in vars(Context)
    with pytest.raises(ServiceNotFoundError, match="no service 'greeter'"):
        _ = ctx.greeter  # declared by a Service subclass, not provided
    ctx.provide("plain_service_sugar", Parrot())
    assert isinstance(ctx.plain_service_sugar, Parrot)
    assert isinstance(ctx.scope_context("a").plain_service_sugar, Parrot)
    with pytest.raises(AttributeError):
        _ = ctx.never_declared_nor_provided
