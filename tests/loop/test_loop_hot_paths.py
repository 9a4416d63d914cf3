"""The loop's per-step schedule points (#17): each trip through trio's scheduler costs several
microseconds, so a step yields no more often than a hand-written trio loop doing the same work
(``benchmarks/bench_loop.py``'s floor), pinned here as a count, not a time."""

from __future__ import annotations

import gc

import trio

from trio_agent.agent import AgentOptions
from trio_agent.llm import GenerateRequest, LlmCallConfig, Message
from trio_agent.testing import (
    ScriptedAdapter,
    count_schedule_points,
    open_test_harness,
    text,
    tool_call,
    turn_end_reasons,
)
from trio_agent.tools import tool


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


async def _floor_yields_per_step() -> int:
    """What reading one scripted tool-call response costs a plain trio loop."""
    model = ScriptedAdapter(responses=[tool_call("c", "noop", "{}")])
    request = GenerateRequest(
        config=LlmCallConfig(provider="scripted", model="m"), messages=(Message.user("go"),)
    )
    with count_schedule_points() as yields:
        async with model.stream(request) as chunks:
            async for _ in chunks:
                pass
        await noop.body({}, None)  # type: ignore[arg-type]
    return yields.steps


async def test_a_tool_step_yields_no_more_often_than_the_hand_written_floor() -> None:
    steps = 20
    script = [tool_call(f"c{i}", "noop", "{}") for i in range(steps)] + [text("done")]
    async with open_test_harness(script, tools=[noop]) as h:
        agent = h.agent(options=AgentOptions(max_steps=None))
        with count_schedule_points(all_tasks=True) as yields:
            agent.send("go")
            await agent.wait_idle()
    floor = await _floor_yields_per_step()
    assert floor == 6
    # Per step the floor's 6 (the stream's open, one per chunk, the end; the tool yields none),
    # and the turn's wake-ups (the prompt, the idle notice) add a few (132 when this was
    # written; 9 per step before #17's cuts).
    assert yields.steps <= floor * (steps + 1) + 8, yields.steps


def _live(cls: type) -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is cls)


async def test_an_idle_agent_holds_no_trio_event_or_parking_lot() -> None:
    # #17's memory per agent: the driver parks on its own task, wait_idle and aclose build
    # their events only while someone waits, and a session's lot only for a subscriber.
    async with open_test_harness([text("hi")] * 100) as h:
        events, lots = _live(trio.Event), _live(trio.lowlevel.ParkingLot)
        agents = [h.agent(f"a{i}") for i in range(50)]
        for agent in agents:
            agent.send("go")
        for agent in agents:
            await agent.wait_idle()
        assert _live(trio.Event) - events < 5
        assert _live(trio.lowlevel.ParkingLot) - lots < 5
        for agent in agents:  # and each still wakes for the next prompt
            agent.send("again")
        for agent in agents:
            await agent.wait_idle()
        assert all(turn_end_reasons(a.session) == ["completed", "completed"] for a in agents)
