"""The four dispatch modes, prepend, snapshots and scope filtering."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.runtime import Context, Disposer, Next


async def test_emit_runs_in_order_with_prepends_first(ctx: Context) -> None:
    seen: list[str] = []
    ctx.on("e", lambda p: seen.append(f"a{p}"))
    ctx.on("e", lambda p: seen.append(f"b{p}"))
    ctx.on("e", lambda p: seen.append(f"p1{p}"), prepend=True)
    ctx.on("e", lambda p: seen.append(f"p2{p}"), prepend=True)
    ctx.emit("e", 1)
    assert seen == ["p21", "p11", "a1", "b1"]


async def test_emit_contains_a_raising_listener(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def boom(_: object) -> None:
        raise RuntimeError("listener bug")

    ctx.on("e", lambda p: seen.append("first"))
    ctx.on("e", boom)
    ctx.on("e", lambda p: seen.append("last"))
    with caplog.at_level(logging.ERROR, "trio_agent.events"):
        ctx.emit("e")
    assert seen == ["first", "last"]
    assert "listener bug" in caplog.text


async def test_emit_rejects_async_listeners_without_leaking_a_coroutine(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    async def async_listener(_: object) -> None:
        raise AssertionError("never runs")

    seen: list[int] = []
    ctx.on("e", async_listener)
    ctx.on("e", seen.append)
    with caplog.at_level(logging.ERROR, "trio_agent.events"):
        ctx.emit("e", 7)
    assert seen == [7]
    assert "must be synchronous" in caplog.text


async def test_emit_iterates_a_snapshot(ctx: Context) -> None:
    seen: list[str] = []
    late: list[Disposer] = []

    def first(_: object) -> None:
        seen.append("first")
        if not late:
            late.append(ctx.on("e", lambda p: seen.append("late")))
            off_second()

    ctx.on("e", first)
    off_second = ctx.on("e", lambda p: seen.append("second"))
    ctx.emit("e")
    assert seen == ["first", "second"]  # removal and addition apply to the next dispatch
    seen.clear()
    ctx.emit("e")
    assert seen == ["first", "late"]


async def test_disposer_removes_listener(ctx: Context) -> None:
    seen: list[int] = []
    off = ctx.on("e", seen.append)
    off()
    off()  # idempotent
    ctx.emit("e", 1)
    assert seen == []


async def test_waterfall_first_registered_is_outermost(ctx: Context) -> None:
    trace: list[str] = []

    def make(tag: str) -> Any:
        async def listener(payload: list[str], next: Next) -> str:
            trace.append(f"enter {tag}")
            result = await next()
            trace.append(f"exit {tag}")
            return f"{tag}({result})"

        return listener

    ctx.on("w", make("a"))
    ctx.on("w", make("b"))

    async def default() -> str:
        trace.append("default")
        return "d"

    assert await ctx.waterfall("w", [], default) == "a(b(d))"
    assert trace == ["enter a", "enter b", "default", "exit b", "exit a"]


async def test_waterfall_short_circuit_skips_the_rest(ctx: Context) -> None:
    called: list[str] = []

    async def veto(payload: object, next: Next) -> str:
        return "vetoed"

    async def inner(payload: object, next: Next) -> str:
        called.append("inner")
        return str(await next())

    ctx.on("w", veto)
    ctx.on("w", inner)

    async def default() -> str:
        called.append("default")
        return "d"

    assert await ctx.waterfall("w", None, default) == "vetoed"
    assert called == []


async def test_waterfall_without_listeners_runs_default(ctx: Context) -> None:
    async def default() -> int:
        return 42

    assert await ctx.waterfall("nobody", None, default) == 42


async def test_waterfall_calling_next_twice_runs_the_same_rest_twice(ctx: Context) -> None:
    runs: list[str] = []

    async def twice(payload: object, next: Next) -> int:
        return int(await next()) + int(await next())

    async def inner(payload: object, next: Next) -> int:
        runs.append("inner")
        return int(await next())

    ctx.on("w", twice)
    ctx.on("w", inner)

    async def default() -> int:
        return 1

    assert await ctx.waterfall("w", None, default) == 2
    assert runs == ["inner", "inner"]


async def test_waterfall_listener_error_propagates(ctx: Context) -> None:
    async def boom(payload: object, next: Next) -> None:
        raise ValueError("policy bug")

    ctx.on("w", boom)

    async def default() -> None:
        return None

    with pytest.raises(ValueError, match="policy bug"):
        await ctx.waterfall("w", None, default)


async def test_serial_bails_on_first_non_none(ctx: Context) -> None:
    calls: list[str] = []

    async def none(_: object) -> None:
        calls.append("none")

    def sync_answer(_: object) -> str:
        calls.append("sync")
        return "answer"

    async def never(_: object) -> str:
        calls.append("never")
        return "late"

    ctx.on("s", none)
    ctx.on("s", sync_answer)
    ctx.on("s", never)
    assert await ctx.serial("s", None) == "answer"
    assert calls == ["none", "sync"]


async def test_serial_returns_none_when_nobody_answers_and_propagates_errors(ctx: Context) -> None:
    assert await ctx.serial("s", None) is None

    async def boom(_: object) -> None:
        raise KeyError("x")

    ctx.on("s", boom)
    with pytest.raises(KeyError):
        await ctx.serial("s", None)


async def test_parallel_failure_does_not_cancel_siblings(ctx: Context) -> None:
    release = trio.Event()
    finished: list[str] = []

    async def fails(_: object) -> None:
        raise RuntimeError("one")

    async def slow(_: object) -> None:
        await release.wait()
        finished.append("slow")

    async def fails_too(_: object) -> None:
        await trio.lowlevel.checkpoint()
        raise ValueError("two")

    ctx.on("p", fails)
    ctx.on("p", slow)
    ctx.on("p", fails_too)

    async def releaser() -> None:
        await trio.testing.wait_all_tasks_blocked()
        release.set()

    with pytest.RaisesGroup(RuntimeError, ValueError, flatten_subgroups=True):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(releaser)
            await ctx.parallel("p", None)
    assert finished == ["slow"]


async def test_parallel_runs_listeners_concurrently(ctx: Context) -> None:
    both_started = trio.Event()
    started: list[int] = []

    async def listener(_: object) -> None:
        started.append(1)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()

    ctx.on("p", listener)
    ctx.on("p", listener)
    with trio.fail_after(1):
        await ctx.parallel("p", None)
    assert len(started) == 2


async def test_a_lone_parallel_listener_runs_in_the_callers_task(ctx: Context) -> None:
    """One listener has nothing to run beside: no nursery, and its failure is still the
    group a parallel dispatch raises."""
    tasks: list[trio.lowlevel.Task] = []

    async def listener(_: object) -> None:
        tasks.append(trio.lowlevel.current_task())
        raise RuntimeError("alone")

    ctx.on("p", listener)
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="alone")):
        await ctx.parallel("p", None)
    assert tasks == [trio.lowlevel.current_task()]


async def test_scoped_listeners_hear_only_their_scope(ctx: Context) -> None:
    a = ctx.scope_context("a")
    b = ctx.scope_context("b")
    heard: list[tuple[str, str]] = []
    ctx.on("e", lambda p: heard.append(("global", p)))
    a.on("e", lambda p: heard.append(("a", p)))
    b.on("e", lambda p: heard.append(("b", p)))

    a.emit("e", "to-a")
    b.emit("e", "to-b")
    ctx.emit("e", "to-global")
    ctx.emit("e", "aimed-at-a", target=a.scope)
    a.emit("e", "a-but-global", target=None)
    assert heard == [
        ("global", "to-a"),
        ("a", "to-a"),
        ("global", "to-b"),
        ("b", "to-b"),
        ("global", "to-global"),
        ("global", "aimed-at-a"),
        ("a", "aimed-at-a"),
        ("global", "a-but-global"),
    ]


async def test_nested_scope_dispatch_reaches_ancestors_not_siblings(ctx: Context) -> None:
    parent = ctx.scope_context("parent")
    child = parent.scope_context("child")
    sibling = parent.scope_context("sibling")
    heard: list[str] = []
    parent.on("e", lambda p: heard.append("parent"))
    child.on("e", lambda p: heard.append("child"))
    sibling.on("e", lambda p: heard.append("sibling"))
    child.emit("e")
    assert heard == ["parent", "child"]
    heard.clear()
    parent.emit("e")
    assert heard == ["parent"]


async def test_scoped_waterfall_and_serial_filter_too(ctx: Context) -> None:
    a = ctx.scope_context("a")
    b = ctx.scope_context("b")

    async def tag(label: str, payload: list[str], next: Next) -> list[str]:
        payload.append(label)
        return list(await next())

    a.on("w", lambda p, n: tag("a", p, n))
    b.on("w", lambda p, n: tag("b", p, n))

    payload: list[str] = []

    async def default() -> list[str]:
        return payload

    assert await a.waterfall("w", payload, default) == ["a"]
    b.on("s", lambda p: "from-b")
    assert await a.serial("s", None) is None
    assert await b.serial("s", None) == "from-b"
