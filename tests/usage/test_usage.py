"""ctx.usage: totals per step, turn and session, rebuilt from the log; the next request's size."""

from __future__ import annotations

import gc
import weakref

import pytest

from trio_agent.agent import AgentOptions
from trio_agent.ids import CallId
from trio_agent.llm import (
    ImageBlock,
    Message,
    ModelSpec,
    ScriptedProvider,
    TextBlock,
    ToolCallBlock,
    Usage,
)
from trio_agent.persistence import MemoryPersistence
from trio_agent.session import CompactionSummary, SessionStore, TurnEnd
from trio_agent.testing import ScriptItem, open_test_harness, text, tool_call
from trio_agent.tools import tool
from trio_agent.usage import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    ContextEstimate,
    UsageService,
    UsageTotals,
    estimate_message_tokens,
    estimate_request_tokens,
    estimate_tokens,
    tally,
)


@tool
async def echo(text: str) -> str:
    """Echo the text."""
    return text


def _script() -> list[ScriptItem]:
    return [
        tool_call("c1", "echo", {"text": "hi"}).with_usage(
            Usage(100, 10, cache_read_tokens=50, reasoning_tokens=4)
        ),
        text("done").with_usage(Usage(130, 5)),
        text("second").with_usage(Usage(200, 7, cache_write_tokens=20)),
    ]


async def test_totals_per_step_turn_and_session() -> None:
    async with open_test_harness(_script(), tools=[echo]) as h:
        await h.ctx.plugin(UsageService)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        agent.send("two")
        await agent.wait_idle()
        usage = h.ctx.require(UsageService)
        step1 = UsageTotals(
            input_tokens=100, output_tokens=10, cached_tokens=50, reasoning_tokens=4, requests=1
        )
        assert usage.of(agent, turn=1, step=1) == step1
        assert usage.of(agent, turn=1) == step1 + UsageTotals(130, 5, requests=1)
        assert usage.of(agent.session, turn=2) == UsageTotals(
            200, 7, cache_write_tokens=20, requests=1
        )
        total = usage.of(agent)
        assert total == UsageTotals(430, 22, 50, 20, 4, 3)
        assert total.prompt_tokens == 500 and total.total_tokens == 522
        assert usage.of(agent, turn=9) == UsageTotals()
        report = usage.report(agent)
        assert report.session == total
        assert dict(report.turns) == {1: usage.of(agent, turn=1), 2: usage.of(agent, turn=2)}
        assert set(report.steps) == {(1, 1), (1, 2), (2, 1)}
        assert tally(agent.session.events) == report
        with pytest.raises(TypeError, match="needs the turn"):
            usage.of(agent, step=1)
        with pytest.raises(TypeError, match="expects an agent or a Session"):
            usage.of("a")  # type: ignore[arg-type]


async def test_totals_are_rebuilt_from_the_log_on_resume() -> None:
    async with open_test_harness(
        [*_script(), text("third").with_usage(Usage(300, 9))],
        tools=[echo],
        persistence=MemoryPersistence,
    ) as h:
        await h.ctx.plugin(UsageService)
        usage = h.ctx.require(UsageService)
        handle = await h.ctx.agents.create(agent_id="a", session_id="s1")
        async with handle:
            handle.agent.send("one")
            await handle.agent.wait_idle()
            before = usage.report(handle.agent)
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id="s1")
        async with handle:
            assert usage.report(handle.agent) == before  # a new Session object, same totals
            handle.agent.send("two")
            await handle.agent.wait_idle()
            assert usage.of(handle.agent) == before.session + UsageTotals(
                200, 7, cache_write_tokens=20, requests=1
            )


async def test_a_fork_does_not_count_its_parents_prefix() -> None:
    async with open_test_harness(_script(), tools=[echo]) as h:
        await h.ctx.plugin(UsageService)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        fork = h.ctx.require(SessionStore).fork(agent.session)
        usage = h.ctx.require(UsageService)
        assert usage.of(fork) == UsageTotals()
        assert usage.of(agent).requests == 2
        # The estimate still starts from the copied report: the prefix is in the context.
        assert usage.estimate(fork).reported == 130 + 5


async def test_the_estimate_is_the_last_report_plus_what_came_since() -> None:
    async with open_test_harness(_script(), tools=[echo]) as h:
        await h.ctx.plugin(UsageService)
        agent = h.agent("a")
        usage = h.ctx.require(UsageService)
        empty = usage.estimate(agent)
        assert empty == ContextEstimate(0, 0, 0, None)
        agent.send("one")
        await agent.wait_idle()
        # The last answer reported 130 input + 5 output; nothing was logged after it.
        assert usage.estimate(agent) == ContextEstimate(135, 135, 0, None)
        agent.inject("x" * 40)
        injected = agent.session.derive_messages()[-1]
        assert usage.estimate(agent).tokens == 135 + estimate_message_tokens(injected)
        assert estimate_message_tokens(injected) == MESSAGE_OVERHEAD_TOKENS + 40 // CHARS_PER_TOKEN


async def test_the_whole_request_is_estimated_without_a_report_or_after_a_compaction() -> None:
    async with open_test_harness(
        [tool_call("c1", "echo", {"text": "hi"}), text("done"), text("more")],
        tools=[echo],
        persona="You are terse.",
    ) as h:
        await h.ctx.plugin(UsageService)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        usage = h.ctx.require(UsageService)
        session = agent.session
        header = session.request_header
        assert header is not None
        history = session.derive_messages()
        whole = estimate_request_tokens(header.system, header.tools, history)
        assert usage.estimate(agent) == ContextEstimate(whole, 0, whole, None)
        # Incremental: one more turn adds only its own messages.
        agent.send("two")
        await agent.wait_idle()
        history = session.derive_messages()
        whole = estimate_request_tokens(header.system, header.tools, history)
        assert usage.estimate(agent).tokens == whole
        end = session.events_of_type(TurnEnd.event_type)[0].seq
        session.append(CompactionSummary(turn=1, first_seq=0, last_seq=end, summary="S"))
        history = session.derive_messages()
        assert usage.estimate(agent).tokens == estimate_request_tokens(
            header.system, header.tools, history
        )


async def test_a_compaction_makes_the_report_stale() -> None:
    async with open_test_harness(_script(), tools=[echo]) as h:
        await h.ctx.plugin(UsageService)
        agent = h.agent("a")
        agent.send("one")
        await agent.wait_idle()
        usage = h.ctx.require(UsageService)
        assert usage.estimate(agent).reported == 135
        session = agent.session
        end = session.events_of_type(TurnEnd.event_type)[0].seq
        session.append(CompactionSummary(turn=1, first_seq=0, last_seq=end, summary="S"))
        estimate = usage.estimate(agent)
        assert estimate.reported == 0 and estimate.estimated == estimate.tokens > 0


async def test_the_window_comes_from_the_provider_config() -> None:
    async with open_test_harness([text("hi").with_usage(Usage(500, 100))]) as h:
        await h.ctx.plugin(
            ScriptedProvider,
            ScriptedProvider.Config(
                name="other", models=("small", ModelSpec("big", context_window=1_000))
            ),
        )
        await h.ctx.plugin(UsageService)
        usage = h.ctx.require(UsageService)
        assert usage.context_window("other", "big") == 1_000
        assert usage.context_window("other", "small") is None
        assert usage.context_window("nobody", "big") is None
        agent = h.agent("a", AgentOptions(provider="other", model="big"))
        assert usage.estimate(agent).context_window == 1_000  # from the options, before a request
        assert usage.window_for(agent) == 1_000
        plain = h.agent("b")
        plain.send("hi")
        await plain.wait_idle()
        estimate = usage.estimate(plain)  # scripted/scripted-model: no window configured
        assert estimate.context_window is None and estimate.fraction is None
        assert ContextEstimate(600, 600, 0, 1_000).fraction == 0.6
        assert usage.fraction(plain) is None
        sized = h.agent("c", AgentOptions(provider="other", model="big"))
        sized.inject("x" * 400)
        fraction = usage.fraction(sized)
        assert fraction is not None and fraction > 0
        assert fraction == usage.estimate(sized).fraction


async def test_the_service_does_not_keep_sessions_alive() -> None:
    async with open_test_harness(_script(), tools=[echo]) as h:
        await h.ctx.plugin(UsageService)
        usage = h.ctx.require(UsageService)
        store = h.ctx.require(SessionStore)
        session = store.create("gone")
        usage.estimate(session)
        usage.of(session)
        gone = weakref.ref(session)
        store.detach(session)
        del session
        gc.collect()
        assert gone() is None


def test_the_estimator() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcde") == 2  # rounded up
    call = Message.assistant(ToolCallBlock(CallId("c1"), "read", '{"path": "a"}'))
    assert estimate_message_tokens(call) == MESSAGE_OVERHEAD_TOKENS + -(-(2 + 4 + 13) // 4)
    image = Message("m", "user", (TextBlock("see"), ImageBlock("image/png", "AAAA")), "user")  # type: ignore[arg-type]
    assert estimate_message_tokens(image) == MESSAGE_OVERHEAD_TOKENS + 1 + IMAGE_TOKENS
    assert estimate_request_tokens("abcd", (), ()) == MESSAGE_OVERHEAD_TOKENS + 1
