"""The shared suite: every test here runs on the jsonl, sqlite and memory backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from persistence_helpers import (
    BackendKind,
    every_core_event,
    open_store,
    sid,
    tree,
    write_turn,
)

from trio_agent.ids import SessionId
from trio_agent.persistence import (
    SessionInfo,
    SessionWriteError,
    StoredSession,
    StoredSessionExistsError,
    StoredSessionNotFoundError,
)
from trio_agent.runtime import open_runtime
from trio_agent.session import (
    EVENT_PAYLOADS,
    INTERRUPTED_OUTCOME_UNKNOWN_TEXT,
    SessionEvent,
    SessionStore,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    repair_events,
)
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def plain(events: Any) -> list[tuple[int, str, float, dict[str, Any]]]:
    return [(e.seq, e.type, e.time, e.data) for e in events]


def persisted(ctx: Any) -> Any:
    return ctx.session_persistence


HOSTILE_IDS = ["../x", "/etc/passwd", "a/b", "", "a" * 300, "x\x00y", ".hidden", "..", "a\\b"]


# --- round trips ------------------------------------------------------------------------------


async def test_round_trip_of_every_core_event_type(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("round-trip", meta={"title": "t", "n": [1, 2]}, cwd="sub")
        every_core_event(session)
        await ctx.sessions.flush(session)
        assert {e.type for e in session.events} >= set(EVENT_PAYLOADS) - {"session/end-seed"}
        expected_header = session.header
        expected = plain(session.events)
        expected_payloads = [e.payload for e in session.events]
    # A new runtime (a restart) reads the same log back.
    async with open_store(backend, tmp_path) as ctx:
        stored = await persisted(ctx).load("round-trip")
        assert isinstance(stored, StoredSession)
        assert stored.header == expected_header
        assert plain(stored.events) == expected
        assert [e.payload for e in stored.events] == expected_payloads
        assert all(isinstance(e, SessionEvent) for e in stored.events)


async def test_seeded_session_round_trips_with_its_end_seed(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        source = ctx.sessions.create("source")
        write_turn(source)
        child = ctx.sessions.fork(source, child_session_id="child")
        await ctx.sessions.flush(child)
        stored = await persisted(ctx).load("child")
        assert stored.header == child.header
        assert stored.header.parent_session == "source"
        assert plain(stored.events) == plain(child.events)
        assert stored.events[-1].type == "session/end-seed"
        # The source was never flushed: nothing stored for it.
        assert not await persisted(ctx).exists("source")


# --- list and exists --------------------------------------------------------------------------


async def test_list_reports_turns_title_and_times(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        assert await p.list() == ()
        first = ctx.sessions.create("first")
        write_turn(first, prompt="  Fix the build\nit fails on CI")
        write_turn(first, prompt="second prompt")
        second = ctx.sessions.create("second")
        second.append("plugin/note", {"x": 1})
        unused = ctx.sessions.create("unused")
        await ctx.sessions.flush(first)
        await ctx.sessions.flush(second)
        await ctx.sessions.flush(unused)
        infos = await p.list()
        assert [i.session_id for i in infos] == ["first", "second"]
        one, two = infos
        assert isinstance(one, SessionInfo)
        assert one == SessionInfo(
            session_id=SessionId("first"),
            created_at=first.header.created_at,
            updated_at=first.events[-1].time,
            turns=2,
            title="Fix the build",
        )
        assert two.turns == 0 and two.title is None
        assert two.updated_at == second.events[-1].time
        assert two.created_at == second.header.created_at


async def test_exists_is_true_only_once_flushed(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        session = ctx.sessions.create("s1")
        write_turn(session)
        assert await p.exists("s1") is False
        await ctx.sessions.flush(session)
        assert await p.exists("s1") is True
        assert await p.exists("other") is False
        with pytest.raises(StoredSessionNotFoundError) as info:
            await p.load("other")
        assert info.value.session_id == "other"
        assert "other" in str(info.value)


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
async def test_hostile_ids_are_refused_before_touching_the_disk(
    backend: BackendKind, tmp_path: Path, hostile: str
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        before = tree(tmp_path)
        with pytest.raises(ValueError, match="invalid session id"):
            await p.load(hostile)
        with pytest.raises(ValueError, match="invalid session id"):
            await p.exists(hostile)
        assert tree(tmp_path) == before == {}


async def test_non_string_ids_are_refused(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        with pytest.raises(TypeError):
            await persisted(ctx).load(42)


# --- write-behind -----------------------------------------------------------------------------


async def test_nothing_is_written_before_a_flush(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        session = ctx.sessions.create("buffered")
        write_turn(session)
        assert await p._backend.read(sid("buffered")) is None
        assert tree(tmp_path) == {}
        await ctx.sessions.flush(session)
        first = len(session.events)
        assert len((await p._backend.read(sid("buffered"))).events) == first
        write_turn(session)
        # Appended but not flushed: the store still holds the first turn only.
        assert len((await p._backend.read(sid("buffered"))).events) == first
        assert len(p._tracked["buffered"].pending) == len(session.events) - first
        await ctx.sessions.flush(session)
        stored = await p._backend.read(sid("buffered"))
        assert plain(stored.events) == plain(session.events)
        assert p._tracked["buffered"].pending == []


async def test_an_unused_session_leaves_nothing(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("unused")
        await ctx.sessions.flush(session)
        ctx.sessions.detach(session)
    async with open_store(backend, tmp_path) as ctx:
        assert await persisted(ctx).list() == ()
        assert not await persisted(ctx).exists("unused")
    if backend.name == "jsonl":
        assert tree(tmp_path) == {}


async def test_detach_writes_what_is_buffered(backend: BackendKind, tmp_path: Path) -> None:
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("detached")
        write_turn(session)
        expected = plain(session.events)
        ctx.sessions.detach(session)  # no flush: the final write is scheduled
    async with open_store(backend, tmp_path) as ctx:
        stored = await persisted(ctx).load("detached")
        assert plain(stored.events) == expected


async def test_unloading_the_plugin_flushes_live_sessions(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        fiber = await ctx.plugin(backend.plugin, backend.config(tmp_path))
        session = ctx.sessions.create("live")
        write_turn(session)
        expected = plain(session.events)
        await fiber.dispose()  # the session is still live: the unload writes its buffer
    async with open_store(backend, tmp_path) as ctx:
        assert plain((await persisted(ctx).load("live")).events) == expected


async def test_a_plugin_loaded_later_adopts_live_sessions(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_runtime() as ctx:
        await ctx.plugin(SessionStore)
        session = ctx.sessions.create("early")
        write_turn(session)
        fiber = await ctx.plugin(backend.plugin, backend.config(tmp_path))
        await ctx.sessions.flush(session)
        assert plain((await persisted(ctx).load("early")).events) == plain(session.events)
        # Reloading the plugin: the new instance finds the stored log and appends only what
        # is new (no collision, no duplicates).
        await fiber.dispose()
        fiber = await ctx.plugin(backend.plugin, backend.config(tmp_path))
        write_turn(session)
        await ctx.sessions.flush(session)
        assert plain((await persisted(ctx).load("early")).events) == plain(session.events)


async def test_load_of_a_live_session_flushes_it_first(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("live")
        write_turn(session, close=False)
        stored = await persisted(ctx).load("live")
        assert plain(stored.events) == plain(session.events)


async def test_concurrent_flushes_are_serialised_and_share_work(
    backend: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        real_write = p._backend.write
        calls: list[tuple[int, int]] = []
        active = 0

        async def counting_write(header: Any, position: Any, events: Any) -> Any:
            nonlocal active
            active += 1
            assert active == 1, "two writes of one session overlapped"
            calls.append((events[0].seq, len(events)))
            try:
                return await real_write(header, position, events)
            finally:
                active -= 1

        monkeypatch.setattr(p._backend, "write", counting_write)
        session = ctx.sessions.create("shared")
        write_turn(session)
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(ctx.sessions.flush, session)
        assert calls == [(0, len(session.events))]
        stored = await p._backend.read(sid("shared"))
        assert plain(stored.events) == plain(session.events)


async def test_a_failed_write_keeps_the_buffer_and_the_next_flush_retries(
    backend: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        real_write = p._backend.write
        failures: list[OSError] = []

        async def flaky_write(header: Any, position: Any, events: Any) -> Any:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await real_write(header, position, events)

        monkeypatch.setattr(p._backend, "write", flaky_write)
        session = ctx.sessions.create("flaky")
        write_turn(session)
        await ctx.sessions.flush(session)
        first = len(session.events)
        write_turn(session)
        failures.append(OSError(28, "No space left on device"))
        with pytest.raises(SessionWriteError, match="No space left") as info:
            await ctx.sessions.flush(session)
        assert isinstance(info.value, OSError)
        assert isinstance(info.value.error, OSError) and info.value.error.errno == 28
        assert "flaky" in str(info.value) and "retries" in str(info.value)
        assert len((await p._backend.read(sid("flaky"))).events) == first
        assert len(p._tracked["flaky"].pending) == len(session.events) - first
        await ctx.sessions.flush(session)
        stored = await p._backend.read(sid("flaky"))
        assert plain(stored.events) == plain(session.events)


async def test_a_failed_first_write_creates_nothing_and_is_retried(
    backend: BackendKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        real_write = p._backend.write
        failures = [OSError(5, "Input/output error")]

        async def flaky_write(header: Any, position: Any, events: Any) -> Any:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await real_write(header, position, events)

        monkeypatch.setattr(p._backend, "write", flaky_write)
        session = ctx.sessions.create("fresh")
        write_turn(session)
        with pytest.raises(SessionWriteError):
            await ctx.sessions.flush(session)
        assert not await p.exists("fresh")
        await ctx.sessions.flush(session)
        assert plain((await p.load("fresh")).events) == plain(session.events)


async def test_a_fresh_session_never_overwrites_a_stored_log(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("taken")
        write_turn(session, prompt="original")
        await ctx.sessions.flush(session)
        expected = plain(session.events)
    async with open_store(backend, tmp_path) as ctx:
        impostor = ctx.sessions.create("taken")
        write_turn(impostor, prompt="impostor")
        with pytest.raises(StoredSessionExistsError, match="already has a stored log"):
            await ctx.sessions.flush(impostor)
        ctx.sessions.detach(impostor)
    async with open_store(backend, tmp_path) as ctx:
        assert plain((await persisted(ctx).load("taken")).events) == expected


async def test_the_loop_logs_a_failed_turn_end_flush_and_the_next_turn_catches_up(
    backend: BackendKind,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_test_harness(
        [text("one"), text("two")],
        persistence=backend.plugin,
        persistence_config=backend.config(tmp_path),
    ) as h:
        p = persisted(h.ctx)
        real_write = p._backend.write
        failures = [OSError(28, "No space left on device")]

        async def flaky_write(header: Any, position: Any, events: Any) -> Any:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await real_write(header, position, events)

        monkeypatch.setattr(p._backend, "write", flaky_write)
        handle = await h.ctx.agents.create(agent_id="a", session_id="loop")
        agent = handle.agent
        agent.send("first")
        await agent.wait_idle()
        assert "flushing the session after turn 1 failed" in caplog.text
        assert not await p.exists("loop")
        agent.send("second")
        await agent.wait_idle()
        stored = await p._backend.read(sid("loop"))
        assert plain(stored.events) == plain(agent.session.events)
        await handle.aclose()


# --- resume -----------------------------------------------------------------------------------


async def test_resume_continues_seq_turns_and_history(backend: BackendKind, tmp_path: Path) -> None:
    config = backend.config(tmp_path)
    script = [tool_call("c1", "add", {"a": 1, "b": 2}), text("It is 3.")]
    async with open_test_harness(
        script, tools=[add], persistence=backend.plugin, persistence_config=config
    ) as h:
        handle = await h.ctx.agents.create(agent_id="a", session_id="conv")
        handle.agent.send("What is 1+2?")
        await handle.agent.wait_idle()
        history = tuple(handle.agent.session.derive_messages())
        events = plain(handle.agent.session.events)
        await handle.aclose()
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]

    async with open_test_harness(
        [text("Still 3.")], tools=[add], persistence=backend.plugin, persistence_config=config
    ) as h:
        sources: list[str] = []
        h.ctx.on("agent/session-start", lambda e: sources.append(e.source))
        handle = await h.ctx.agents.resume(agent_id="b", resume_session_id="conv")
        session = handle.agent.session
        assert session.id == "conv"
        assert plain(session.events[: len(events)]) == events
        assert session.events[len(events)].type == "session/end-seed"
        resumed = tuple(session.derive_messages())
        assert resumed == history
        assert [(m.role, m.text) for m in resumed] == [(m.role, m.text) for m in history]
        calls = [b.tool_call_id for m in resumed for b in m.content if hasattr(b, "tool_call_id")]
        assert calls == ["c1"]
        handle.agent.send("And again?")
        await handle.agent.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        assert sources == ["resume"]
        turn_starts = [
            e.payload_as(TurnStart).turn for e in session.events if e.type == "turn/start"
        ]
        assert turn_starts == [1, 2]
        assert [e.seq for e in session.events] == list(range(len(session.events)))
        request = h.model.requests[0]
        assert tuple(request.messages[: len(history)]) == history
        assert request.messages[len(history)].text == "And again?"
        final = plain(session.events)
        await handle.aclose()

    async with open_test_harness(persistence=backend.plugin, persistence_config=config) as h:
        stored = await persisted(h.ctx).load("conv")
        assert plain(stored.events) == final
        infos = await persisted(h.ctx).list()
        assert [(i.session_id, i.turns, i.title) for i in infos] == [("conv", 2, "What is 1+2?")]


async def test_resume_repairs_an_open_turn_and_writes_the_repair_back(
    backend: BackendKind, tmp_path: Path
) -> None:
    config = backend.config(tmp_path)
    async with open_store(backend, tmp_path) as ctx:
        session = ctx.sessions.create("crashed")
        write_turn(session)
        write_turn(session, prompt="second", close=False)  # tool/call without a result
        await ctx.sessions.flush(session)
        stored_count = len(session.events)
    async with open_test_harness(
        [text("Recovered.")], persistence=backend.plugin, persistence_config=config
    ) as h:
        p = persisted(h.ctx)
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="crashed")
        session = handle.agent.session
        closers = [e.type for e in session.events[stored_count:]]
        assert closers == ["tool/result", "step/end", "turn/end", "session/end-seed"]
        result = session.events[stored_count].payload_as(ToolResultEvent)
        assert result.call_id == "call-2" and result.result.is_error
        assert result.result.text == INTERRUPTED_OUTCOME_UNKNOWN_TEXT
        assert session.events[stored_count + 2].payload_as(TurnEnd).reason == "interrupted"
        # Not written yet: the repair goes out with the next flush.
        assert len((await p._backend.read(sid("crashed"))).events) == stored_count
        await h.ctx.sessions.flush(session)
        stored = await p._backend.read(sid("crashed"))
        assert plain(stored.events) == plain(session.events)
        assert repair_events(stored.events) == []
        handle.agent.send("go on")
        await handle.agent.wait_idle()
        assert session.last_turn == 3
        await handle.aclose()
    async with open_store(backend, tmp_path) as ctx:
        stored = await persisted(ctx).load("crashed")
        assert [e.seq for e in stored.events] == list(range(len(stored.events)))
        assert repair_events(stored.events) == []
        assert [e.payload_as(TurnEnd).reason for e in stored.events if e.type == "turn/end"] == [
            "completed",
            "interrupted",
            "completed",
        ]


async def test_resume_of_a_missing_session_is_a_clear_error(
    backend: BackendKind, tmp_path: Path
) -> None:
    async with open_test_harness(
        persistence=backend.plugin, persistence_config=backend.config(tmp_path)
    ) as h:
        with pytest.raises(StoredSessionNotFoundError, match="nope"):
            await h.ctx.agents.resume(agent_id="a", resume_session_id="nope")
        assert h.ctx.agents.list() == ()
        with pytest.raises(ValueError, match="invalid session id"):
            await h.ctx.agents.resume(agent_id="a", resume_session_id="../etc")


async def test_resuming_twice_in_one_runtime(backend: BackendKind, tmp_path: Path) -> None:
    async with open_test_harness(
        [text("one"), text("two"), text("three")],
        persistence=backend.plugin,
        persistence_config=backend.config(tmp_path),
    ) as h:
        handle = await h.ctx.agents.create(agent_id="a", session_id="again")
        handle.agent.send("1")
        await handle.agent.wait_idle()
        await handle.aclose()
        for turn in (2, 3):
            handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="again")
            handle.agent.send(str(turn))
            await handle.agent.wait_idle()
            events = plain(handle.agent.session.events)
            await handle.aclose()
            stored = await persisted(h.ctx).load("again")
            assert plain(stored.events) == events
            assert handle.agent.session.last_turn == turn


async def test_a_failed_final_write_is_retried_at_unload(
    backend: BackendKind,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_store(backend, tmp_path) as ctx:
        p = persisted(ctx)
        real_write = p._backend.write
        failed = trio.Event()

        async def failing_once(header: Any, position: Any, events: Any) -> Any:
            if not failed.is_set():
                failed.set()
                await trio.lowlevel.checkpoint()
                raise OSError(5, "Input/output error")
            return await real_write(header, position, events)

        monkeypatch.setattr(p._backend, "write", failing_once)
        first = ctx.sessions.create("x")
        write_turn(first)
        expected = plain(first.events)
        ctx.sessions.detach(first)
        await failed.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert "the final write after it was detached failed" in caplog.text
        old = p._tracked["x"]
        assert old.session is first and old.pending
        # A new session takes the id before the retry: the old buffer is kept aside.
        second = ctx.sessions.create("x")
        assert p._leftovers == [old]
        ctx.sessions.detach(second)
    async with open_store(backend, tmp_path) as ctx:
        assert plain((await persisted(ctx).load("x")).events) == expected
