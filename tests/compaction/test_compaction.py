"""The compaction plugin: threshold, manual, prune, failures and cancellation, context overflow."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent.compaction import (
    DEFAULT_PROMPT,
    PRUNE_STUB,
    SUMMARY_HEADING,
    Compaction,
    CompactionError,
    CompactionFailed,
)
from trio_agent.llm import (
    LlmService,
    RetryPolicy,
    ScriptedAdapter,
    TextBlock,
    ToolResultBlock,
    Usage,
)
from trio_agent.lowlevel import PluginConfigError
from trio_agent.session import (
    COMPACTION_SOURCE,
    CompactionPrune,
    CompactionSummary,
    TurnEnd,
    project_messages,
)
from trio_agent.testing import (
    FakeResponse,
    JsonResponse,
    SseResponse,
    error,
    error_response,
    hang,
    open_fake_openai_server,
    sse_done,
    sse_finish,
    sse_reply,
    sse_response,
    sse_tool_call,
    sse_usage,
    text,
    tool_call,
    turn_end_reasons,
)

from .helpers import MODEL, PROVIDER, WindowedModel, assert_pairs_intact, open_compaction_harness


def _turn(number: int) -> list[object]:
    """A turn's two answers: a read_page call, then a text reply (both reporting usage)."""
    return [
        tool_call(f"c{number}", "read_page", {"page": number}).with_usage(Usage(100, 10)),
        text(f"answer {number}").with_usage(Usage(150, 5)),
    ]


async def _run_turns(agent: object, first: int, last: int) -> None:
    for number in range(first, last + 1):
        agent.send(f"turn {number}")  # type: ignore[attr-defined]
        await agent.wait_idle()  # type: ignore[attr-defined]


async def test_manual_compaction_summarises_the_oldest_closed_turns() -> None:
    script = [*_turn(1), *_turn(2), *_turn(3), text("the summary")]
    async with open_compaction_harness(script, window=None, keep_turns=1) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 3)
        session = agent.session
        before = tuple(session.derive_messages())
        result = await h.ctx.require(Compaction).compact(agent)
        assert result is not None and result.strategy == "summary"
        ends = session.events_of_type(TurnEnd.event_type)
        assert (result.first_seq, result.last_seq) == (0, ends[1].seq)  # turns 1-2; 3 is kept
        assert result.event.type == "compaction/summary"
        payload = result.event.payload_as(CompactionSummary)
        assert payload.summary == f"{SUMMARY_HEADING}\n\nthe summary"
        assert (payload.turn, payload.step) == (3, None)  # compacted after turn 3
        history = session.derive_messages()
        assert history[0].source == COMPACTION_SOURCE and history[0].text == payload.summary
        assert tuple(history[1:]) == before[8:]  # turn 3 verbatim
        assert result.before.reported == 155 and result.after.reported == 0  # stale: estimated
        # The summary call: the agent's own model, the default prompt, a transcript, no tools.
        request = h.model.requests[-1]
        assert (request.config.provider, request.config.model) == (PROVIDER, MODEL)
        assert request.system == DEFAULT_PROMPT and request.tools == ()
        transcript = request.messages[0].text
        assert "User: turn 1" in transcript and "Assistant: answer 2" in transcript
        assert (
            "Assistant called tool read_page" in transcript and "Tool result: page 1" in transcript
        )
        assert "turn 3" not in transcript
        # Nothing new is closed beyond keep_turns: nothing to do, and no model call.
        calls = len(h.model.requests)
        assert await h.ctx.require(Compaction).compact(agent) is None
        assert len(h.model.requests) == calls


async def test_nothing_to_compact_with_fewer_closed_turns_than_kept() -> None:
    async with open_compaction_harness([*_turn(1), *_turn(2)], window=None, keep_turns=2) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 2)
        assert await h.ctx.require(Compaction).compact(agent) is None
        assert await h.ctx.require(Compaction).compact(agent, strategy="prune") is None


async def test_the_threshold_compacts_before_the_step() -> None:
    model = WindowedModel(window=1_500)
    async with open_compaction_harness([model] * 200, window=1_500, keep_turns=1) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 25)
        session = agent.session
        summaries = session.events_of_type(CompactionSummary.event_type)
        assert summaries, "the window should have filled up"
        assert max(model.sizes) <= 1_500 * 0.8 + 100  # compacted before crossing the window
        assert set(turn_end_reasons(session)) == {"completed"}
        for event in summaries:
            # Logged by agent/pre-step: inside a turn, before that step's step/start.
            payload = event.payload_as(CompactionSummary)
            assert payload.turn == session.events[event.seq + 1].data["turn"]
            assert payload.step is None
            assert session.events[event.seq + 1].type == "step/start"
        for request in model.requests:
            assert_pairs_intact(request.messages)


async def test_prune_stubs_old_tool_results_without_a_model_call() -> None:
    script = [*_turn(1), *_turn(2), *_turn(3)]
    async with open_compaction_harness(script, window=None, keep_turns=1, strategy="prune") as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 3)
        calls = len(h.model.requests)
        result = await h.ctx.require(Compaction).compact(agent)
        assert result is not None and result.strategy == "prune"
        assert len(h.model.requests) == calls
        assert result.event.payload_as(CompactionPrune).stub == PRUNE_STUB
        results = [
            m.content[0]
            for m in agent.session.derive_messages()
            if isinstance(m.content[0], ToolResultBlock)
        ]
        assert [r.content for r in results[:2]] == [(TextBlock(PRUNE_STUB),)] * 2
        assert results[2].content != (TextBlock(PRUNE_STUB),)  # turn 3 is kept
        assert_pairs_intact(agent.session.derive_messages())
        # Pruned already: nothing more to prune.
        assert await h.ctx.require(Compaction).compact(agent) is None


async def test_a_failed_summary_leaves_the_history_and_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = [*_turn(1), *_turn(2), error("SERVER", "the summariser is down")]
    async with open_compaction_harness(script, window=None, keep_turns=1) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 2)
        heard: list[CompactionFailed] = []
        h.ctx.on("compaction/failed", heard.append)
        before = agent.session.derive_messages()
        with pytest.raises(CompactionError, match="summary call to model/windowed failed") as info:
            await h.ctx.require(Compaction).compact(agent)
        assert info.value.failure is not None and info.value.failure.code == "SERVER"
        assert agent.session.derive_messages() == before
        assert [e.agent for e in heard] == [agent] and heard[0].trigger == "manual"
        logged = agent.session.events[-1]
        assert logged.type == "compaction/failed"
        assert (
            logged.data["trigger"] == "manual" and "the summariser is down" in logged.data["error"]
        )
        assert "compaction (manual) failed" in caplog.text


async def test_an_empty_summary_is_a_failure() -> None:
    async with open_compaction_harness(
        [*_turn(1), *_turn(2), text("  ")], window=None, keep_turns=1
    ) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 2)
        with pytest.raises(CompactionError, match="returned no text"):
            await h.ctx.require(Compaction).compact(agent)


async def test_a_cancelled_summary_leaves_the_history_and_is_reported() -> None:
    # threshold 0.01: every pre-step with a closed turn beyond keep_turns=0 compacts.
    script = [text("one").with_usage(Usage(50, 5)), hang(), text("summary"), text("three")]
    async with open_compaction_harness(script, window=1_000, keep_turns=0, threshold=0.01) as h:
        agent = h.agent("a")
        heard: list[CompactionFailed] = []
        h.ctx.on("compaction/failed", heard.append)
        agent.send("turn 1")
        await agent.wait_idle()
        before = agent.session.derive_messages()
        agent.send("turn 2")
        await trio.testing.wait_all_tasks_blocked()
        assert h.model.requests[-1].system == DEFAULT_PROMPT  # the summary call hangs
        agent.cancel()
        await agent.wait_idle()
        session = agent.session
        assert turn_end_reasons(session) == ["completed", "aborted"]
        assert session.derive_messages()[: len(before)] == before
        assert not session.events_of_type(CompactionSummary.event_type)
        assert [(e.trigger, type(e.error)) for e in heard] == [("threshold", trio.Cancelled)]
        failed = session.events_of_type("compaction/failed")
        assert [e.data["error"] for e in failed] == ["cancelled"]
        # The next turn compacts and answers.
        agent.send("turn 3")
        await agent.wait_idle()
        assert turn_end_reasons(session)[-1] == "completed"
        assert len(session.events_of_type(CompactionSummary.event_type)) == 1


async def test_concurrent_compactions_of_one_session_run_one_at_a_time() -> None:
    script = [*_turn(1), *_turn(2), text("summary")]
    async with open_compaction_harness(script, window=None, keep_turns=1) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 2)
        results = []

        async def compact() -> None:
            results.append(await h.ctx.require(Compaction).compact(agent))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(compact)
            nursery.start_soon(compact)
        assert sorted(r is None for r in results) == [False, True]


async def test_another_model_can_write_the_summary() -> None:
    script = [*_turn(1), *_turn(2)]
    async with open_compaction_harness(script, window=None, compaction=False) as h:
        writer = ScriptedAdapter(name="writer", responses=[text("cheap summary")])
        h.ctx.require(LlmService).register(writer)
        await h.ctx.plugin(
            Compaction,
            Compaction.Config(provider="writer", model="small", keep_turns=1, prompt="Sum up."),
        )
        agent = h.agent("a")
        await _run_turns(agent, 1, 2)
        result = await h.ctx.require(Compaction).compact(agent)
        assert result is not None
        assert writer.requests[0].config.model == "small" and writer.requests[0].system == "Sum up."


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"threshold": 0}, "fraction of the window"),
        ({"threshold": 1.5}, "fraction of the window"),
        ({"keep_turns": -1}, "keep_turns must be"),
    ],
)
async def test_a_bad_config_is_refused(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Compaction.Config(**config)
    async with open_compaction_harness([], window=None, compaction=False) as h:
        with pytest.raises(PluginConfigError, match="plugin Compaction"):
            await h.ctx.plugin(Compaction, config)
        with pytest.raises(PluginConfigError, match="plugin Compaction"):
            await h.ctx.plugin(Compaction, {"strategy": "shrink"})


# --- CONTEXT_WINDOW_EXCEEDED ----------------------------------------------------------------


def _overflow() -> JsonResponse:
    return error_response(
        400,
        "This model's maximum context length is 1000 tokens.",
        type="invalid_request_error",
        code="context_length_exceeded",
    )


def _call_reply(call_id: str) -> SseResponse:
    return sse_response(
        sse_tool_call(0, id=call_id, name="read_page", arguments='{"page": 1}'),
        sse_finish("tool_calls"),
        sse_usage(100, 10),
        sse_done(),
    )


async def test_context_window_exceeded_is_survived_once_by_compaction_and_retry() -> None:
    responses: list[FakeResponse] = [
        _call_reply("c1"),
        sse_reply("answer 1"),
        sse_reply("answer 2"),
        _overflow(),  # turn 3's request
        sse_reply("what happened before"),  # the summary call
        sse_reply("answer 3"),  # the retry, in the same step
    ]
    async with open_fake_openai_server(responses) as server:
        async with open_compaction_harness(
            window=None,  # no threshold: only the provider's refusal triggers it
            keep_turns=1,
            openai_base_url=server.base_url,
            retry=RetryPolicy(initial_delay=0, max_delay=0, jitter=0),
        ) as h:
            agent = h.agent("a")
            await _run_turns(agent, 1, 3)
            session = agent.session
            assert turn_end_reasons(session) == ["completed"] * 3
            (summary,) = session.events_of_type(CompactionSummary.event_type)
            payload = summary.payload_as(CompactionSummary)
            assert (payload.turn, payload.step) == (3, 1)  # inside the failing step
            assert payload.last_seq == session.events_of_type(TurnEnd.event_type)[0].seq
            starts = [e for e in session.events if e.type == "step/start" and e.data["turn"] == 3]
            assert len(starts) == 1  # retried inside the same step
        bodies = [json.loads(r.body) for r in server.requests]
        assert len(bodies) == 6
        assert bodies[4]["messages"][-1]["content"].startswith("User: turn 1")  # the transcript
        retried = [m.get("content") for m in bodies[5]["messages"]]
        assert any(SUMMARY_HEADING in (c or "") for c in retried)
        assert "turn 1" not in retried and "turn 2" in retried and "turn 3" in retried
        assert len(bodies[5]["messages"]) < len(bodies[3]["messages"])


async def test_a_second_overflow_in_the_step_fails_the_turn_clearly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    responses: list[FakeResponse] = [
        sse_reply("answer 1"),
        sse_reply("answer 2"),
        _overflow(),
        sse_reply("S"),
        _overflow(),
    ]
    async with open_fake_openai_server(responses) as server:
        async with open_compaction_harness(
            window=None, keep_turns=1, openai_base_url=server.base_url
        ) as h:
            agent = h.agent("a")
            await _run_turns(agent, 1, 3)
            session = agent.session
            assert turn_end_reasons(session) == ["completed", "completed", "error"]
            end = session.events_of_type(TurnEnd.event_type)[-1].payload_as(TurnEnd)
            assert end.error is not None and end.error.code == "CONTEXT_WINDOW_EXCEEDED"
            assert len(session.events_of_type(CompactionSummary.event_type)) == 1
        assert len(server.requests) == 5
    assert "still exceeds the context window of model/windowed after a compaction" in caplog.text


async def test_an_overflow_with_nothing_to_compact_fails_and_says_why() -> None:
    async with (
        open_fake_openai_server([_overflow()]) as server,
        open_compaction_harness(window=None, keep_turns=1, openai_base_url=server.base_url) as h,
    ):
        agent = h.agent("a")
        agent.send("turn 1")
        await agent.wait_idle()
        session = agent.session
        assert turn_end_reasons(session) == ["error"]
        (failed,) = session.events_of_type("compaction/failed")
        assert "there is nothing left to compact" in failed.data["error"]
        assert failed.data["trigger"] == "context-window-exceeded"


async def test_the_log_reloads_to_the_same_projection() -> None:
    script = [*_turn(1), *_turn(2), *_turn(3), text("S")]
    async with open_compaction_harness(script, window=None, keep_turns=1) as h:
        agent = h.agent("a")
        await _run_turns(agent, 1, 3)
        await h.ctx.require(Compaction).compact(agent)
        assert project_messages(agent.session.events) == agent.session.derive_messages()
