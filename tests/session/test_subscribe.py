"""Session.subscribe: a cursor over the log for UIs, the lag policy and the end of a session."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent.runtime import Context
from trio_agent.session import SessionDetachedError, SessionEvent, SubscriberLaggedError


async def test_receives_new_events_in_order(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    session.append("plugin/before", {})
    got: list[int] = []
    async with session.subscribe() as events:
        assert events.next_seq == 1

        async def reader() -> None:
            async for event in events:
                got.append(event.seq)
                if event.seq == 3:
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []  # parked, waiting for an append
            for i in range(3):
                session.append("plugin/x", {"i": i})
    assert got == [1, 2, 3]


async def test_from_seq_replays_the_log(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    for i in range(4):
        session.append("plugin/x", {"i": i})
    async with session.subscribe(from_seq=1) as events:
        assert [(await events.receive()).seq for _ in range(3)] == [1, 2, 3]
    with pytest.raises(ValueError, match="between 0 and 4"):
        session.subscribe(from_seq=5)
    with pytest.raises(ValueError, match="between 0 and 4"):
        session.subscribe(from_seq=-1)


async def test_a_slow_subscriber_never_blocks_append_and_misses_nothing(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    async with session.subscribe() as events:
        # Nobody reads while 10k events are appended (append is synchronous and never waits).
        for i in range(10_000):
            session.append("plugin/x", {"i": i})
        received = [await events.receive() for _ in range(10_000)]
    assert [e.seq for e in received] == list(range(10_000))
    assert received[0] is session.events[0]


async def test_max_lag_disconnects_and_tells_how_far_behind(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    async with session.subscribe(max_lag=3) as events:
        session.append("plugin/x", {})
        assert (await events.receive()).seq == 0
        for _ in range(5):
            session.append("plugin/x", {})
        with pytest.raises(SubscriberLaggedError, match="fell behind by 5 events") as info:
            await events.receive()
        assert info.value.next_seq == 1 and info.value.behind == 5
        assert isinstance(info.value, trio.BrokenResourceError)
        assert r"session.events[1:]" in str(info.value)
        with pytest.raises(SubscriberLaggedError):  # it stays disconnected
            await events.receive()
    # Catch up from the log, then follow again.
    missed = session.events[info.value.next_seq :]
    assert [e.seq for e in missed] == [1, 2, 3, 4, 5]
    async with session.subscribe(from_seq=len(session.events), max_lag=3) as again:
        session.append("plugin/x", {})
        assert (await again.receive()).seq == 6
    with pytest.raises(ValueError, match="max_lag"):
        session.subscribe(max_lag=0)


async def test_detach_ends_subscribers_after_the_remaining_events(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    got: list[int] = []
    done = trio.Event()

    async def ui() -> None:
        async with session.subscribe() as events:
            async for event in events:
                got.append(event.seq)
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ui)
        await trio.testing.wait_all_tasks_blocked()
        session.append("plugin/a", {})
        session.append("plugin/b", {})
        sctx.sessions.detach(session)
        await done.wait()
    assert got == [0, 1]
    with pytest.raises(SessionDetachedError):
        session.subscribe()


async def test_owner_unload_ends_subscribers(sctx: Context) -> None:
    scoped = sctx.scope_context("agent")
    session = scoped.sessions.create("s")
    ended = trio.Event()

    async def ui() -> None:
        async with session.subscribe() as events:
            async for _ in events:
                pass
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ui)
        await trio.testing.wait_all_tasks_blocked()
        await scoped.fiber.dispose()
        await ended.wait()


async def test_aclose_wakes_a_blocked_receiver(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    events = session.subscribe()
    outcome: list[type[BaseException]] = []

    async def blocked() -> None:
        try:
            await events.receive()
        except trio.ClosedResourceError:
            outcome.append(trio.ClosedResourceError)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(blocked)
        await trio.testing.wait_all_tasks_blocked()
        await events.aclose()
    assert outcome == [trio.ClosedResourceError]
    await events.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError):
        await events.receive()


async def test_cancelled_receive_loses_nothing(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    async with session.subscribe() as events:
        with trio.move_on_after(0) as scope:
            await events.receive()
        assert scope.cancelled_caught
        session.append("plugin/x", {})
        event: SessionEvent = await events.receive()
        assert event.seq == 0


async def test_receive_is_a_checkpoint(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    session.append("plugin/x", {})
    async with session.subscribe(from_seq=0) as events:
        with trio.testing.assert_checkpoints():
            await events.receive()


async def test_many_subscribers_each_get_everything(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    results: dict[int, list[int]] = {}

    async def ui(n: int) -> None:
        results[n] = []
        async with session.subscribe(from_seq=0) as events:
            async for event in events:
                results[n].append(event.seq)

    async with trio.open_nursery() as nursery:
        for n in range(5):
            nursery.start_soon(ui, n)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(3):
            session.append("plugin/x", {})
            await trio.testing.wait_all_tasks_blocked()
        sctx.sessions.detach(session)
    assert results == {n: [0, 1, 2] for n in range(5)}
