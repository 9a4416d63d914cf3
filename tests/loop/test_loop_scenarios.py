"""Scenario tests: exact session event sequences for the loop's behaviours (seed 000)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_agent.agent import (
    Allow,
    Block,
    ContinuationDecision,
    ContinuationStop,
    PromptSubmit,
    TurnContinuation,
)
from trio_agent.llm import Message, RetryPolicy, TextBlock, ToolResult, ToolResultBlock
from trio_agent.runtime import Next
from trio_agent.session import (
    AssistantMessageEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    UserMessageEvent,
)
from trio_agent.testing import (
    error,
    event_types,
    max_tokens,
    open_test_harness,
    text,
    tool_call,
    turn_end_reasons,
)
from trio_agent.tools import ToolCallContext, ToolExecution, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def turn_ends(agent: Any) -> list[str]:
    return turn_end_reasons(agent.session)


async def test_plain_turn() -> None:
    async with open_test_harness([text("Hello", " there")]) as h:
        agent = h.agent()
        statuses: list[str] = []
        agent.ctx.on("agent/status", lambda e: statuses.append(e.status))
        agent.send("hi")
        await agent.wait_idle()
        assert event_types(agent.session) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert turn_ends(agent) == ["completed"]
        assert [m.text for m in agent.session.derive_messages()] == ["hi", "Hello there"]
        assert statuses == ["running", "idle"]
        request = h.model.requests[0]
        assert request.config.provider == "scripted"
        assert request.session_id == agent.session.id


async def test_tool_round_trip() -> None:
    script = [tool_call("c1", "add", '{"a": 1, "b": 2}', chunks=3), text("It is 3.")]
    async with open_test_harness(script, tools=[add]) as h:
        agent = h.agent()
        agent.send("1+2?")
        await agent.wait_idle()
        assert event_types(agent.session) == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        history = h.model.requests[1].messages
        assert [m.role for m in history] == ["user", "assistant", "user"]
        result_block = history[2].content[0]
        assert isinstance(result_block, ToolResultBlock)
        assert result_block.tool_call_id == "c1"
        assert result_block.content == (TextBlock("3"),)
        assert turn_ends(agent) == ["completed"]


async def test_queued_prompts_are_batched_into_one_turn() -> None:
    gate = trio.Event()

    async def slow(request: Any) -> Any:
        return text("first answer")

    async with open_test_harness([text("first answer"), text("both answered")]) as h:
        agent = h.agent()

        async def hold(event: PromptSubmit, next: Next) -> Any:
            if event.message.text == "one":
                await gate.wait()
            return await next()

        agent.ctx.on("agent/prompt-submit", hold)
        agent.send("one")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("two")
        agent.send("three")
        gate.set()
        await agent.wait_idle()
        users = [
            e.payload_as(UserMessageEvent).message.text
            for e in agent.session.events
            if e.type == "user/message"
        ]
        assert users == ["one", "two", "three"]
        starts = [e for e in agent.session.events if e.type == "turn/start"]
        assert len(starts) == 2
        # "two" and "three" were queued while turn 1 ran: they form turn 2 together.
        assert [m.text for m in h.model.requests[1].messages][-2:] == ["two", "three"]


async def test_steering_during_a_tool_step_joins_the_turn() -> None:
    entered = trio.Event()
    release = trio.Event()

    @tool
    async def wait_a_bit() -> str:
        """Wait for the test."""
        entered.set()
        await release.wait()
        return "done"

    script = [tool_call("c1", "wait_a_bit", "{}"), text("ok"), text("after steering")]
    async with open_test_harness(script, tools=[wait_a_bit]) as h:
        agent = h.agent()
        agent.send("go")
        await entered.wait()
        agent.steer("also do this")
        release.set()
        await agent.wait_idle()
        types = event_types(agent.session)
        assert types == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "tool/call",
            "tool/result",
            "steering/message",
            "step/end",
            "step/start",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert len(h.model.requests) == 2
        assert h.model.requests[1].messages[-1].text == "also do this"


async def test_pending_steering_overrides_an_ordinary_stop() -> None:
    async with open_test_harness([text("first"), text("second")]) as h:
        agent = h.agent()

        async def steer_once(event: TurnContinuation, next: Next) -> Any:
            if event.step == 1:
                agent.steer("one more thing")
            return await next()

        agent.ctx.on("agent/turn-continuation", steer_once)
        agent.send("go")
        await agent.wait_idle()
        assert [e.type for e in agent.session.events].count("step/start") == 2
        assert turn_ends(agent) == ["completed"]


async def test_inject_while_idle_starts_no_turn_and_reaches_the_next_request() -> None:
    async with open_test_harness([text("ok")]) as h:
        agent = h.agent()
        agent.inject("the user is in Paris")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.status == "idle"
        assert event_types(agent.session) == ["context/message"]
        agent.send("weather?")
        await agent.wait_idle()
        assert [m.text for m in h.model.requests[0].messages] == [
            "the user is in Paris",
            "weather?",
        ]
        assert [e.type for e in agent.session.events].count("context/message") == 1


async def test_blocked_prompts() -> None:
    async with open_test_harness([text("answer")]) as h:
        agent = h.agent()

        async def policy(event: PromptSubmit, next: Next) -> Any:
            if "secret" in event.message.text:
                return Block("no secrets")
            if "note" in event.message.text:
                return Allow((Message.user("remember the note", source="plugin:notes"),))
            return await next()

        agent.ctx.on("agent/prompt-submit", policy)
        agent.send("tell me the secret")
        await agent.wait_idle()
        assert event_types(agent.session) == ["turn/start", "prompt/blocked", "turn/end"]
        assert turn_ends(agent) == ["rejected"]
        assert h.model.requests == []

        agent.send("secret again")
        agent.send("a note")
        await agent.wait_idle()
        assert event_types(agent.session, since=3)[:4] == [
            "turn/start",
            "prompt/blocked",
            "user/message",
            "context/message",
        ]
        assert turn_ends(agent) == ["rejected", "completed"]


async def test_max_tokens_surfaces_and_drops_tool_calls() -> None:
    async with open_test_harness([max_tokens("partial answer")], tools=[add]) as h:
        agent = h.agent()
        agent.send("write a lot")
        await agent.wait_idle()
        assert turn_ends(agent) == ["max-tokens"]
        message_event = next(e for e in agent.session.events if e.type == "assistant/message")
        assert message_event.payload_as(AssistantMessageEvent).finish == "max-tokens"
        assert "tool/call" not in event_types(agent.session)


async def test_a_raising_listener_ends_the_turn_not_the_loop() -> None:
    errors: list[BaseException] = []
    async with open_test_harness([text("fine")]) as h:
        agent = h.agent()
        agent.ctx.on("agent/error", lambda e: errors.append(e.error))
        calls = 0

        async def flaky(event: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("pre-step plugin bug")

        agent.ctx.on("agent/pre-step", flaky)
        agent.send("first")
        await agent.wait_idle()
        assert turn_ends(agent) == ["error"]
        assert [str(e) for e in errors] == ["pre-step plugin bug"]
        agent.send("second")
        await agent.wait_idle()
        assert turn_ends(agent) == ["error", "completed"]


async def test_model_error_without_retry_ends_the_turn_with_the_failure() -> None:
    async with open_test_harness([error("AUTH", "bad key")]) as h:
        agent = h.agent()
        agent.send("hi")
        await agent.wait_idle()
        end = next(e for e in agent.session.events if e.type == "turn/end").payload_as(TurnEnd)
        assert end.reason == "error"
        assert end.error is not None
        assert end.error.code == "AUTH"
        assert "assistant/message" not in event_types(agent.session)


async def test_retry_repeats_the_request_in_the_same_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, max_delay=4.0, jitter=0.0)
    script = [error("RATE_LIMIT", "slow down"), error("SERVER", "oops"), text("third time lucky")]
    async with open_test_harness(script, retry=policy) as h:
        agent = h.agent()
        start = trio.current_time()
        agent.send("hi")
        await agent.wait_idle()
        assert trio.current_time() - start == pytest.approx(3.0)  # 1s then 2s backoff
        types = event_types(agent.session)
        assert types == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "llm/retry",
            "llm/retry",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        assert turn_ends(agent) == ["completed"]
        assert len(h.model.requests) == 3


async def test_retry_gives_up_after_max_attempts(autojump_clock: trio.testing.MockClock) -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay=1.0, jitter=0.0)
    script = [error("SERVER", "a"), error("SERVER", "b")]
    async with open_test_harness(script, retry=policy) as h:
        agent = h.agent()
        agent.send("hi")
        await agent.wait_idle()
        assert turn_ends(agent) == ["error"]
        assert event_types(agent.session).count("llm/retry") == 1


async def test_continuation_continue_with_reason_and_stop() -> None:
    async with open_test_harness([text("draft"), text("final")]) as h:
        agent = h.agent()

        async def once_more(event: TurnContinuation, next: Next) -> Any:
            if event.step == 1:
                return ContinuationDecision("continue", reason="Check your draft.")
            return await next()

        agent.ctx.on("agent/turn-continuation", once_more)
        agent.send("write")
        await agent.wait_idle()
        types = event_types(agent.session)
        assert types.count("step/start") == 2
        assert types[types.index("assistant/message") + 1] == "steering/message"
        assert h.model.requests[1].messages[-1].text == "Check your draft."
        assert turn_ends(agent) == ["completed"]


async def test_continuation_stop_after_tool_calls() -> None:
    async with open_test_harness([tool_call("c1", "add", '{"a":1,"b":1}')], tools=[add]) as h:
        agent = h.agent()

        async def stop(event: TurnContinuation, next: Next) -> Any:
            assert event.default == ContinuationDecision("continue")
            return ContinuationDecision("stop")

        agent.ctx.on("agent/turn-continuation", stop)
        agent.send("go")
        await agent.wait_idle()
        assert event_types(agent.session).count("step/start") == 1
        assert turn_ends(agent) == ["completed"]


async def test_turn_stop_is_terminal_and_drops_late_steering() -> None:
    async with open_test_harness(
        [tool_call("c1", "add", '{"a":1,"b":1}'), text("next turn")], tools=[add]
    ) as h:
        agent = h.agent()

        def terminal(event: Any) -> Any:
            agent.steer("ignored: the stop is terminal")
            return ContinuationStop("budget")

        off = agent.ctx.on("agent/turn-stop", terminal)
        agent.send("go")
        await agent.wait_idle()
        off()
        assert event_types(agent.session).count("step/start") == 1
        assert turn_ends(agent) == ["completed"]
        assert len(h.model.requests) == 1  # the steering did not open a turn


async def test_ordinary_stop_requeues_leftover_steering_as_the_next_turn() -> None:
    async with open_test_harness([text("one"), text("two")]) as h:
        agent = h.agent()

        async def steer_late(event: Any) -> None:
            if event.turn == 1:
                # After the continuation gate: too late for this turn, so it opens the next.
                agent.steer("late steering")

        agent.ctx.on("agent/turn-stop", steer_late)
        agent.send("go")
        await agent.wait_idle()
        assert turn_ends(agent) == ["completed", "completed"]
        first_end = next(e.seq for e in agent.session.events if e.type == "turn/end")
        second_turn = event_types(agent.session, since=first_end + 1)
        assert second_turn[:2] == ["turn/start", "user/message"]
        assert [m.text for m in h.model.requests[1].messages][-1] == "late steering"


async def test_authoritative_call_id_despite_a_lying_execute_listener() -> None:
    """Seed 002: tool/result is logged under the loop's call id, whatever a listener returns."""
    script = [tool_call("real-id", "add", '{"a":2,"b":2}'), text("4")]
    async with open_test_harness(script, tools=[add]) as h:

        async def liar(execution: ToolExecution, next: Next) -> Any:
            result = await next()
            return ToolResult(call_id="wrong-id", content=result.content)  # type: ignore[arg-type]

        h.ctx.on("tools/execute", liar)
        agent = h.agent()
        agent.send("2+2")
        await agent.wait_idle()
        logged = next(e for e in agent.session.events if e.type == "tool/result")
        assert logged.payload_as(ToolResultEvent).call_id == "real-id"
        assert logged.payload_as(ToolResultEvent).result.call_id == "real-id"
        derived = agent.session.derive_messages()
        result_block = derived[2].content[0]
        assert isinstance(result_block, ToolResultBlock)
        assert result_block.tool_call_id == "real-id"


async def test_parallel_safe_tools_commit_in_model_order() -> None:
    order: list[str] = []
    gates = {name: trio.Event() for name in ("a", "b", "c")}

    @tool(concurrency_safe=True)
    async def fetch(name: str) -> str:
        """Fetch something."""
        await gates[name].wait()
        order.append(name)
        return f"got {name}"

    script = [
        tool_call("ca", "fetch", '{"name": "a"}')
        + tool_call("cb", "fetch", '{"name": "b"}')
        + tool_call("cc", "fetch", '{"name": "c"}'),
        text("done"),
    ]
    async with open_test_harness(script, tools=[fetch]) as h:
        agent = h.agent()
        agent.send("fetch all")
        await trio.testing.wait_all_tasks_blocked()
        # All three bodies run at once; finish them in reverse order.
        gates["c"].set()
        await trio.testing.wait_all_tasks_blocked()
        gates["b"].set()
        await trio.testing.wait_all_tasks_blocked()
        gates["a"].set()
        await agent.wait_idle()
        assert order == ["c", "b", "a"]
        results = [
            e.payload_as(ToolResultEvent).call_id
            for e in agent.session.events
            if e.type == "tool/result"
        ]
        assert results == ["ca", "cb", "cc"]
        calls = [
            e.payload_as(ToolCallEvent).call_id
            for e in agent.session.events
            if e.type == "tool/call"
        ]
        assert calls == ["ca", "cb", "cc"]


async def test_parallelism_is_bounded() -> None:
    running = 0
    peak = 0

    @tool(concurrency_safe=True)
    async def work(n: int) -> int:
        """Work."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        running -= 1
        return n

    calls = tool_call("c0", "work", '{"n": 0}')
    for n in range(1, 6):
        calls = calls + tool_call(f"c{n}", "work", f'{{"n": {n}}}')
    async with open_test_harness([calls, text("ok")], tools=[work], max_parallel_tool_calls=2) as h:
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
        assert peak == 2
        assert [e.type for e in agent.session.events].count("tool/result") == 6


async def test_tool_context_and_conclude_turn() -> None:
    @tool
    async def finish_up(*, call: ToolCallContext) -> str:
        """Finish the task."""
        call.defer_context("the task is complete")
        call.conclude_turn()
        return "finished"

    async with open_test_harness([tool_call("c1", "finish_up", "{}")], tools=[finish_up]) as h:
        agent = h.agent()
        agent.send("finish")
        await agent.wait_idle()
        types = event_types(agent.session)
        assert types[types.index("tool/result") + 1] == "context/message"
        assert types.count("step/start") == 1  # concluded: no follow-up request
        assert len(h.model.requests) == 1


async def test_session_prefix_is_asked_once_and_logged_on_the_header() -> None:
    async with open_test_harness([text("a"), text("b")]) as h:
        agent = h.agent()
        asked = 0

        async def prefix(event: Any, next: Next) -> Any:
            nonlocal asked
            asked += 1
            return (Message.user("You are in a test.", source="plugin:prefix"),)

        agent.ctx.on("agent/session-prefix", prefix)
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await agent.wait_idle()
        assert asked == 1
        assert next(m.text for m in h.model.requests[1].messages) == "You are in a test."
        assert "You are in a test." not in [m.text for m in agent.session.derive_messages()]
        assert event_types(agent.session).count("request/header") == 1


async def test_request_header_logged_again_when_the_model_changes() -> None:
    from trio_agent.agent import RequestConfig

    async with open_test_harness([text("a"), text("b")]) as h:
        agent = h.agent()
        model = "m1"

        async def switch(event: RequestConfig, next: Next) -> Any:
            config = await next()
            import attrs

            return attrs.evolve(config, model=model)

        agent.ctx.on("agent/request", switch)
        agent.send("one")
        await agent.wait_idle()
        model = "m2"
        agent.send("two")
        await agent.wait_idle()
        assert event_types(agent.session).count("request/header") == 2
        assert [r.config.model for r in h.model.requests] == ["m1", "m2"]


async def test_request_header_follows_the_tools_and_only_them() -> None:
    # The loop compares the tools it sends by identity of the registry's shared snapshots (#17):
    # unchanged tools log no second header, a new tool (even one equal to nothing before) does.
    from trio_agent.tools import tool as make_tool

    @make_tool
    async def first_tool() -> str:
        """One."""
        return "1"

    @make_tool
    async def second_tool() -> str:
        """Two."""
        return "2"

    async with open_test_harness([text("a"), text("b"), text("c")], tools=[first_tool]) as h:
        agent = h.agent()
        for prompt in ("one", "two"):
            agent.send(prompt)
            await agent.wait_idle()
        assert event_types(agent.session).count("request/header") == 1
        agent.ctx.tools.register(second_tool)
        agent.send("three")
        await agent.wait_idle()
        assert event_types(agent.session).count("request/header") == 2
        names = [[t.name for t in r.tools] for r in h.model.requests]
        assert names == [["first_tool"], ["first_tool"], ["first_tool", "second_tool"]]


async def test_scoped_listeners_hear_only_their_agent() -> None:
    async with open_test_harness([text("a"), text("b")]) as h:
        first = h.agent("first")
        second = h.agent("second")
        heard: list[str] = []
        first.ctx.on("agent/turn-end", lambda e: heard.append(f"first:{e.agent.id}"))
        h.ctx.on("agent/turn-end", lambda e: heard.append(f"global:{e.agent.id}"))
        first.send("x")
        await first.wait_idle()
        second.send("y")
        await second.wait_idle()
        assert heard == ["first:first", "global:first", "global:second"]  # registration order


async def test_terminal_stop_drops_late_steering_but_queued_sends_still_run() -> None:
    async with open_test_harness([text("first"), text("second")]) as h:
        agent = h.agent()

        def terminal(event: Any) -> Any:
            if event.turn == 1:
                agent.steer("dropped steering")
                agent.send("queued send")
                return ContinuationStop("done")
            return None

        agent.ctx.on("agent/turn-stop", terminal)
        agent.send("go")
        await agent.wait_idle()
        assert turn_ends(agent) == ["completed", "completed"]
        texts = [m.text for m in agent.session.derive_messages()]
        assert "dropped steering" not in texts
        assert texts[-2:] == ["queued send", "second"]
