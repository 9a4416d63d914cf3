"""The loop's durability points: after the prompts, at step ends, and write-ahead before a tool
with effects runs (``AgentOptions.durability``)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio

from trio_agent.agent import AgentOptions, AgentRegistry
from trio_agent.config import ConfigError, open_harness, parse_config
from trio_agent.loop._durability import Durability
from trio_agent.persistence import MemoryPersistence, MemoryStorage
from trio_agent.runtime import Next
from trio_agent.session import SessionFlush, SessionStore, StepEnd, ToolCallEvent
from trio_agent.testing import TestHarness, event_types, open_test_harness, text, tool_call
from trio_agent.tools import Deny, ToolCallContext, ToolExecution, tool

#: What each flush saw: the type of the last event logged, and how many model calls were made.
Flushes = list[tuple[str, int]]


def record_flushes(h: TestHarness) -> Flushes:
    flushes: Flushes = []

    async def listener(payload: SessionFlush) -> None:
        flushes.append((payload.session.events[-1].type, len(h.model.requests)))
        await trio.lowlevel.checkpoint()

    h.ctx.on("session/flush", listener)
    return flushes


def stored_types(storage: MemoryStorage, session_id: str) -> list[str]:
    log = storage.logs.get(session_id)  # type: ignore[call-overload]
    return [] if log is None else [row["type"] for row in log[1]]


class Touch:
    """Tools that record, when their body runs, what the store holds already."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage
        self.seen: dict[str, list[str]] = {}

    def record(self, call: ToolCallContext) -> None:
        agent = call.agent
        assert agent is not None
        log = self.storage.logs.get(agent.session.id)  # type: ignore[attr-defined]
        self.seen[call.call_id] = (
            []
            if log is None
            else [row["data"].get("call_id", "") for row in log[1] if row["type"] == "tool/call"]
        )

    def tools(self) -> list[Any]:
        @tool
        async def touch(*, call: ToolCallContext) -> str:
            """Change something."""
            self.record(call)
            return "touched"

        @tool(concurrency_safe=True)
        async def touch_safe(*, call: ToolCallContext) -> str:
            """Change something; safe to run beside other calls."""
            self.record(call)
            await trio.lowlevel.checkpoint()
            return "touched"

        @tool(concurrency_safe=True, read_only=True)
        async def look(*, call: ToolCallContext) -> str:
            """Only read."""
            self.record(call)
            return "looked"

        return [touch, touch_safe, look]


def open_durable(script: list[Any]) -> tuple[Any, Touch, MemoryStorage]:
    storage = MemoryStorage()
    touch = Touch(storage)
    harness = open_test_harness(
        script,
        tools=touch.tools(),
        persistence=MemoryPersistence,
        persistence_config=MemoryPersistence.Config(storage=storage),
    )
    return harness, touch, storage


async def test_step_durability_flushes_prompts_step_ends_and_before_effects() -> None:
    harness, touch, storage = open_durable([tool_call("c1", "touch"), text("done")])
    async with harness as h:
        flushes = record_flushes(h)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
    assert flushes == [
        ("user/message", 0),  # the prompt is durable before the first model call
        ("tool/call", 1),  # write-ahead: the call is durable before its body runs
        ("step/end", 1),  # the step that ended stays ended
        ("turn/end", 2),  # the last step/end goes out with the turn end
    ]
    assert touch.seen == {"c1": ["c1"]}  # the body saw its own tool/call stored
    assert stored_types(storage, agent.session.id) == [e.type for e in agent.session.events]


async def test_a_read_only_tool_needs_no_write_ahead_and_is_logged_read_only() -> None:
    harness, touch, _ = open_durable([tool_call("c1", "look"), text("done")])
    async with harness as h:
        flushes = record_flushes(h)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
    assert flushes == [("user/message", 0), ("step/end", 1), ("turn/end", 2)]
    assert touch.seen == {"c1": []}
    (call,) = [e.payload_as(ToolCallEvent) for e in agent.session.events if e.type == "tool/call"]
    assert call.read_only is True


async def test_turn_durability_flushes_at_the_turn_end_only() -> None:
    harness, touch, _ = open_durable([tool_call("c1", "touch"), text("done")])
    async with harness as h:
        flushes = record_flushes(h)
        agent = h.agent(options=AgentOptions(durability="turn"))
        agent.send("go")
        await agent.wait_idle()
    assert flushes == [("turn/end", 2)]
    assert touch.seen == {"c1": []}
    (call,) = [e.payload_as(ToolCallEvent) for e in agent.session.events if e.type == "tool/call"]
    assert call.read_only is False


async def test_a_batch_of_concurrency_safe_calls_shares_one_write_ahead_flush() -> None:
    calls = tool_call("c1", "touch_safe") + tool_call("c2", "touch_safe") + tool_call("c3", "look")
    harness, touch, _ = open_durable([calls, text("done")])
    async with harness as h:
        flushes = record_flushes(h)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
    assert flushes == [("user/message", 0), ("tool/call", 1), ("step/end", 1), ("turn/end", 2)]
    # The one flush covered every call started together, before any body with effects ran (the
    # read-only call does not wait for it).
    assert touch.seen["c1"] == touch.seen["c2"] == ["c1", "c2", "c3"]


async def test_calls_beyond_the_parallel_bound_get_their_own_write_ahead() -> None:
    calls = (
        tool_call("c1", "touch_safe")
        + tool_call("c2", "touch_safe")
        + tool_call("c3", "touch_safe")
    )
    storage = MemoryStorage()
    touch = Touch(storage)
    async with open_test_harness(
        [calls, text("done")],
        tools=touch.tools(),
        persistence=MemoryPersistence,
        persistence_config=MemoryPersistence.Config(storage=storage),
        max_parallel_tool_calls=2,
    ) as h:
        flushes = record_flushes(h)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
    # Two write-ahead flushes: one for the two calls started together, one for the third.
    kinds = [kind for kind, _ in flushes]
    assert kinds[0] == "user/message" and kinds[3:] == ["step/end", "turn/end"]
    assert set(kinds[1:3]) <= {"tool/call", "tool/result"} and len(kinds) == 5
    assert touch.seen["c1"] == ["c1", "c2"] and touch.seen["c2"] == ["c1", "c2"]
    assert "c3" in touch.seen["c3"]


async def test_the_write_ahead_comes_after_pre_execute_and_guards() -> None:
    harness, touch, _ = open_durable(
        [tool_call("c1", "touch") + tool_call("c2", "touch") + tool_call("c3", "touch"), text("ok")]
    )
    async with harness as h:
        flushes = record_flushes(h)
        seen_by_policy: list[int] = []

        async def policy(execution: ToolExecution, next: Next) -> Any:
            seen_by_policy.append(len(flushes))
            if execution.call_id == "c1":
                return Deny("not this one")
            return await next()

        h.ctx.on("tools/pre-execute", policy)
        h.ctx.tools.guard(lambda execution: "guarded" if execution.call_id == "c2" else None)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
    # Only c3 passed the policy and the guards; only it was written ahead, and the policy ran
    # before any write-ahead flush of its call.
    assert seen_by_policy == [1, 1, 1]
    assert [kind for kind, _ in flushes] == ["user/message", "tool/call", "step/end", "turn/end"]
    assert touch.seen == {"c3": ["c1", "c2", "c3"]}


async def test_without_persistence_the_durability_points_cost_nothing() -> None:
    async with open_test_harness(
        [tool_call("c1", "touch"), text("done")], tools=Touch(MemoryStorage()).tools()
    ) as h:
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
        assert event_types(agent.session)[-1] == "turn/end"
        durability = Durability(h.ctx.require(SessionStore), agent.session, "step", agent.ctx.hears)
        agent.session.append(StepEnd(turn=1, step=9))
        with trio.CancelScope() as scope:
            scope.cancel()
            await durability.flush()  # no listener: not even a checkpoint
        assert not scope.cancelled_caught

        async def listener(payload: object) -> None:
            return None

        h.ctx.on("session/flush", listener)
        with trio.CancelScope() as scope:
            scope.cancel()
            await durability.flush()  # a real flush point is a checkpoint
        assert scope.cancelled_caught


async def test_a_cancel_during_the_step_end_flush_lets_it_finish_and_stops_the_turn() -> None:
    harness, _, storage = open_durable([tool_call("c1", "look"), tool_call("c2", "look")])
    async with harness as h:
        agent = h.agent()
        finished: list[str] = []

        async def listener(payload: SessionFlush) -> None:
            last = payload.session.events[-1].type
            if last == "step/end":
                agent.cancel()  # lands between two steps, while this flush runs
            await trio.lowlevel.checkpoint()
            finished.append(last)

        h.ctx.on("session/flush", listener)
        agent.send("go")
        await agent.wait_idle()
    # The flush between the steps ran to its end (it is outside the steps' phase scope), and
    # no second step started.
    assert finished == ["user/message", "step/end", "turn/end"]
    assert len(h.model.requests) == 1
    assert agent.session.events[-1].data["reason"] == "aborted"
    assert stored_types(storage, agent.session.id) == [e.type for e in agent.session.events]


async def test_a_cancel_as_a_step_ends_starts_no_next_step_without_persistence() -> None:
    # Without a flush between them, steps share one phase scope; the cancel marker still stops
    # the turn before the next step logs anything.
    async with open_test_harness(
        [tool_call("c1", "touch"), tool_call("c2", "touch")], tools=Touch(MemoryStorage()).tools()
    ) as h:
        agent = h.agent()
        agent.ctx.on("agent/step-end", lambda payload: agent.cancel())
        agent.send("go")
        await agent.wait_idle()
    assert event_types(agent.session)[-3:] == ["tool/result", "step/end", "turn/end"]
    assert len(h.model.requests) == 1
    assert agent.session.events[-1].data["reason"] == "aborted"


def test_durability_is_step_or_turn() -> None:
    assert AgentOptions().durability == "step"
    with pytest.raises(ValueError, match="durability"):
        AgentOptions(durability="never")  # type: ignore[arg-type]


async def test_config_sets_durability_per_agent_with_a_top_level_default() -> None:
    config = parse_config(
        """
llm: {providers: [{name: offline, type: offline, delay: 0}]}
persistence: {type: memory}
tools: {builtin: []}
durability: turn
agents: [{id: a}, {id: b, durability: step}]
""",
        environ={},
    )
    async with open_harness(config) as ctx:
        agents = ctx.require(AgentRegistry)
        options = {agent.id: agent.options.durability for agent in agents.list()}
    assert options == {"a": "turn", "b": "step"}
    assert parse_config("agents: [{id: a}]", environ={}).durability == "step"
    for bad, path in (
        ("durability: never", "$.durability"),
        ("agents: [{id: a, durability: sometimes}]", "$.agents[0].durability"),
    ):
        with pytest.raises(ConfigError, match=re.escape(path)):
            parse_config(bad, environ={})
