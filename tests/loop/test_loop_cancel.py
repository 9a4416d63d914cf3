"""Cancellation windows (seed 000, SPEC sections 8 and 11): each one, and a later prompt after it."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from trio_agent.agent import PromptSubmit
from trio_agent.llm import ToolResult, ToolResultBlock
from trio_agent.runtime import Next
from trio_agent.session import (
    AssistantMessageEvent,
    ContextMessageEvent,
    SteeringMessageEvent,
    ToolResultEvent,
    UserMessageEvent,
)
from trio_agent.testing import (
    event_types,
    hang,
    open_test_harness,
    text,
    tool_call,
    turn_end_reasons,
)
from trio_agent.tools import ToolResultNotice, tool


def turn_ends(agent: Any) -> list[str]:
    return turn_end_reasons(agent.session)


def turn_numbers(agent: Any) -> list[int]:
    return [e.payload.turn for e in agent.session.events if e.type == "turn/start"]


async def test_cancel_while_idle_is_harmless_and_never_leaks() -> None:
    async with open_test_harness([text("ok")]) as h:
        agent = h.agent()
        agent.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert len(agent.session.events) == 0
        agent.send("later prompt")
        await agent.wait_idle()
        assert turn_ends(agent) == ["completed"]
        assert turn_numbers(agent) == [1]


async def test_cancel_before_the_driver_takes_the_prompt() -> None:
    async with open_test_harness([text("second runs")]) as h:
        agent = h.agent()
        await trio.testing.wait_all_tasks_blocked()
        agent.send("dropped")
        agent.cancel()
        agent.send("kept")  # a later prompt in the same tick: the cancel does not govern it
        await agent.wait_idle()
        users = [
            e.payload_as(UserMessageEvent).message.text
            for e in agent.session.events
            if e.type == "user/message"
        ]
        assert users == ["kept"]
        assert turn_ends(agent) == ["completed"]
        assert turn_numbers(agent) == [1]


async def test_cancel_from_a_running_status_listener_produces_no_turn() -> None:
    async with open_test_harness([text("later")]) as h:
        agent = h.agent()
        cancelled: list[bool] = []

        def on_status(event: Any) -> None:
            if event.status == "running" and not cancelled:
                cancelled.append(True)
                agent.cancel()

        agent.ctx.on("agent/status", on_status)
        agent.send("never runs")
        await agent.wait_idle()
        assert len(agent.session.events) == 0
        agent.send("runs")
        await agent.wait_idle()
        assert turn_numbers(agent) == [1]  # no turn number was consumed
        assert turn_ends(agent) == ["completed"]


async def test_cancel_during_prompt_submit() -> None:
    entered = trio.Event()
    async with open_test_harness([text("later")]) as h:
        agent = h.agent()

        async def slow_policy(event: PromptSubmit, next: Next) -> Any:
            if event.message.text == "first":
                entered.set()
                await trio.sleep_forever()
            return await next()

        agent.ctx.on("agent/prompt-submit", slow_policy)
        agent.send("first")
        await entered.wait()
        agent.send("queued behind")  # queued-but-unstarted: never runs, never batched
        agent.cancel()
        await agent.wait_idle()
        assert event_types(agent.session) == ["turn/start", "turn/end"]
        assert turn_ends(agent) == ["aborted"]
        agent.send("second")
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted", "completed"]
        assert [m.text for m in h.model.requests[0].messages] == ["second"]


async def test_cancel_during_pre_step() -> None:
    entered = trio.Event()
    async with open_test_harness([text("later")]) as h:
        agent = h.agent()
        blocking = [True]

        async def slow(event: Any) -> None:
            if blocking[0]:
                entered.set()
                await trio.sleep_forever()

        agent.ctx.on("agent/pre-step", slow)
        agent.send("first")
        await entered.wait()
        agent.cancel()
        await agent.wait_idle()
        assert event_types(agent.session) == ["turn/start", "user/message", "turn/end"]
        assert turn_ends(agent) == ["aborted"]
        blocking[0] = False
        agent.send("second")
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted", "completed"]


async def test_cancel_mid_stream_keeps_the_visible_partial_text() -> None:
    async with open_test_harness([hang(partial=["Let me ", "think"]), text("done")]) as h:
        agent = h.agent()
        agent.send("question")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
        types = event_types(agent.session)
        assert types == [
            "turn/start",
            "user/message",
            "step/start",
            "request/header",
            "assistant/message",
            "step/end",
            "turn/end",
        ]
        anchor = next(e for e in agent.session.events if e.type == "assistant/message")
        payload = anchor.payload_as(AssistantMessageEvent)
        assert payload.interrupted
        assert payload.message.text == "Let me think"
        assert turn_ends(agent) == ["aborted"]
        agent.send("go on")
        await agent.wait_idle()
        assert [m.text for m in h.model.requests[1].messages] == [
            "question",
            "Let me think",
            "go on",
        ]


async def test_cancel_with_nothing_visible_leaves_no_anchor() -> None:
    async with open_test_harness([hang()]) as h:
        agent = h.agent()
        agent.send("question")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
        assert "assistant/message" not in event_types(agent.session)
        assert turn_ends(agent) == ["aborted"]


async def test_cancel_during_a_tool_gives_every_call_one_result() -> None:
    entered = trio.Event()
    notices: list[ToolResult] = []

    @tool
    async def slow() -> str:
        """Take forever."""
        entered.set()
        await trio.sleep_forever()

    @tool
    async def quick() -> str:
        """Be quick."""
        return "quick"

    script = [
        tool_call("c1", "quick", "{}")
        + tool_call("c2", "slow", "{}")
        + tool_call("c3", "quick", "{}"),
        text("after"),
    ]
    async with open_test_harness(script, tools=[slow, quick]) as h:
        h.ctx.on(
            "tools/result",
            lambda n: notices.append(n.result) if isinstance(n, ToolResultNotice) else None,
        )
        agent = h.agent()
        agent.send("work")
        await entered.wait()
        agent.cancel()
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
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "turn/end",
        ]
        results = [
            e.payload_as(ToolResultEvent).result
            for e in agent.session.events
            if e.type == "tool/result"
        ]
        assert [(r.call_id, r.is_error, r.code) for r in results] == [
            ("c1", False, None),
            ("c2", True, "ABORTED"),
            ("c3", True, "ABORTED_BEFORE_DISPATCH"),
        ]
        assert turn_ends(agent) == ["aborted"]
        assert [r.code for r in notices if r.call_id == "c2"] == ["ABORTED"]
        # The derived history stays balanced: every call is answered, in model order.
        history = agent.session.derive_messages()
        assert [
            b.tool_call_id for m in history[2:] for b in m.content if isinstance(b, ToolResultBlock)
        ] == ["c1", "c2", "c3"]
        agent.send("next")
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted", "completed"]


async def test_cancel_during_turn_stop() -> None:
    entered = trio.Event()
    async with open_test_harness([text("answer"), text("later")]) as h:
        agent = h.agent()
        blocking = [True]

        async def slow_policy(event: Any) -> None:
            if blocking[0]:
                entered.set()
                await trio.sleep_forever()

        agent.ctx.on("agent/turn-stop", slow_policy)
        agent.send("first")
        await entered.wait()
        agent.cancel()
        await agent.wait_idle()
        assert event_types(agent.session)[-3:] == ["assistant/message", "step/end", "turn/end"]
        assert turn_ends(agent) == ["aborted"]
        blocking[0] = False
        agent.send("second")
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted", "completed"]


async def test_cancel_clears_queued_prompts_and_steering() -> None:
    async with open_test_harness([hang(partial="working"), text("fresh")]) as h:
        agent = h.agent()
        agent.send("first")
        await trio.testing.wait_all_tasks_blocked()
        agent.send("queued")
        agent.steer("steering")
        agent.cancel()
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted"]
        texts = [
            p.message.text
            for e in agent.session.events
            if isinstance(
                p := e.payload, UserMessageEvent | ContextMessageEvent | SteeringMessageEvent
            )
        ]
        assert texts == ["first"]
        agent.send("fresh prompt")
        await agent.wait_idle()
        assert [m.text for m in h.model.requests[1].messages][-1] == "fresh prompt"


async def test_cancel_beats_a_pending_retry(autojump_clock: trio.testing.MockClock) -> None:
    from trio_agent.llm import RetryPolicy
    from trio_agent.testing import error

    policy = RetryPolicy(max_attempts=5, initial_delay=100.0, max_delay=100.0, jitter=0.0)
    async with open_test_harness([error("SERVER", "down"), text("unused")], retry=policy) as h:
        agent = h.agent()
        errors: list[Any] = []
        agent.ctx.on("agent/error", errors.append)
        agent.send("hi")
        await trio.testing.wait_all_tasks_blocked()
        assert event_types(agent.session)[-1] == "llm/retry"
        agent.cancel()
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted"]
        assert len(h.model.requests) == 1
        assert errors == []  # the failure the cancel caused is not reported as an error


async def test_steering_that_arrives_after_the_cancel_is_not_lost() -> None:
    async with open_test_harness([hang(partial="working"), text("the late question")]) as h:
        agent = h.agent()

        def steer_while_closing(event: Any) -> None:
            if event.turn == 1:
                agent.steer("a later question")  # the turn is closing but still running

        agent.ctx.on("agent/turn-end", steer_while_closing)
        agent.send("first")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.wait_idle()
        assert turn_ends(agent) == ["aborted", "completed"]
        assert h.model.requests[1].messages[-1].text == "a later question"
