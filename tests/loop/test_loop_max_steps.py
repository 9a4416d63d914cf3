"""The step limit (SPEC §12, issue 15): ``AgentOptions.max_steps`` bounds the model requests of one
turn; a step that asks for more at the limit still has its tool calls answered and the turn ends
``max-steps``; a final answer at the limit ends ``completed``; retries inside a step do not count."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.agent import AgentOptions, ContinuationDecision, TurnContinuation
from trio_agent.llm import RetryPolicy
from trio_agent.runtime import Next
from trio_agent.session import ToolCallEvent, ToolResultEvent
from trio_agent.testing import error, open_test_harness, text, tool_call, turn_end_reasons
from trio_agent.tools import tool


@tool
async def poke(value: int) -> int:
    """Return ``value``."""
    return value


def broken(n: int) -> Any:
    return tool_call(f"c{n}", "poke", '{"value": 1}')


async def test_a_runaway_model_ends_max_steps_after_exactly_n_requests() -> None:
    script = [broken(n) for n in range(20)]
    async with open_test_harness(script, tools=[poke]) as h:
        agent = h.agent(options=AgentOptions(max_steps=4))
        agent.send("go")
        with trio.fail_after(30):
            await agent.wait_idle()
        assert len(h.model.requests) == 4
        assert turn_end_reasons(agent.session) == ["max-steps"]
        calls = [
            e.payload_as(ToolCallEvent).call_id
            for e in agent.session.events
            if e.type == "tool/call"
        ]
        results = [
            e.payload_as(ToolResultEvent).call_id
            for e in agent.session.events
            if e.type == "tool/result"
        ]
        assert Counter(calls) == Counter(results) == Counter(f"c{n}" for n in range(4))


async def test_a_final_answer_at_the_limit_ends_completed() -> None:
    script = [broken(0), broken(1), text("done")]
    async with open_test_harness(script, tools=[poke]) as h:
        agent = h.agent(options=AgentOptions(max_steps=3))
        agent.send("go")
        await agent.wait_idle()
        assert len(h.model.requests) == 3
        assert turn_end_reasons(agent.session) == ["completed"]


async def test_a_continue_decision_at_the_limit_ends_max_steps() -> None:
    async def keep_going(payload: TurnContinuation, next: Next) -> ContinuationDecision:
        await next()
        return ContinuationDecision("continue")

    async with open_test_harness([text("a"), text("b"), text("c")]) as h:
        h.ctx.on("agent/turn-continuation", keep_going)
        agent = h.agent(options=AgentOptions(max_steps=2))
        agent.send("go")
        await agent.wait_idle()
        assert len(h.model.requests) == 2
        assert turn_end_reasons(agent.session) == ["max-steps"]


async def test_the_limit_is_per_turn() -> None:
    script = [broken(0), broken(1), broken(2), broken(3)]
    async with open_test_harness(script, tools=[poke]) as h:
        agent = h.agent(options=AgentOptions(max_steps=2))
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await agent.wait_idle()
        assert len(h.model.requests) == 4
        assert turn_end_reasons(agent.session) == ["max-steps", "max-steps"]


async def test_a_retried_request_does_not_count(autojump_clock: trio.testing.MockClock) -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=1.0, jitter=0.0)
    script = [broken(0), error("SERVER", "oops"), error("SERVER", "oops"), text("done")]
    async with open_test_harness(script, tools=[poke], retry=policy) as h:
        agent = h.agent(options=AgentOptions(max_steps=2))
        agent.send("go")
        await agent.wait_idle()
        assert len(h.model.requests) == 4  # 2 steps, the second retried twice
        assert turn_end_reasons(agent.session) == ["completed"]


async def test_none_is_unlimited() -> None:
    script = [broken(n) for n in range(60)] + [text("done")]
    async with open_test_harness(script, tools=[poke]) as h:
        agent = h.agent(options=AgentOptions(max_steps=None))
        agent.send("go")
        with trio.fail_after(60):
            await agent.wait_idle()
        assert len(h.model.requests) == 61
        assert turn_end_reasons(agent.session) == ["completed"]


def test_default_is_50_and_bad_values_are_rejected() -> None:
    assert AgentOptions().max_steps == 50
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="max_steps"):
            AgentOptions(max_steps=bad)
