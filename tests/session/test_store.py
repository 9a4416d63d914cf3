"""ctx.sessions: create, seeds, lookup, ownership, detach, flush and the store events."""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.ids import MessageId
from trio_agent.llm import Message, TextBlock
from trio_agent.runtime import Context, InactiveContextError, open_runtime
from trio_agent.session import (
    EventPayloadError,
    InvalidSeedError,
    JsonValueError,
    SessionCreated,
    SessionDetachedError,
    SessionDisposed,
    SessionEvent,
    SessionExistsError,
    SessionFlush,
    SessionHeader,
    SessionNotFoundError,
    SessionStore,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)


def _absolute(path: str) -> str:
    return os.path.abspath(path)


def msg(text: str) -> Message:
    return Message(MessageId(f"m-{text}"), "user", (TextBlock(text),), "user")


def record(ctx: Context, *names: str) -> list[tuple[str, str]]:
    log: list[tuple[str, str]] = []
    for name in names:
        ctx.on(name, lambda p, name=name: log.append((name, p.session.id)))
    return log


# --- create / get / list ----------------------------------------------------------------------


async def test_create_builds_the_header(sctx: Context) -> None:
    meta: dict[str, Any] = {"title": "demo", "tags": ["a"]}
    session = sctx.sessions.create("demo-1", meta=meta, cwd="sub")
    meta["tags"].append("b")  # the header holds a copy
    header = session.header
    assert isinstance(header, SessionHeader)
    assert session.id == header.session_id == "demo-1"
    assert header.meta == {"title": "demo", "tags": ["a"]}
    assert header.cwd == _absolute("sub")
    assert header.parent_session is None and header.seed_length is None
    assert header.version == 1 and header.created_at > 0
    assert sctx.sessions.create("plain").header.cwd is None


@pytest.mark.parametrize("bad", ["", "-x", ".hidden", "a/b", "x" * 201, "sp ace"])
async def test_create_validates_the_id(sctx: Context, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid session id"):
        sctx.sessions.create(bad)
    assert sctx.sessions.list() == ()


async def test_create_rejects_a_duplicate_live_id(sctx: Context) -> None:
    first = sctx.sessions.create("dup")
    with pytest.raises(SessionExistsError, match="already exists") as info:
        sctx.sessions.create("dup")
    assert info.value.session_id == "dup"
    assert sctx.sessions.get("dup") is first
    sctx.sessions.detach(first)
    again = sctx.sessions.create("dup")  # a detached id is free again
    assert again is not first


async def test_meta_must_be_lossless_json(sctx: Context) -> None:
    with pytest.raises(JsonValueError, match=r'^meta\["x"\]: found set'):
        sctx.sessions.create("s", meta={"x": {1}})
    assert sctx.sessions.get("s") is None


async def test_get_and_list(sctx: Context) -> None:
    a = sctx.sessions.create("a")
    b = sctx.sessions.create("b")
    assert sctx.sessions.get("a") is a and sctx.sessions.get("nope") is None
    assert sctx.sessions.list() == (a, b)


async def test_created_and_disposed_events(sctx: Context) -> None:
    log = record(sctx, "session/created", "session/disposed")
    payloads: list[object] = []
    sctx.on("session/created", payloads.append)
    sctx.on("session/disposed", payloads.append)
    session = sctx.sessions.create("s")
    sctx.sessions.detach(session)
    sctx.sessions.detach(session)  # idempotent
    assert log == [("session/created", "s"), ("session/disposed", "s")]
    assert isinstance(payloads[0], SessionCreated) and isinstance(payloads[1], SessionDisposed)
    assert session.detached and sctx.sessions.list() == ()


async def test_store_events_are_scoped_to_the_creator(sctx: Context) -> None:
    a = sctx.scope_context("a")
    b = sctx.scope_context("b")
    log_a = record(a, "session/created", "session/disposed")
    log_b = record(b, "session/created", "session/disposed")
    log_global = record(sctx, "session/created")
    sa = a.sessions.create("sa")
    sctx.sessions.create("sg")
    a.sessions.detach(sa)
    assert log_a == [("session/created", "sa"), ("session/disposed", "sa")]
    assert log_b == []
    assert log_global == [("session/created", "sa"), ("session/created", "sg")]


# --- seeds ------------------------------------------------------------------------------------


def seed_events() -> list[SessionEvent]:
    return [
        SessionEvent(0, "turn/start", 10.0, {"turn": 1}),
        SessionEvent(
            1,
            "user/message",
            11.0,
            {
                "turn": 1,
                "message": {
                    "id": "m-1",
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}],
                    "source": "user",
                },
            },
        ),
        SessionEvent(2, "turn/end", 12.0, {"turn": 1, "reason": "completed", "error": None}),
        SessionEvent(3, "plugin/x", 13.0, {"k": [1]}),
    ]


async def test_seed_is_copied_and_ended(sctx: Context) -> None:
    seed = seed_events()
    session = sctx.sessions.create("s", seed=seed)
    seed[3].data["k"].append(2)
    assert [e.type for e in session.events] == [
        "turn/start",
        "user/message",
        "turn/end",
        "plugin/x",
        "session/end-seed",
    ]
    assert session.events[3].data == {"k": [1]}
    assert session.events[3] is not seed[3]
    assert [e.time for e in session.events[:4]] == [10.0, 11.0, 12.0, 13.0]
    assert session.header.seed_length == 4
    assert session.last_turn == 1 and session.open_turn is None
    assert session.derive_messages() == (
        Message(MessageId("m-1"), "user", (TextBlock("hi"),), "user"),
    )
    # Seeded messages were structured once, when the seed was loaded.
    assert session.derive_messages()[0] is session.events[1].payload.message
    # Live appends continue the seq and the turn numbering.
    assert session.append(TurnStart(turn=session.last_turn + 1)).seq == 5


async def test_seed_ending_with_end_seed_is_not_extended(sctx: Context) -> None:
    first = sctx.sessions.create("first", seed=seed_events())
    reopened = sctx.sessions.create("again", seed=list(first.events))
    assert len(reopened.events) == len(first.events) == 5
    assert reopened.header.seed_length == 5


async def test_empty_seed_gets_an_end_seed(sctx: Context) -> None:
    session = sctx.sessions.create("s", seed=[])
    assert [e.type for e in session.events] == ["session/end-seed"]
    assert session.header.seed_length == 0


async def test_seed_with_an_open_turn(sctx: Context) -> None:
    seed = [
        SessionEvent(0, "turn/start", 1.0, {"turn": 4}),
        SessionEvent(1, "step/start", 1.0, {"turn": 4, "step": 1}),
    ]
    session = sctx.sessions.create("s", seed=seed)
    assert (session.last_turn, session.open_turn, session.open_step) == (4, 4, 1)


@pytest.mark.parametrize(
    ("seed", "error", "match"),
    [
        ([SessionEvent(1, "plugin/x", 0.0, {})], InvalidSeedError, "contiguous from 0"),
        (
            [SessionEvent(0, "plugin/x", 0.0, {}), SessionEvent(2, "plugin/x", 0.0, {})],
            InvalidSeedError,
            r"seed\[1\] has seq 2",
        ),
        ([{"seq": 0}], InvalidSeedError, "not a SessionEvent"),
        (
            [SessionEvent(0, "plugin/x", 0.0, {"v": float("inf")})],
            JsonValueError,
            r'seed\[0\]\.data\["v"\]',
        ),
        ([SessionEvent(0, "turn/start", 0.0, {"turn": "one"})], EventPayloadError, "event seq 0"),
        ([SessionEvent(0, "plugin/x", float("nan"), {})], InvalidSeedError, "time"),
    ],
)
async def test_bad_seeds_create_nothing(
    sctx: Context, seed: list[Any], error: type[Exception], match: str
) -> None:
    log = record(sctx, "session/created")
    with pytest.raises(error, match=match):
        sctx.sessions.create("s", seed=seed)
    assert sctx.sessions.get("s") is None and log == []


async def test_create_restores_a_header(sctx: Context) -> None:
    header = SessionHeader(
        session_id="r",  # type: ignore[arg-type]
        created_at=5.0,
        cwd="/work",
        parent_session="p",  # type: ignore[arg-type]
        seed_length=2,
        meta={"m": 1},
    )
    session = sctx.sessions.create("r", seed=seed_events(), header=header)
    assert session.header == header
    with pytest.raises(ValueError, match="session_id is 'other'"):
        sctx.sessions.create("other", header=header)
    with pytest.raises(ValueError, match="inside it"):
        sctx.sessions.create("x", meta={}, header=header)


# --- ownership and detach ---------------------------------------------------------------------


async def test_session_is_detached_when_its_owner_plugin_unloads(sctx: Context) -> None:
    made: list[Any] = []

    def owner(ctx: Context, config: object) -> None:
        made.append(ctx.sessions.create("owned"))

    log = record(sctx, "session/disposed")
    fiber = await sctx.plugin(owner)
    session = made[0]
    assert not session.detached and sctx.sessions.get("owned") is session
    await fiber.dispose()
    assert session.detached and sctx.sessions.get("owned") is None
    assert log == [("session/disposed", "owned")]


async def test_scoped_session_is_detached_with_its_scope(sctx: Context) -> None:
    scoped = sctx.scope_context("agent")
    session = scoped.sessions.create("agent-s")
    await scoped.fiber.dispose()
    assert session.detached


async def test_explicit_detach_releases_the_ownership_effect(sctx: Context) -> None:
    scoped = sctx.scope_context("agent")
    log = record(sctx, "session/disposed")
    session = scoped.sessions.create("s")
    effects_before = len(scoped.fiber._effects)
    sctx.sessions.detach(session)
    assert len(scoped.fiber._effects) == effects_before - 1
    await scoped.fiber.dispose()
    assert log == [("session/disposed", "s")]  # once


async def test_the_session_detaches_itself_and_the_store_only_forgets_it(sctx: Context) -> None:
    scoped = sctx.scope_context("agent")
    log = record(sctx, "session/disposed")
    session = scoped.sessions.create("s")
    effects_before = len(scoped.fiber._effects)
    session.detach()  # the session's own lifecycle method; the store is told
    assert session.detached and not session.live
    assert sctx.sessions.get("s") is None
    assert len(scoped.fiber._effects) == effects_before - 1
    sctx.sessions.detach(session)  # idempotent through the store too
    await scoped.fiber.dispose()
    assert log == [("session/disposed", "s")]
    assert sctx.sessions.create("s").live  # the id is free again


async def test_a_session_is_published_once(sctx: Context) -> None:
    prepared = sctx.sessions.prepare("p")
    assert not prepared.live
    sctx.sessions.publish(prepared)
    assert prepared.live
    with pytest.raises(SessionExistsError, match="already published"):
        sctx.sessions.publish(prepared)
    sctx.sessions.detach(prepared)
    with pytest.raises(SessionExistsError, match="already published"):
        sctx.sessions.publish(prepared)
    assert sctx.sessions.get("p") is None
    other = sctx.sessions.prepare("q")
    sctx.sessions.create("q")
    with pytest.raises(SessionExistsError, match="already exists"):
        sctx.sessions.publish(other)


async def test_create_on_an_unloading_context_fails_cleanly(sctx: Context) -> None:
    scoped = sctx.scope_context("gone")
    await scoped.fiber.dispose()
    with pytest.raises(InactiveContextError):
        scoped.sessions.create("late")
    assert sctx.sessions.get("late") is None


async def test_detach_from_a_session_event_listener_waits_for_the_dispatch(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    order: list[str] = []

    def detacher(p: Any) -> None:
        sctx.sessions.detach(p.session)
        order.append(f"detacher sees detached={p.session.detached}")

    sctx.on("session/event", detacher)
    sctx.on("session/event", lambda p: order.append(f"next sees detached={p.session.detached}"))
    sctx.on("session/disposed", lambda p: order.append("disposed"))
    event = session.append("plugin/x", {})
    assert event.seq == 0
    assert order == ["detacher sees detached=False", "next sees detached=False", "disposed"]
    assert session.detached


async def test_store_unload_detaches_everything(ctx: Context) -> None:
    fiber = await ctx.plugin(SessionStore)
    log = record(ctx, "session/disposed")
    a = ctx.sessions.create("a")
    b = ctx.sessions.create("b")
    await fiber.dispose()
    assert a.detached and b.detached
    assert log == [("session/disposed", "b"), ("session/disposed", "a")]


async def test_detach_of_a_foreign_session(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    async with open_runtime() as other:
        await other.plugin(SessionStore)
        with pytest.raises(SessionNotFoundError):
            other.sessions.detach(session)
        with pytest.raises(SessionNotFoundError):
            await other.sessions.flush(session)


# --- flush ------------------------------------------------------------------------------------


async def test_flush_runs_listeners_concurrently_and_waits_for_all(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    started: list[str] = []
    both_started = trio.Event()
    finished: list[str] = []

    async def listener(name: str, payload: SessionFlush) -> None:
        assert payload.session is session
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()
        await trio.lowlevel.checkpoint()
        finished.append(name)

    sctx.on("session/flush", lambda p: listener("one", p))
    sctx.on("session/flush", lambda p: listener("two", p))
    await sctx.sessions.flush(session)
    assert sorted(finished) == ["one", "two"]


async def test_flush_raises_the_first_failure_unwrapped_after_all_finish(
    sctx: Context, autojump_clock: trio.testing.MockClock
) -> None:
    session = sctx.sessions.create("s")
    finished: list[str] = []

    async def fails(p: SessionFlush) -> None:
        raise OSError("disk full")

    async def slow(p: SessionFlush) -> None:
        await trio.sleep(5)
        finished.append("slow")

    async def fails_later(p: SessionFlush) -> None:
        await trio.sleep(1)
        raise RuntimeError("second")

    sctx.on("session/flush", fails)
    sctx.on("session/flush", slow)
    sctx.on("session/flush", fails_later)
    with pytest.raises(OSError, match="disk full"):
        await sctx.sessions.flush(session)
    assert finished == ["slow"]


async def test_flush_is_scoped_and_always_a_checkpoint(sctx: Context) -> None:
    scoped = sctx.scope_context("a")
    heard: list[str] = []

    async def on_flush(p: SessionFlush) -> None:
        heard.append(p.session.id)

    scoped.on("session/flush", on_flush)
    mine = scoped.sessions.create("mine")
    theirs = sctx.sessions.create("theirs")
    await sctx.sessions.flush(theirs)
    await sctx.sessions.flush(mine)
    assert heard == ["mine"]
    with trio.testing.assert_checkpoints():
        await sctx.sessions.flush(theirs)


async def test_flush_of_a_detached_session_raises(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    sctx.sessions.detach(session)
    with pytest.raises(SessionDetachedError):
        await sctx.sessions.flush(session)


async def test_flush_cancelled_before_it_starts_runs_nothing(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    heard: list[str] = []
    sctx.on("session/flush", lambda p: heard.append("ran"))
    with trio.CancelScope() as scope:
        scope.cancel()
        await sctx.sessions.flush(session)
    assert heard == []


async def test_typical_turn_round_trip(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    session.append(TurnStart(turn=1))
    session.append(UserMessageEvent(turn=1, message=msg("hi")))
    session.append(StepStart(turn=1, step=1))
    session.append("step/end", {"turn": 1, "step": 1})
    session.append(TurnEnd(turn=1, reason="completed"))
    copy = sctx.sessions.create("copy", seed=list(session.events))
    assert copy.derive_messages() == session.derive_messages()
    assert [e.data for e in copy.events[:5]] == [e.data for e in session.events]
