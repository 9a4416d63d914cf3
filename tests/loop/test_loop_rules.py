"""The loop's rules as plain values, and its state owner (``AgentControl``) on its own.

The turn rules (end-reason precedence, continue-or-stop folding, the fate of late steering) and
the call-id rewrite are pure functions of the bookkeeping, tested here without a model or a
driver; the scenario tests check the same rules through the loop.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.agent import AgentClosedError
from trio_agent.ids import AgentId, CallId
from trio_agent.llm import Message, TextBlock, ToolCallBlock, ToolResult
from trio_agent.loop._callids import unique_call_ids
from trio_agent.loop._control import AgentControl
from trio_agent.loop._state import StepState, TurnState, continues
from trio_agent.runtime import Context

# --- unique call ids ----------------------------------------------------------------------------

_ids = st.lists(
    st.sampled_from(["a", "a", "b", "", "a~2", "call_1_2_0", "call_1_2_1~2"]), max_size=8
)


def _message(ids: list[str]) -> Message:
    blocks: list[Any] = [TextBlock("thinking")]
    for n, call_id in enumerate(ids):
        blocks.append(ToolCallBlock(CallId(call_id), f"tool{n}", "{}"))
        if n % 2:
            blocks.append(TextBlock(f"between {n}"))
    return Message.assistant(*blocks)


@given(ids=_ids)
def test_rewritten_ids_are_unique_non_empty_and_keep_every_first_use(ids: list[str]) -> None:
    message = _message(ids)
    result = unique_call_ids(message, turn=1, step=2)
    out = [block.id for block in result.tool_calls]
    assert len(out) == len(ids)
    assert all(out) and len(set(out)) == len(out)
    for position, call_id in enumerate(ids):
        if call_id and call_id not in ids[:position]:
            assert out[position] == call_id  # the first use keeps its id
        elif call_id:
            assert out[position].startswith(f"{call_id}~")
        else:
            assert out[position].startswith(f"call_1_2_{position}")
    # Only ids change: names, arguments, the other blocks and their order stay.
    strip = [
        attrs.evolve(b, id=CallId("")) if isinstance(b, ToolCallBlock) else b
        for b in result.content
    ]
    assert strip == [
        attrs.evolve(b, id=CallId("")) if isinstance(b, ToolCallBlock) else b
        for b in message.content
    ]
    assert (result.id, result.role, result.source) == (message.id, message.role, message.source)
    assert unique_call_ids(result, turn=1, step=2) is result  # already unique: untouched


def test_repeats_count_up_and_skip_ids_in_use() -> None:
    def rewrite(*ids: str) -> list[str]:
        return [b.id for b in unique_call_ids(_message(list(ids)), turn=3, step=1).tool_calls]

    assert rewrite("a", "a", "a") == ["a", "a~2", "a~3"]
    assert rewrite("a", "a", "a~2") == ["a", "a~3", "a~2"]
    assert rewrite("a~2", "a", "a") == ["a~2", "a", "a~3"]
    assert rewrite("", "") == ["call_3_1_0", "call_3_1_1"]
    assert rewrite("", "call_3_1_0") == ["call_3_1_0~2", "call_3_1_0"]
    message = _message(["x", "y"])
    assert unique_call_ids(message, turn=1, step=1) is message


# --- turn rules -----------------------------------------------------------------------------------


def test_end_reason_precedence() -> None:
    def reason(**facts: Any) -> str:
        return TurnState(number=1, **facts).reason()

    failure = RuntimeError("x")
    assert reason() == "completed"
    assert reason(max_tokens=True) == "max-tokens"
    assert reason(rejected=True, max_tokens=True) == "rejected"
    assert reason(error=failure, max_tokens=True) == "error"
    assert reason(aborted=True, error=failure, rejected=True) == "aborted"
    assert reason(disposed=True, aborted=True, error=failure) == "disposed"


def test_continuation_folding() -> None:
    assert continues("continue", steered=0, pending_steering=False)
    assert not continues("stop", steered=0, pending_steering=False)
    assert continues("stop", steered=1, pending_steering=False)  # steering overrides a stop
    assert continues("stop", steered=0, pending_steering=True)


def test_the_default_asks_for_another_step_only_after_tool_results() -> None:
    step = StepState(number=1)
    assert not step.wants_more("stop")
    step.results.append(ToolResult(CallId("c"), (TextBlock("r"),)))
    assert step.wants_more("tool-calls")
    assert not step.wants_more("max-tokens")
    step.concluded = True
    assert not step.wants_more("tool-calls")


def test_late_steering_survives_only_an_ordinary_stop() -> None:
    assert TurnState(number=1).keeps_late_steering(closing=False)
    assert not TurnState(number=1, terminal=True).keeps_late_steering(closing=False)
    assert not TurnState(number=1).keeps_late_steering(closing=True)


# --- AgentControl ---------------------------------------------------------------------------------


@attrs.frozen
class _FakeAgent:
    id: AgentId
    ctx: Context


def _control(ctx: Context) -> tuple[AgentControl, list[str]]:
    statuses: list[str] = []
    ctx.on("agent/status", lambda e: statuses.append(e.status))
    return AgentControl(_FakeAgent(AgentId("a"), ctx), ctx), statuses  # type: ignore[arg-type]


async def test_status_moves_once_per_real_change_and_never_after_disposed(ctx: Context) -> None:
    control, statuses = _control(ctx)
    assert control.begin_turn()
    control.set_status("running")
    control.settle()
    control.mark_disposed()
    control.set_status("idle")
    assert statuses == ["running", "idle", "disposed"]
    assert control.status == "disposed" and control.closing


async def test_a_cancel_governs_one_iteration(ctx: Context) -> None:
    control, statuses = _control(ctx)
    control.request_cancel()
    assert (control.cancel_requested, control.stopping, control.closing) == (True, True, False)
    assert not control.begin_turn()  # cancelled right after the idle wait: no turn
    assert statuses == []
    assert control.phase().cancel_called  # a phase opened after the cancel starts cancelled
    control.begin_iteration()
    assert not control.cancel_requested
    assert not control.phase().cancel_called
    assert control.begin_turn()
    assert statuses == ["running"]


async def test_a_cancel_reaches_the_running_phase_and_clears_the_inbox(ctx: Context) -> None:
    control, _ = _control(ctx)
    control.inbox.enqueue(Message.user("queued"))
    control.inbox.steer(Message.user("steer"))
    control.inbox.inject(Message.user("context"))
    with control.phase() as scope:
        control.request_cancel()
        await trio.sleep_forever()
    assert scope.cancelled_caught
    assert not control.inbox.queued and not control.inbox.steering
    assert len(control.inbox.injected) == 1  # context is not a prompt


async def test_close_is_idempotent_and_wakes_the_idle_wait(ctx: Context) -> None:
    control, _ = _control(ctx)
    control.check_open()
    async with trio.open_nursery() as nursery:
        woke: list[bool] = []

        async def wait() -> None:
            woke.append(await control.wait_for_prompts())

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        control.request_close()
        control.request_close()
    assert woke == [False]
    with pytest.raises(AgentClosedError, match="'a' is closing"):
        control.check_open()


async def test_wait_idle_returns_once_parked_with_nothing_queued(ctx: Context) -> None:
    control, _ = _control(ctx)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(control.wait_for_prompts)
        with trio.fail_after(5):
            await control.wait_idle()
        control.inbox.enqueue(Message.user("go"))
    assert control.inbox.queued
