"""The conformance kit for persistence backends: every test a backend must pass under the shared
writer (round trips, list and exists, hostile ids, write-behind, failures, cancellation, resume
and repair, claims: one writer per session, and never writing over another writer's log)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import re
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio
import trio.testing

from ..agent import AgentOptions, AgentRegistry
from ..ids import SessionId
from ..llm._scripted import ScriptItem, text, tool_call
from ..persistence import (
    Backend,
    PersistenceService,
    Position,
    SessionBusyError,
    SessionInfo,
    SessionTamperedError,
    SessionWriteError,
    StoredSession,
    StoredSessionExistsError,
    StoredSessionNotFoundError,
)
from ..runtime import Context, open_runtime
from ..session import (
    EVENT_PAYLOADS,
    INTERRUPTED_OUTCOME_UNKNOWN_TEXT,
    SessionEvent,
    SessionHeader,
    SessionStore,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    repair_events,
)
from ..tools import tool
from ._faulty import FaultyBackend
from ._harness import TestHarness, open_test_harness
from ._logs import append_every_event_type, append_tool_turn

__all__ = ["BackendConformance", "check_backend"]

E = TypeVar("E", bound=BaseException)

#: Session ids a backend must never see: the writer refuses them before any call.
HOSTILE_IDS = ("../x", "/etc/passwd", "a/b", "", "a" * 300, "x\x00y", ".hidden", "..", "a\\b")

#: The guard on every wait for a held write (a generous bound, not a timing assertion).
_GUARD = 30.0


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def plain(events: Iterable[SessionEvent]) -> list[tuple[Any, ...]]:
    """Events as comparable tuples ``(seq, type, time, data)``."""
    return [(e.seq, e.type, e.time, e.data) for e in events]


@attrs.frozen
class Store:
    """A runtime with a session store and the backend under test mounted with the writer."""

    ctx: Context
    sessions: SessionStore
    persistence: PersistenceService


class BackendConformance:
    """The tests every :class:`~trio_agent.persistence.Backend` passes, for pytest.

    Subclass it in a test module, name the subclass ``Test...``, and implement
    :meth:`make_backend`; pytest (with pytest-trio's ``trio_mode``) collects the inherited
    tests::

        class TestMyBackend(BackendConformance):
            def make_backend(self, root: Path) -> Backend:
                return MyBackend(root / "store")

    Or run them all without pytest: :func:`check_backend`. Every test mounts the backend with
    :class:`~trio_agent.persistence.PersistenceService` and asserts through ``load()``,
    ``exists()`` and ``list()`` of a service, wrapping the backend in
    :class:`~trio_agent.testing.FaultyBackend` to inject failures. Override a test to skip or
    adapt it, and add your backend's own tests beside.
    """

    def make_backend(self, root: Path) -> Backend:
        """A fresh backend over the storage at ``root`` (an empty directory per test). Called
        again with the same ``root``, it must see the same logs: that is how the tests model a
        restart, another process, and a crash."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_backend(root)")

    # --- helpers ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def open_store(self, root: Path, backend: Backend | None = None) -> AsyncIterator[Store]:
        """A runtime with ``SessionStore`` and ``backend`` (default: a fresh
        :meth:`make_backend`) mounted with the writer, closed on exit."""
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            backend = self.make_backend(root) if backend is None else backend
            await ctx.plugin(PersistenceService, PersistenceService.Config(backend))
            yield Store(ctx, ctx.require(SessionStore), ctx.require(PersistenceService))

    @contextlib.asynccontextmanager
    async def open_harness(
        self, root: Path, responses: Iterable[ScriptItem] = (), backend: Backend | None = None
    ) -> AsyncIterator[TestHarness]:
        """:func:`~trio_agent.testing.open_test_harness` on ``backend`` (default: a fresh
        :meth:`make_backend`), with the ``add`` tool."""
        backend = self.make_backend(root) if backend is None else backend
        config = PersistenceService.Config(backend)
        async with open_test_harness(
            responses, tools=[add], persistence=PersistenceService, persistence_config=config
        ) as harness:
            yield harness

    async def read_back(self, root: Path, session_id: str) -> StoredSession | None:
        """What another process would read now: ``load()`` through a fresh backend in its own
        runtime, or ``None`` when nothing is stored."""
        async with self.open_store(root) as store:
            if not await store.persistence.exists(session_id):
                return None
            return await store.persistence.load(session_id)

    async def stored_events(self, root: Path, session_id: str) -> list[tuple[Any, ...]]:
        """The events (:func:`plain`) another process reads back now; ``[]`` when nothing is
        stored."""
        stored = await self.read_back(root, session_id)
        return [] if stored is None else plain(stored.events)

    async def change_behind_the_writer(
        self, root: Path, session_id: str, event: SessionEvent
    ) -> None:
        """Append ``event`` to the stored log of ``session_id`` the way another program that
        ignores claims would, while a writer holds the session (the tamper tests' intruder).

        The default writes through a fresh :meth:`make_backend` without claiming, which a file
        lock does not stop. A backend that refuses such a write (with
        :class:`~trio_agent.persistence.SessionBusyError`, as the PostgreSQL backend's fence
        does) overrides this to change its storage directly, as a program that bypasses the
        backend would (the PostgreSQL kit runs SQL)."""
        intruder = self.make_backend(root)
        try:
            read = await intruder.read(SessionId(session_id))
            assert read is not None, f"nothing is stored under {session_id!r} to change"
            try:
                await intruder.write(read.header, read.position, [event])
            except SessionBusyError as exc:
                exc.add_note(
                    "this backend refuses an unclaimed write while another writer holds the "
                    "session: override BackendConformance.change_behind_the_writer to change "
                    "its storage directly"
                )
                raise
        finally:
            with trio.CancelScope(shield=True):
                await intruder.aclose()

    # --- round trips ------------------------------------------------------------------------

    async def test_round_trip_of_every_core_event_type(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create(
                "round-trip", meta={"title": "t", "n": [1, 2]}, cwd="sub"
            )
            append_every_event_type(session)
            await store.sessions.flush(session)
            assert {e.type for e in session.events} >= set(EVENT_PAYLOADS) - {"session/end-seed"}
        # A new runtime (a restart) reads the same log back.
        async with self.open_store(tmp_path) as store:
            stored = await store.persistence.load("round-trip")
        assert isinstance(stored, StoredSession)
        assert stored.header == session.header
        assert plain(stored.events) == plain(session.events)
        assert [e.payload for e in stored.events] == [e.payload for e in session.events]
        assert all(isinstance(e, SessionEvent) for e in stored.events)

    async def test_seeded_session_round_trips_with_its_end_seed(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            source = store.sessions.create("source")
            append_tool_turn(source)
            child = store.sessions.fork(source, child_session_id="child")
            await store.sessions.flush(child)
            stored = await store.persistence.load("child")
            assert stored.header == child.header
            assert stored.header.parent_session == "source"
            assert plain(stored.events) == plain(child.events)
            assert stored.events[-1].type == "session/end-seed"
            # The source was never flushed: nothing stored for it.
            assert not await store.persistence.exists("source")

    # --- list, exists, ids ------------------------------------------------------------------

    async def test_list_reports_turns_title_and_times(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            assert await store.persistence.list() == ()
            first = store.sessions.create("first")
            append_tool_turn(first, prompt="  Fix the build\nit fails on CI")
            append_tool_turn(first, prompt="second prompt")
            second = store.sessions.create("second")
            second.append("plugin/note", {"x": 1})
            unused = store.sessions.create("unused")
            for session in (first, second, unused):
                await store.sessions.flush(session)
            infos = await store.persistence.list()
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

    async def test_exists_is_true_only_once_flushed(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("s1")
            append_tool_turn(session)
            assert await store.persistence.exists("s1") is False
            await store.sessions.flush(session)
            assert await store.persistence.exists("s1") is True
            assert await store.persistence.exists("other") is False
            with _raises(StoredSessionNotFoundError) as caught:
                await store.persistence.load("other")
        assert caught[0].session_id == "other"
        assert "other" in str(caught[0])

    async def test_hostile_ids_are_refused_before_the_backend_sees_them(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            before = _tree(tmp_path)
            for hostile in HOSTILE_IDS:
                for call in (store.persistence.load, store.persistence.exists):
                    with _raises(ValueError, match="invalid session id"):
                        await call(hostile)
                for claim in (store.persistence.acquire, store.persistence.release):
                    with _raises(ValueError, match="invalid session id"):
                        await claim(hostile)
            assert faulty.calls == []
            assert _tree(tmp_path) == before

    async def test_non_string_ids_are_refused(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            for value in (42, None, b"s1"):
                with _raises(TypeError):
                    await store.persistence.load(value)  # type: ignore[arg-type]

    # --- write-behind -----------------------------------------------------------------------

    async def test_nothing_is_written_before_a_flush(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("buffered")
            append_tool_turn(session)
            assert not await store.persistence.exists("buffered")
            assert faulty.writes == []
            await store.sessions.flush(session)
            first = len(session.events)
            assert len(await self.stored_events(tmp_path, "buffered")) == first
            append_tool_turn(session)
            # Appended but not flushed: the store still holds the first turn only.
            assert len(await self.stored_events(tmp_path, "buffered")) == first
            await store.sessions.flush(session)
            assert await self.stored_events(tmp_path, "buffered") == plain(session.events)
            # Each flush wrote only what was new.
            assert [w.seqs for w in faulty.writes] == [
                range(0, first),
                range(first, len(session.events)),
            ]
            assert [w.creates for w in faulty.writes] == [True, False]

    async def test_an_unused_session_leaves_nothing(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            before = _tree(tmp_path)
            session = store.sessions.create("unused")
            await store.sessions.flush(session)
            store.sessions.detach(session)
        async with self.open_store(tmp_path) as store:
            assert await store.persistence.list() == ()
            assert not await store.persistence.exists("unused")
        assert _tree(tmp_path) == before

    async def test_detach_writes_what_is_buffered(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("detached")
            append_tool_turn(session)
            store.sessions.detach(session)  # no flush: the final write is scheduled
        assert await self.stored_events(tmp_path, "detached") == plain(session.events)

    async def test_unloading_the_service_flushes_live_sessions(self, tmp_path: Path) -> None:
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            config = PersistenceService.Config(backend=self.make_backend(tmp_path))
            fiber = await ctx.plugin(PersistenceService, config)
            session = ctx.require(SessionStore).create("live")
            append_tool_turn(session)
            await fiber.dispose()  # the session is still live: the unload writes its buffer
        assert await self.stored_events(tmp_path, "live") == plain(session.events)

    async def test_a_service_loaded_later_adopts_live_sessions(self, tmp_path: Path) -> None:
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            sessions = ctx.require(SessionStore)
            session = sessions.create("early")
            append_tool_turn(session)
            faulty = FaultyBackend(self.make_backend(tmp_path))
            fiber = await ctx.plugin(PersistenceService, PersistenceService.Config(faulty))
            await sessions.flush(session)
            stored = await ctx.require(PersistenceService).load("early")
            assert plain(stored.events) == plain(session.events)
            # Reloading the service: the new instance finds the stored log and appends only
            # what is new (no collision, no duplicates).
            await fiber.dispose()
            faulty = FaultyBackend(self.make_backend(tmp_path))
            await ctx.plugin(PersistenceService, PersistenceService.Config(faulty))
            first = len(session.events)
            append_tool_turn(session)
            await sessions.flush(session)
            stored = await ctx.require(PersistenceService).load("early")
            assert plain(stored.events) == plain(session.events)
            assert [w.seqs for w in faulty.writes] == [range(first, len(session.events))]

    async def test_load_of_a_live_session_flushes_it_first(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("live")
            append_tool_turn(session, close=False)
            stored = await store.persistence.load("live")
            assert plain(stored.events) == plain(session.events)

    async def test_concurrent_flushes_are_serialised_and_share_work(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("shared")
            append_tool_turn(session)
            held = faulty.hold_write()
            with trio.fail_after(_GUARD):
                async with trio.open_nursery() as nursery:
                    for _ in range(3):
                        nursery.start_soon(store.sessions.flush, session)
                    await held.hit.wait()
                    await trio.testing.wait_all_tasks_blocked()  # the others wait their turn
                    held.release()
            assert [(w.seqs, w.overlapped) for w in faulty.writes] == [
                (range(0, len(session.events)), False)
            ]
            stored = await store.persistence.load("shared")
            assert plain(stored.events) == plain(session.events)

    # --- failures ---------------------------------------------------------------------------

    async def test_a_failed_write_keeps_the_buffer_and_the_next_flush_retries(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("flaky")
            append_tool_turn(session)
            await store.sessions.flush(session)
            first = len(session.events)
            append_tool_turn(session)
            faulty.fail_write(OSError(28, "No space left on device"))
            with _raises(SessionWriteError, match="No space left") as caught:
                await store.sessions.flush(session)
            error = caught[0]
            assert isinstance(error, OSError)
            assert isinstance(error.error, OSError) and error.error.errno == 28
            assert "flaky" in str(error) and "retries" in str(error)
            assert len(await self.stored_events(tmp_path, "flaky")) == first
            await store.sessions.flush(session)
            stored = await store.persistence.load("flaky")
            assert plain(stored.events) == plain(session.events)
            assert faulty.writes[-1].seqs == range(first, len(session.events))

    async def test_a_failed_first_write_creates_nothing_and_is_retried(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("fresh")
            append_tool_turn(session)
            faulty.fail_write(OSError(5, "Input/output error"))
            with _raises(SessionWriteError):
                await store.sessions.flush(session)
            assert not await store.persistence.exists("fresh")
            await store.sessions.flush(session)
            stored = await store.persistence.load("fresh")
            assert plain(stored.events) == plain(session.events)

    async def test_a_write_that_failed_after_storing_is_not_stored_twice(
        self, tmp_path: Path
    ) -> None:
        # The outcome of a failed write is unknown (a lost acknowledgement): the retry reads
        # the log back and continues after what is there, for a create and for an append.
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("unknown")
            for _ in range(2):
                append_tool_turn(session)
                faulty.fail_write(stored=True)
                with _raises(SessionWriteError):
                    await store.sessions.flush(session)
                assert await self.stored_events(tmp_path, "unknown") == plain(session.events)
                count = len(faulty.writes)
                await store.sessions.flush(session)  # nothing left to write
                assert len(faulty.writes) == count
            session.append("plugin/after", {"n": 1})
            await store.sessions.flush(session)
            assert faulty.writes[-1].seqs == range(len(session.events) - 1, len(session.events))
        assert await self.stored_events(tmp_path, "unknown") == plain(session.events)

    async def test_a_fresh_session_never_overwrites_a_stored_log(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("taken")
            append_tool_turn(session, prompt="original")
            await store.sessions.flush(session)
        async with self.open_store(tmp_path) as store:
            impostor = store.sessions.create("taken")
            append_tool_turn(impostor, prompt="impostor")
            with _raises(StoredSessionExistsError, match="already has a stored log"):
                await store.sessions.flush(impostor)
            store.sessions.detach(impostor)
        # Also when the refusal comes from the read-back after a failed write.
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            impostor = store.sessions.create("taken")
            append_tool_turn(impostor, prompt="impostor")
            faulty.fail_write()
            with _raises(SessionWriteError):
                await store.sessions.flush(impostor)
            with _raises(StoredSessionExistsError, match="already has a stored log"):
                await store.sessions.flush(impostor)
            store.sessions.detach(impostor)
        assert await self.stored_events(tmp_path, "taken") == plain(session.events)

    async def test_the_loop_logs_a_failed_turn_end_flush_and_the_next_turn_catches_up(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_harness(tmp_path, [text("one"), text("two")], faulty) as h:
            persistence = h.ctx.require(PersistenceService)
            faulty.fail_write(OSError(28, "No space left on device"))
            handle = await h.ctx.require(AgentRegistry).create(
                agent_id="a", session_id="loop", agent_options=AgentOptions(durability="turn")
            )
            agent = handle.agent
            with _captured_logs() as records:
                agent.send("first")
                await agent.wait_idle()
            assert any("flushing the session after turn 1 failed" in r for r in records), records
            assert not await persistence.exists("loop")
            agent.send("second")
            await agent.wait_idle()
            assert await self.stored_events(tmp_path, "loop") == plain(agent.session.events)
            await handle.aclose()

    async def test_a_failed_durability_point_ends_the_turn_error_and_nothing_is_lost(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        script = [tool_call("c1", "add", {"a": 1, "b": 2}), text("3"), text("again")]
        async with self.open_harness(tmp_path, script, faulty) as h:
            errors: list[BaseException] = []
            h.ctx.on("agent/error", lambda event: errors.append(event.error))
            handle = await h.ctx.require(AgentRegistry).create(agent_id="a", session_id="steps")
            agent = handle.agent
            # The flush after the prompt fails: the turn makes no model call and ends "error";
            # the turn-end flush retries and stores everything.
            faulty.fail_write(OSError(28, "No space left on device"))
            with _captured_logs():
                agent.send("first")
                await agent.wait_idle()
            assert [type(e) for e in errors] == [SessionWriteError]
            assert [e.type for e in agent.session.events if e.type == "turn/end"] == ["turn/end"]
            assert agent.session.events[-1].payload_as(TurnEnd).reason == "error"
            assert h.model.requests == []
            assert await self.stored_events(tmp_path, "steps") == plain(agent.session.events)
            # A failed write-ahead flush: the tool body does not run, the turn ends "error".
            errors.clear()
            faulty.fail_write(nth=len(faulty.writes) + 2)  # after the prompt's and step 1's
            agent.send("second")
            await agent.wait_idle()
            assert [type(e) for e in errors] == [SessionWriteError]
            results = [
                e.payload_as(ToolResultEvent).result
                for e in agent.session.events
                if e.type == "tool/result"
            ]
            assert [r.code for r in results] == ["ABORTED_BEFORE_DISPATCH"]
            assert agent.session.events[-1].payload_as(TurnEnd).reason == "error"
            assert await self.stored_events(tmp_path, "steps") == plain(agent.session.events)
            await handle.aclose()

    async def test_a_failed_final_write_is_retried_at_unload(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            failed = faulty.fail_write()
            first = store.sessions.create("x")
            append_tool_turn(first)
            with _captured_logs() as records:
                store.sessions.detach(first)
                with trio.fail_after(_GUARD):
                    await failed.hit.wait()
                await trio.testing.wait_all_tasks_blocked()
            assert any("the final write after it was detached failed" in r for r in records)
            assert not await store.persistence.exists("x")
            # A new session takes the id before the retry: the old buffer is kept aside, and
            # the unload writes it.
            second = store.sessions.create("x")
            store.sessions.detach(second)
        assert await self.stored_events(tmp_path, "x") == plain(first.events)

    async def test_a_lost_sync_is_missing_after_a_crash_and_the_log_still_resumes(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("lost")
            append_tool_turn(session)
            await store.sessions.flush(session)
            durable = plain(session.events)
            lost = faulty.lose_sync()
            append_tool_turn(session, prompt="never synced")
            await store.sessions.flush(session)  # reported durable
            assert lost.hit.is_set()
            # This process reads it back (the page cache), another one does not.
            assert plain((await store.persistence.load("lost")).events) == plain(session.events)
            assert await self.stored_events(tmp_path, "lost") == durable
            # The crash: the process dies with the write never synced.
        stored = _stored(await self.read_back(tmp_path, "lost"))
        assert plain(stored.events) == durable
        assert repair_events(stored.events) == []
        async with self.open_harness(tmp_path, [text("Back.")]) as h:
            handle = await h.ctx.require(AgentRegistry).resume(
                agent_id="a", resume_session_id="lost"
            )
            handle.agent.send("again")
            await handle.agent.wait_idle()
            resumed = handle.agent.session
            assert resumed.last_turn == 2
            assert [e.seq for e in resumed.events] == list(range(len(resumed.events)))
            await handle.aclose()
        assert await self.stored_events(tmp_path, "lost") == plain(resumed.events)

    async def test_a_lost_sync_is_synced_by_the_next_write(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("later")
            append_tool_turn(session)
            faulty.lose_sync()  # even the create
            await store.sessions.flush(session)
            assert await self.read_back(tmp_path, "later") is None
            append_tool_turn(session)
            await store.sessions.flush(session)
            assert await self.stored_events(tmp_path, "later") == plain(session.events)

    # --- cancellation -----------------------------------------------------------------------

    async def test_a_cancel_mid_write_waits_for_the_write_and_keeps_the_books(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("s1")
            append_tool_turn(session)
            await store.sessions.flush(session)  # the log exists: the next write is an append
            append_tool_turn(session)
            held = faulty.hold_write(stored=True)
            finished = trio.Event()
            scope = trio.CancelScope()

            async def flush() -> None:
                with scope:
                    await store.sessions.flush(session)
                finished.set()

            with trio.fail_after(_GUARD):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(flush)
                    await held.hit.wait()
                    scope.cancel()
                    await trio.testing.wait_all_tasks_blocked()
                    assert not finished.is_set()  # the flush waits for the write despite the cancel
                    held.release()
            assert scope.cancel_called
            # Whatever the cancel did to the caller, the write happened and was recorded:
            # nothing is left to write, and nothing is written twice.
            assert await self.stored_events(tmp_path, "s1") == plain(session.events)
            count = len(faulty.writes)
            await store.sessions.flush(session)
            assert len(faulty.writes) == count

    async def test_a_cancel_before_the_write_stores_nothing_and_keeps_the_buffer(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("s1")
            append_tool_turn(session)
            held = faulty.hold_write()
            with trio.fail_after(_GUARD), trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.sessions.flush, session)
                    await held.hit.wait()
                    scope.cancel()
            assert scope.cancelled_caught
            assert not await store.persistence.exists("s1")
            await store.sessions.flush(session)
            assert plain((await store.persistence.load("s1")).events) == plain(session.events)

    async def test_a_cancel_while_waiting_for_the_lock_writes_nothing(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("s1")
            append_tool_turn(session)
            held = faulty.hold_write()
            with trio.fail_after(_GUARD):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.sessions.flush, session)
                    await held.hit.wait()
                    with trio.CancelScope() as scope:
                        async with trio.open_nursery() as waiting:
                            waiting.start_soon(store.sessions.flush, session)
                            await trio.testing.wait_all_tasks_blocked()
                            scope.cancel()
                    assert scope.cancelled_caught
                    assert not await store.persistence.exists("s1")
                    held.release()
            # The one write that ran took the whole buffer; the cancelled flush wrote nothing.
            assert [w.seqs for w in faulty.writes] == [range(0, len(session.events))]
            assert plain((await store.persistence.load("s1")).events) == plain(session.events)

    async def test_unloading_waits_for_a_final_write_in_flight(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            fiber = await ctx.plugin(PersistenceService, PersistenceService.Config(faulty))
            session = ctx.require(SessionStore).create("s1")
            append_tool_turn(session)
            held = faulty.hold_write(stored=True)
            ctx.require(SessionStore).detach(session)  # the final write runs in the service
            unloaded = trio.Event()

            async def unload() -> None:
                await fiber.dispose()
                unloaded.set()

            with trio.fail_after(_GUARD):
                await held.hit.wait()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(unload)
                    await trio.testing.wait_all_tasks_blocked()
                    assert not unloaded.is_set()
                    held.release()
        assert await self.stored_events(tmp_path, "s1") == plain(session.events)

    async def test_a_cancelled_backend_write_is_complete_or_not_done(self, tmp_path: Path) -> None:
        # The backend's own contract, without the writer: a write cancelled before it starts,
        # or while it runs, either returns (everything stored) or raises Cancelled (nothing).
        async with open_runtime() as ctx:
            await ctx.plugin(SessionStore)
            session = ctx.require(SessionStore).create("bare")
            for _ in range(3):
                append_tool_turn(session)
        header, events = session.header, session.events
        third = len(events) // 3
        backend = self.make_backend(tmp_path)
        try:
            position = await backend.write(header, None, events[:third])
            for end, when in ((2 * third, "before"), (len(events), "while")):
                batch = events[position.count : end]
                written = await _cancelled_write(backend, header, position, batch, when)
                position = written or position
                read = await backend.read(header.session_id)
                assert read is not None
                assert plain(read.events) == plain(events[: position.count]), when
                assert read.position.count == position.count
                assert written is None or written.count == end
            if position.count < len(events):  # the cancel "while" may have come too late
                position = await backend.write(header, position, events[position.count :])
            read = await backend.read(header.session_id)
            assert read is not None and plain(read.events) == plain(events)
        finally:
            with trio.CancelScope(shield=True):
                await backend.aclose()

    # --- resume and repair ------------------------------------------------------------------

    async def test_resume_continues_seq_turns_and_history(self, tmp_path: Path) -> None:
        script = [tool_call("c1", "add", {"a": 1, "b": 2}), text("It is 3.")]
        async with self.open_harness(tmp_path, script) as h:
            handle = await h.ctx.require(AgentRegistry).create(agent_id="a", session_id="conv")
            handle.agent.send("What is 1+2?")
            await handle.agent.wait_idle()
            history = tuple(handle.agent.session.derive_messages())
            events = plain(handle.agent.session.events)
            await handle.aclose()
        assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]

        async with self.open_harness(tmp_path, [text("Still 3.")]) as h:
            sources: list[str] = []
            h.ctx.on("agent/session-start", lambda e: sources.append(e.source))
            handle = await h.ctx.require(AgentRegistry).resume(
                agent_id="b", resume_session_id="conv"
            )
            session = handle.agent.session
            assert session.id == "conv"
            assert plain(session.events[: len(events)]) == events
            assert session.events[len(events)].type == "session/end-seed"
            resumed = tuple(session.derive_messages())
            assert resumed == history
            calls = [
                block.tool_call_id
                for m in resumed
                for block in m.content
                if hasattr(block, "tool_call_id")
            ]
            assert calls == ["c1"]
            handle.agent.send("And again?")
            await handle.agent.wait_idle()
            await trio.testing.wait_all_tasks_blocked()
            assert sources == ["resume"]
            turns = [e.payload_as(TurnStart).turn for e in session.events if e.type == "turn/start"]
            assert turns == [1, 2]
            assert [e.seq for e in session.events] == list(range(len(session.events)))
            request = h.model.requests[0]
            assert tuple(request.messages[: len(history)]) == history
            assert request.messages[len(history)].text == "And again?"
            final = plain(session.events)
            await handle.aclose()

        async with self.open_store(tmp_path) as store:
            stored = await store.persistence.load("conv")
            infos = await store.persistence.list()
        assert plain(stored.events) == final
        assert [(i.session_id, i.turns, i.title) for i in infos] == [("conv", 2, "What is 1+2?")]

    async def test_resume_repairs_an_open_turn_and_writes_the_repair_back(
        self, tmp_path: Path
    ) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("crashed")
            append_tool_turn(session)
            append_tool_turn(session, prompt="second", close=False)  # a call without result
            await store.sessions.flush(session)
            stored_count = len(session.events)
        async with self.open_harness(tmp_path, [text("Recovered.")]) as h:
            handle = await h.ctx.require(AgentRegistry).resume(
                agent_id="a", resume_session_id="crashed"
            )
            session = handle.agent.session
            closers = [e.type for e in session.events[stored_count:]]
            assert closers == ["tool/result", "step/end", "turn/end", "session/end-seed"]
            result = session.events[stored_count].payload_as(ToolResultEvent)
            assert result.call_id == "call-2" and result.result.is_error
            assert result.result.text == INTERRUPTED_OUTCOME_UNKNOWN_TEXT
            assert session.events[stored_count + 2].payload_as(TurnEnd).reason == "interrupted"
            # Not written yet: the repair goes out with the next flush.
            assert len(await self.stored_events(tmp_path, "crashed")) == stored_count
            await h.ctx.require(SessionStore).flush(session)
            assert await self.stored_events(tmp_path, "crashed") == plain(session.events)
            assert repair_events(session.events) == []
            handle.agent.send("go on")
            await handle.agent.wait_idle()
            assert session.last_turn == 3
            await handle.aclose()
        stored = _stored(await self.read_back(tmp_path, "crashed"))
        assert [e.seq for e in stored.events] == list(range(len(stored.events)))
        assert repair_events(stored.events) == []
        reasons = [e.payload_as(TurnEnd).reason for e in stored.events if e.type == "turn/end"]
        assert reasons == ["completed", "interrupted", "completed"]

    async def test_resume_of_a_missing_session_is_a_clear_error(self, tmp_path: Path) -> None:
        async with self.open_harness(tmp_path) as h:
            agents = h.ctx.require(AgentRegistry)
            with _raises(StoredSessionNotFoundError, match="nope"):
                await agents.resume(agent_id="a", resume_session_id="nope")
            assert agents.list() == ()
            with _raises(ValueError, match="invalid session id"):
                await agents.resume(agent_id="a", resume_session_id="../etc")

    async def test_resuming_twice_in_one_runtime(self, tmp_path: Path) -> None:
        async with self.open_harness(tmp_path, [text("one"), text("two"), text("three")]) as h:
            agents = h.ctx.require(AgentRegistry)
            persistence = h.ctx.require(PersistenceService)
            handle = await agents.create(agent_id="a", session_id="again")
            handle.agent.send("1")
            await handle.agent.wait_idle()
            await handle.aclose()
            for turn in (2, 3):
                handle = await agents.resume(agent_id="a", resume_session_id="again")
                handle.agent.send(str(turn))
                await handle.agent.wait_idle()
                events = plain(handle.agent.session.events)
                await handle.aclose()
                assert plain((await persistence.load("again")).events) == events
                assert handle.agent.session.last_turn == turn

    # --- claims -----------------------------------------------------------------------------

    async def test_a_claim_is_passed_on_once_and_released_after_the_final_write(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            await store.persistence.acquire("claimed")
            await store.persistence.acquire("claimed")  # held already: not passed on again
            await store.persistence.acquire("never-used")
            session = store.sessions.create("claimed")
            append_tool_turn(session)
            store.sessions.detach(session)
            with trio.fail_after(_GUARD):
                while not any(c.method == "release" for c in faulty.calls):
                    await trio.testing.wait_all_tasks_blocked()
            lifecycle = [(c.method, c.session_id) for c in faulty.calls if c.method != "read"]
            assert lifecycle == [
                ("acquire", "claimed"),
                ("acquire", "never-used"),
                ("write", "claimed"),
                ("release", "claimed"),
            ]
        # The unload releases what is still claimed, then closes the backend.
        tail = [(c.method, c.session_id) for c in faulty.calls[-2:]]
        assert tail == [("release", "never-used"), ("aclose", None)]

    async def test_a_claimed_session_is_busy_for_another_writer(self, tmp_path: Path) -> None:
        # Two services over the same storage are two processes: one session, one writer. (A
        # backend may let a session with no log yet be claimed twice, as JSONL does: the second
        # create then finds the log and refuses.)
        async with self.open_store(tmp_path) as second:
            async with self.open_store(tmp_path) as first:
                await first.persistence.acquire("one-writer")
                session = first.sessions.create("one-writer")
                append_tool_turn(session)
                await first.sessions.flush(session)
                with _raises(SessionBusyError, match="one-writer") as caught:
                    await second.persistence.acquire("one-writer")
                assert caught[0].session_id == "one-writer"
                assert caught[0].pid in (None, os.getpid())
                await second.persistence.acquire("another")  # other sessions are free
                await first.persistence.release("one-writer")  # a live session's: kept
                with _raises(SessionBusyError):
                    await second.persistence.acquire("one-writer")
            # The first writer went away (a process exiting): its claims went with it.
            await second.persistence.acquire("one-writer")

    async def test_a_busy_session_is_neither_resumed_nor_created_and_nothing_is_published(
        self, tmp_path: Path
    ) -> None:
        async with self.open_harness(tmp_path, [text("one")]) as holder:
            handle = await holder.ctx.require(AgentRegistry).create(agent_id="a", session_id="held")
            handle.agent.send("hello")
            await handle.agent.wait_idle()
            stored = await self.stored_events(tmp_path, "held")
            async with self.open_harness(tmp_path) as other:
                agents = other.ctx.require(AgentRegistry)
                published: list[object] = []
                other.ctx.on("session/created", published.append)
                other.ctx.on("agent/created", published.append)
                with _raises(SessionBusyError, match="held"):
                    await agents.resume(agent_id="b", resume_session_id="held")
                with _raises(SessionBusyError, match="held"):
                    await agents.create(agent_id="b", session_id="held")
                assert published == [] and agents.list() == ()
                assert other.ctx.require(SessionStore).list() == ()
            await handle.aclose()
        assert await self.stored_events(tmp_path, "held") == stored
        # Once the holder is gone, the session resumes.
        async with self.open_harness(tmp_path) as h:
            handle = await h.ctx.require(AgentRegistry).resume(
                agent_id="b", resume_session_id="held"
            )
            await handle.aclose()

    async def test_a_failed_set_up_gives_the_claim_back(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path) as store:
            session = store.sessions.create("setup")
            append_tool_turn(session)
            await store.sessions.flush(session)
            store.sessions.detach(session)

        def fail(agent: object) -> None:
            raise RuntimeError("set-up failed")

        async with self.open_harness(tmp_path) as h:
            with _raises(RuntimeError, match="set-up failed"):
                await h.ctx.require(AgentRegistry).resume(
                    agent_id="a", resume_session_id="setup", setup=fail
                )
            async with self.open_store(tmp_path) as other:
                await other.persistence.acquire("setup")  # the failed resume holds nothing

    async def test_a_session_published_without_a_claim_is_claimed_by_its_first_write(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("unclaimed")  # synchronous: no claim yet
            append_tool_turn(session)
            assert [c.method for c in faulty.calls] == []
            await store.sessions.flush(session)
            assert [c.method for c in faulty.calls if c.method != "read"] == ["acquire", "write"]
            async with self.open_store(tmp_path) as other:
                with _raises(SessionBusyError):
                    await other.persistence.acquire("unclaimed")
                # The same id published there without a claim: its first flush is refused.
                impostor = other.sessions.create("unclaimed")
                append_tool_turn(impostor)
                with _raises(SessionBusyError):
                    await other.sessions.flush(impostor)
                other.sessions.detach(impostor)
            assert await self.stored_events(tmp_path, "unclaimed") == plain(session.events)

    async def test_a_log_another_writer_changed_is_never_written_over(self, tmp_path: Path) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            session = store.sessions.create("changed")
            append_tool_turn(session)
            await store.sessions.flush(session)
            # Someone else appends to the live log, ignoring the claim.
            foreign = SessionEvent(len(session.events), "plugin/intruder", 1.0, {"x": 1})
            await self.change_behind_the_writer(tmp_path, session.id, foreign)
            theirs = await self.stored_events(tmp_path, "changed")
            append_tool_turn(session, prompt="mine")
            writes = len(faulty.writes)
            with (
                _captured_logs() as records,
                _raises(SessionTamperedError, match="another") as caught,
            ):
                await store.sessions.flush(session)
            assert caught[0].session_id == "changed"
            assert caught[0].path == faulty.location(session.id)
            assert any("unwritten events" in r for r in records), records
            # Nothing of theirs was cut, nothing of ours written; our events are kept.
            assert await self.stored_events(tmp_path, "changed") == theirs
            assert session.events[-1].type == "turn/end"
            # Writing stopped for good: the next flush refuses without touching the storage.
            session.append("plugin/more", {})
            with _raises(SessionTamperedError, match="not written"):
                await store.sessions.flush(session)
            assert len(faulty.writes) == writes + 1
            with _captured_logs() as records:
                store.sessions.detach(session)
                with trio.fail_after(_GUARD):
                    while not any(c.method == "release" for c in faulty.calls):
                        await trio.testing.wait_all_tasks_blocked()
            assert any("never written" in r for r in records), records
        assert await self.stored_events(tmp_path, "changed") == theirs

    async def test_a_change_found_by_the_final_write_gives_the_claim_back(
        self, tmp_path: Path
    ) -> None:
        faulty = FaultyBackend(self.make_backend(tmp_path))
        async with self.open_store(tmp_path, faulty) as store:
            await store.persistence.acquire("final")
            session = store.sessions.create("final")
            append_tool_turn(session)
            await store.sessions.flush(session)
            foreign = SessionEvent(len(session.events), "plugin/intruder", 1.0, {"x": 1})
            await self.change_behind_the_writer(tmp_path, session.id, foreign)
            theirs = await self.stored_events(tmp_path, "final")
            append_tool_turn(session, prompt="mine")
            # Detached before any flush found the change: the final write finds it. Writing
            # stopped for good, so there is nothing to retry at unload: the claim goes back now.
            with _captured_logs() as records:
                store.sessions.detach(session)
                with trio.fail_after(_GUARD):
                    await faulty.wait_ended("release", "final")
            assert any("unwritten events" in r for r in records), records
            assert not any("retried when session persistence unloads" in r for r in records)
            async with self.open_store(tmp_path) as other:
                await other.persistence.acquire("final")  # free for another writer
            await store.persistence.acquire("final")  # and for this one again
            assert plain((await store.persistence.load("final")).events) == theirs
            await store.persistence.release("final")
        assert await self.stored_events(tmp_path, "final") == theirs

    async def test_an_unclaimed_write_of_a_held_session_is_refused_as_busy_or_stored(
        self, tmp_path: Path
    ) -> None:
        # A backend need not refuse a write it never claimed (a file lock cannot stop one); one
        # that does refuses with SessionBusyError, as acquire would, and stores nothing.
        # SessionTamperedError means something else: the log changed under its own writer.
        async with self.open_store(tmp_path) as store:
            await store.persistence.acquire("held")
            session = store.sessions.create("held")
            append_tool_turn(session)
            await store.sessions.flush(session)
            ours = plain(session.events)
            other = self.make_backend(tmp_path)
            try:
                read = await other.read(SessionId("held"))
                assert read is not None
                foreign = SessionEvent(read.position.count, "plugin/other", 1.0, {})
                refused: list[SessionBusyError] = []
                try:
                    await other.write(read.header, read.position, [foreign])
                except SessionBusyError as exc:
                    refused.append(exc)
                stored = await self.stored_events(tmp_path, "held")
                if refused:
                    assert refused[0].session_id == "held" and "held" in str(refused[0])
                    assert stored == ours
                else:
                    assert stored == [*ours, *plain([foreign])]
            finally:
                with trio.CancelScope(shield=True):
                    await other.aclose()
            store.sessions.detach(session)


async def check_backend(
    make_backend: Callable[[Path], Backend], directory: str | os.PathLike[str] | None = None
) -> None:
    """Run every :class:`BackendConformance` test on ``make_backend`` (see
    :meth:`BackendConformance.make_backend`), each in a fresh subdirectory of ``directory``
    (default: a temporary directory, removed afterwards). The first failure raises its
    :class:`AssertionError` (or the error the backend raised), with the test named in a note.
    """

    class Check(BackendConformance):
        def make_backend(self, root: Path) -> Backend:
            return make_backend(root)

    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
        check = Check()
        for name, test in _tests_of(check):
            root = Path(directory, name)
            await trio.Path(root).mkdir()
            try:
                await test(root)
            except Exception as exc:
                exc.add_note(f"in the backend conformance test {name}")
                raise


async def _cancelled_write(
    backend: Backend,
    header: SessionHeader,
    position: Position,
    events: Sequence[SessionEvent],
    when: str,
) -> Position | None:
    """``backend.write`` cancelled ``"before"`` it starts or ``"while"`` it runs: the position
    it returned anyway, or ``None`` when the cancel stopped it."""
    written: list[Position] = []

    async def write() -> None:
        written.append(await backend.write(header, position, events))

    async with trio.open_nursery() as nursery:
        if when == "before":
            nursery.cancel_scope.cancel()
        nursery.start_soon(write)
        if when == "while":
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    return written[0] if written else None


def _tests_of(check: BackendConformance) -> list[tuple[str, Callable[[Path], Awaitable[None]]]]:
    return [
        (name, getattr(check, name))
        for name, _ in inspect.getmembers(type(check), inspect.iscoroutinefunction)
        if name.startswith("test_")
    ]


# --- small helpers ----------------------------------------------------------------------------


@contextlib.contextmanager
def _raises(kind: type[E], match: str = "") -> Iterator[list[E]]:
    """Assert the block raises ``kind`` (with ``match`` found in its message); the list it
    yields holds the error afterwards. (The kit cannot use ``pytest.raises``: it runs without
    pytest too.)"""
    caught: list[E] = []
    try:
        yield caught
    except kind as exc:
        caught.append(exc)
    else:
        raise AssertionError(f"expected {kind.__name__} to be raised")
    if not re.search(match, str(caught[0])):
        raise AssertionError(f"{caught[0]!r} does not match {match!r}")


@contextlib.contextmanager
def _captured_logs(name: str = "trio_agent") -> Iterator[list[str]]:
    """The messages logged on ``name`` (and below) while the block runs."""
    messages: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Recorder(logging.WARNING)
    target = logging.getLogger(name)
    target.addHandler(handler)
    try:
        yield messages
    finally:
        target.removeHandler(handler)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and mtime (to prove nothing moved)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in dirnames + filenames:
            path = os.path.join(dirpath, entry)
            stat = os.stat(path)
            out[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return out


def _stored(stored: StoredSession | None) -> StoredSession:
    assert stored is not None, "nothing is stored"
    return stored
