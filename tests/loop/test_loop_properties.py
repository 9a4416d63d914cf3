"""Property: random operation sequences against random model behaviour keep the log's invariants.

Operations: send / steer / inject / cancel / wait_idle / settle, then a dispose. Model responses:
text, tool calls (safe, slow, failing, unknown; their ids drawn from a small pool, so repeated and
empty ids are common), max-tokens, errors (retried or not) and hangs. After every run: seq
contiguous; turns and steps balanced and numbered; every call block of a logged assistant
message has a unique non-empty id and is answered exactly once (one tool/call, one tool/result,
same id); the derived history pairs every call with its result; every prompt logged at most
once, sends in send order; status idle ⇄ running, then disposed once; no task left running.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_agent.ids import CallId
from trio_agent.llm import GenerateRequest, Message, RetryPolicy, ToolResultBlock
from trio_agent.session import (
    AssistantMessageEvent,
    PromptBlocked,
    Session,
    SteeringMessageEvent,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from trio_agent.testing import (
    ScriptedResponse,
    assert_no_leaked_tasks,
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

_calls = st.tuples(
    st.sampled_from(["echo", "slow", "boom", "missing"]),
    # Repeats within a message and across steps, empties, and an id a rewrite would produce.
    st.sampled_from(["c1", "c1", "c2", "", "c1~2"]),
)
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
            for name, call_id in kind[1]:
                args = {"echo": '{"value": "v"}', "slow": '{"seconds": 3}'}.get(name, "{}")
                part = tool_call(call_id, name, args, chunks=2)
                response = part if response is None else response + part
            assert response is not None
            return response
        if kind[0] == "max-tokens":
            return max_tokens("cut ", "off")
        if kind[0] == "error":
            return error(kind[1], "model failure")
        return hang(partial="partial")

    return respond


def result_id(message: Message) -> CallId:
    """The call id a tool-result message answers."""
    block = message.content[0]
    assert isinstance(block, ToolResultBlock)
    return block.tool_call_id


def check_log(session: Session, sends: list[str], sent_all: set[str]) -> None:
    events = list(session.events)
    assert [e.seq for e in events] == list(range(len(events)))

    open_turn: int | None = None
    open_step: int | None = None
    last_turn = 0
    # Per step: the call blocks of its logged message, and what was logged for them.
    blocks: list[CallId] = []
    pending_calls: list[str] = []
    call_ids: Counter[str] = Counter()
    result_ids: Counter[str] = Counter()
    for event in events:
        if event.type == "turn/start":
            assert open_turn is None, "nested turn"
            open_turn = event.payload_as(TurnStart).turn
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
            assert event.payload_as(StepStart).step == step_no
            open_step = step_no
            blocks, call_ids, result_ids = [], Counter(), Counter()
        elif event.type == "step/end":
            assert open_step is not None
            assert not pending_calls, f"step closed with unanswered calls {pending_calls}"
            # Every call block answered exactly once: one tool/call and one tool/result.
            assert call_ids == result_ids == Counter(blocks)
            open_step = None
        elif event.type == "tool/call":
            assert open_step is not None
            call_id = event.payload_as(ToolCallEvent).call_id
            assert call_id in blocks, f"tool/call {call_id!r} is not a call of the message"
            call_ids[call_id] += 1
            pending_calls.append(call_id)
        elif event.type == "tool/result":
            call_id = event.payload_as(ToolResultEvent).call_id
            assert event.payload_as(ToolResultEvent).result.call_id == call_id
            assert call_id in pending_calls
            pending_calls.remove(call_id)
            result_ids[call_id] += 1
        elif event.type == "assistant/message":
            payload = event.payload_as(AssistantMessageEvent)
            ids = [block.id for block in payload.message.tool_calls]
            if ids:
                assert not payload.interrupted
                assert not call_ids, "calls announced before their message"
                assert all(ids) and len(set(ids)) == len(ids), f"ids not unique: {ids}"
                blocks = ids
    assert open_turn is None

    # The next request pairs every call with its result, in model order.
    history = list(session.derive_messages())
    for index, message in enumerate(history):
        ids = [block.id for block in message.tool_calls] if message.role == "assistant" else []
        answers = [result_id(m) for m in history[index + 1 : index + 1 + len(ids)]]
        assert answers == ids

    logged = [
        prompt.message.text
        for e in events
        if isinstance(prompt := e.payload, UserMessageEvent | SteeringMessageEvent | PromptBlocked)
        and prompt.message.text in sent_all
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

    async def main() -> None:
        with assert_no_leaked_tasks():
            await scenario()

    async def scenario() -> None:
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

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_log(sessions[0], sends, sent_all)
    check_statuses(statuses or ["disposed"])
