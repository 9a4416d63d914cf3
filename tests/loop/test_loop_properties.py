"""Property: random operation sequences against random model behaviour keep the log's invariants.

Operations: send / steer / inject / cancel / wait_idle / settle, then a dispose. Model responses:
text, tool calls (safe, slow, failing, unknown), max-tokens, errors (retried or not) and hangs.
After every run: seq contiguous; turns and steps balanced and numbered; every tool/call answered
exactly once under its own id; every prompt logged at most once, sends in send order; status
idle ⇄ running, then disposed once; no task left running.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent.llm import GenerateRequest, RetryPolicy
from trio_agent.session import Session, ToolCallEvent, ToolResultEvent, TurnEnd
from trio_agent.testing import (
    ScriptedResponse,
    error,
    hang,
    max_tokens,
    open_test_harness,
    text,
    tool_call,
)
from trio_agent.tools import tool


@tool(concurrency_safe=True)
async def echo(value: str) -> str:
    """Echo a value."""
    return value


@tool
async def slow(seconds: float) -> str:
    """Sleep a while (virtual time)."""
    await trio.sleep(seconds)
    return "slept"


@tool
async def boom() -> str:
    """Always fails."""
    raise RuntimeError("tool failure")


TOOLS = [echo, slow, boom]

_calls = st.sampled_from(["echo", "slow", "boom", "missing"])
_response_kinds = st.one_of(
    st.just(("text",)),
    st.tuples(st.just("tools"), st.lists(_calls, min_size=1, max_size=4)),
    st.tuples(st.just("tools"), st.lists(_calls, min_size=1, max_size=4)),
    st.just(("max-tokens",)),
    st.tuples(st.just("error"), st.sampled_from(["SERVER", "AUTH"])),
    st.just(("hang",)),
)
# Weighted so that the interesting windows (a cancel while a stream or a tool is in flight, a
# steer during a turn) come up often.
_ops = st.lists(
    st.sampled_from(
        [
            ("send",),
            ("send",),
            ("send",),
            ("steer",),
            ("inject",),
            ("cancel",),
            ("cancel",),
            ("wait_idle",),
            ("settle",),
            ("settle",),
            ("sleep", 0.5),
            ("sleep", 2.0),
            ("sleep", 10.0),
        ]
    ),
    max_size=20,
)


def _responder(kinds: list[Any]) -> Any:
    counter = iter(range(10_000))

    def respond(request: GenerateRequest) -> ScriptedResponse:
        if not kinds:
            return text("ok")
        kind = kinds.pop(0)
        n = next(counter)
        if kind[0] == "text":
            return text("answer ", str(n))
        if kind[0] == "tools":
            response: ScriptedResponse | None = None
            for i, name in enumerate(kind[1]):
                args = {"echo": '{"value": "v"}', "slow": '{"seconds": 3}'}.get(name, "{}")
                part = tool_call(f"call-{n}-{i}", name, args, chunks=2)
                response = part if response is None else response + part
            assert response is not None
            return response
        if kind[0] == "max-tokens":
            return max_tokens("cut ", "off")
        if kind[0] == "error":
            return error(kind[1], "model failure")
        return hang(partial="partial")

    return respond


def check_log(session: Session, sends: list[str], sent_all: set[str]) -> None:
    events = list(session.events)
    assert [e.seq for e in events] == list(range(len(events)))

    open_turn: int | None = None
    open_step: int | None = None
    last_turn = 0
    pending_calls: list[str] = []
    call_ids: Counter[str] = Counter()
    result_ids: Counter[str] = Counter()
    for event in events:
        if event.type == "turn/start":
            assert open_turn is None, "nested turn"
            open_turn = event.payload.turn
            assert open_turn == last_turn + 1
            last_turn = open_turn
            step_no = 0
        elif event.type == "turn/end":
            assert open_turn is not None
            assert open_step is None, "turn ended inside a step"
            assert event.payload_as(TurnEnd).turn == open_turn
            open_turn = None
        elif event.type == "step/start":
            assert open_turn is not None
            assert open_step is None
            step_no += 1
            assert event.payload.step == step_no
            open_step = step_no
        elif event.type == "step/end":
            assert open_step is not None
            assert not pending_calls, f"step closed with unanswered calls {pending_calls}"
            open_step = None
        elif event.type == "tool/call":
            assert open_step is not None
            call_id = event.payload_as(ToolCallEvent).call_id
            call_ids[call_id] += 1
            pending_calls.append(call_id)
        elif event.type == "tool/result":
            call_id = event.payload_as(ToolResultEvent).call_id
            assert event.payload_as(ToolResultEvent).result.call_id == call_id
            assert call_id in pending_calls
            pending_calls.remove(call_id)
            result_ids[call_id] += 1
        elif event.type == "assistant/message":
            payload = event.payload
            for block in payload.message.tool_calls:
                assert not payload.interrupted
                assert block.id not in call_ids  # announced before its tool/call
    assert open_turn is None
    assert call_ids == result_ids
    assert all(n == 1 for n in call_ids.values())

    logged = [
        e.payload.message.text
        for e in events
        if e.type in ("user/message", "steering/message", "prompt/blocked")
        and e.payload.message.text in sent_all
    ]
    assert len(logged) == len(set(logged)), f"a prompt was logged twice: {logged}"
    logged_sends = [p for p in logged if p in sends]
    assert logged_sends == [s for s in sends if s in logged_sends], "sends out of order"


def check_statuses(statuses: list[str]) -> None:
    assert statuses[-1] == "disposed"
    assert statuses.count("disposed") == 1
    previous = "idle"
    for status in statuses[:-1]:
        assert status != previous
        assert status in ("idle", "running")
        previous = status


class _TaskCounter(trio.abc.Instrument):
    def __init__(self) -> None:
        self.live: set[trio.lowlevel.Task] = set()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.live.add(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.live.discard(task)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=_ops, kinds=st.lists(_response_kinds, max_size=12), retry=st.booleans())
def test_random_operations_keep_the_log_balanced(
    ops: list[Any], kinds: list[Any], retry: bool
) -> None:
    sends: list[str] = []
    sent_all: set[str] = set()
    statuses: list[str] = []
    sessions: list[Session] = []
    counter = _TaskCounter()

    async def main() -> None:
        trio.lowlevel.add_instrument(counter)
        policy = (
            RetryPolicy(max_attempts=2, initial_delay=1.0, max_delay=1.0, jitter=0.0)
            if retry
            else None
        )
        responder = _responder(list(kinds))
        async with open_test_harness([responder] * 200, tools=TOOLS, retry=policy) as h:
            agent = h.agent("prop")
            sessions.append(agent.session)
            agent.ctx.on("agent/status", lambda e: statuses.append(e.status))
            for n, op in enumerate(ops):
                name = op[0]
                if name == "send":
                    sends.append(f"send-{n}")
                    sent_all.add(f"send-{n}")
                    agent.send(f"send-{n}")
                elif name == "steer":
                    sent_all.add(f"steer-{n}")
                    agent.steer(f"steer-{n}")
                elif name == "inject":
                    agent.inject(f"inject-{n}")
                elif name == "cancel":
                    agent.cancel()
                elif name == "wait_idle":
                    with trio.move_on_after(60):
                        await agent.wait_idle()
                elif name == "settle":
                    await trio.testing.wait_all_tasks_blocked()
                else:
                    await trio.sleep(op[1])
            await agent.aclose()
        assert not (counter.live - {trio.lowlevel.current_task()})
        trio.lowlevel.remove_instrument(counter)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_log(sessions[0], sends, sent_all)
    check_statuses(statuses or ["disposed"])
