"""FaultyBackend itself: which write a fault targets, what it records, the page cache."""

from __future__ import annotations

import errno

import pytest

from trio_agent.ids import SessionId
from trio_agent.persistence import MemoryBackend, MemoryStorage, Position
from trio_agent.runtime import open_runtime
from trio_agent.session import Session, SessionStore
from trio_agent.testing import BackendCall, FaultyBackend, append_tool_turn


async def make_session(session_id: str = "s1") -> Session:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        session = ctx.require(SessionStore).create(session_id)
        append_tool_turn(session)
        append_tool_turn(session)
    return session


async def test_faults_target_the_next_free_write_or_the_nth() -> None:
    session = await make_session()
    events = session.events
    faulty = FaultyBackend(MemoryBackend())
    first = faulty.fail_write()
    second = faulty.fail_write(OSError(errno.ENOSPC, "full"))
    fourth = faulty.fail_write(nth=4)
    assert (first.write, second.write, fourth.write) == (1, 2, 4)
    with pytest.raises(ValueError, match="already has a fault"):
        faulty.fail_write(nth=2)
    with pytest.raises(OSError, match="injected by FaultyBackend") as info:
        await faulty.write(session.header, None, events[:3])
    assert info.value.errno == errno.EIO and first.hit.is_set()
    with pytest.raises(OSError, match="full"):
        await faulty.write(session.header, None, events[:3])
    with pytest.raises(ValueError, match="write 2 has already started"):
        faulty.fail_write(nth=2)
    position = await faulty.write(session.header, None, events[:3])  # write 3: no fault
    with pytest.raises(OSError):
        await faulty.write(session.header, position, events[3:])
    assert fourth.hit.is_set()
    assert not await faulty.exists(SessionId("other"))
    assert faulty.calls == [
        BackendCall("write", session.id, range(0, 3), creates=True),
        BackendCall("write", session.id, range(0, 3), creates=True),
        BackendCall("write", session.id, range(0, 3), creates=True),
        BackendCall("write", session.id, range(3, len(events))),
        BackendCall("exists", SessionId("other")),
    ]


async def test_a_lost_sync_is_seen_by_its_own_reads_only() -> None:
    session = await make_session()
    events = session.events
    storage = MemoryStorage()
    faulty = FaultyBackend(MemoryBackend(storage))
    position = await faulty.write(session.header, None, events[:3])
    faulty.lose_sync()
    position = await faulty.write(session.header, position, events[3:])
    assert position.count == len(events)
    read = await faulty.read(session.id)
    assert read is not None and read.events == tuple(events)
    assert await faulty.exists(session.id)
    (info,) = await faulty.infos()
    assert info.turns == 2 and info.updated_at == events[-1].time
    # The inner backend (another process, or this one after a crash) never got them.
    inner = await MemoryBackend(storage).read(session.id)
    assert inner is not None and inner.events == tuple(events[:3])
    await faulty.aclose()
    read = await faulty.read(session.id)
    assert read is not None and read.events == tuple(events[:3])


async def test_a_lost_create_is_not_stored_anywhere_but_the_cache() -> None:
    session = await make_session()
    storage = MemoryStorage()
    faulty = FaultyBackend(MemoryBackend(storage))
    faulty.lose_sync()
    await faulty.write(session.header, None, session.events)
    assert await faulty.exists(session.id)
    assert [i.session_id for i in await faulty.infos()] == [session.id]
    assert storage.logs == {}


async def test_positions_from_elsewhere_are_refused() -> None:
    session = await make_session()
    faulty = FaultyBackend(MemoryBackend())
    with pytest.raises(TypeError, match="did not come from this FaultyBackend"):
        await faulty.write(session.header, Position(3), session.events[3:])
