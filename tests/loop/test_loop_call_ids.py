"""Call ids the loop can trust (SPEC §12): repeated or empty tool-call ids in one assistant message
are rewritten after ``agent/step-result``, so every call block has exactly one ``tool/call`` and
one ``tool/result`` and the next request pairs them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
import trio

from trio_agent.ids import CallId
from trio_agent.llm import BlockEnd, Message, ToolCallBlock
from trio_agent.runtime import Next
from trio_agent.session import (
    AssistantChunk,
    AssistantMessageEvent,
    Session,
    ToolCallEvent,
    ToolResultEvent,
)
from trio_agent.testing import (
    ScriptedResponse,
    open_test_harness,
    text,
    tool_call,
    turn_end_reasons,
)
from trio_agent.tools import ToolCallContext, tool

seen_ids: list[str] = []


@tool
async def note(value: int, *, call: ToolCallContext) -> int:
    """Remember the call id the tool ran under."""
    seen_ids.append(call.call_id)
    return value


@tool(concurrency_safe=True)
async def fetch(value: int, *, call: ToolCallContext) -> int:
    """A concurrency-safe tool."""
    seen_ids.append(call.call_id)
    await trio.lowlevel.checkpoint()
    return value


def calls(*ids: str, name: str = "note") -> ScriptedResponse:
    response: ScriptedResponse | None = None
    for n, call_id in enumerate(ids):
        part = tool_call(call_id, name, f'{{"value": {n}}}')
        response = part if response is None else response + part
    assert response is not None
    return response


def logged_message_ids(session: Session) -> list[list[str]]:
    return [
        [block.id for block in e.payload_as(AssistantMessageEvent).message.tool_calls]
        for e in session.events
        if e.type == "assistant/message"
    ]


def logged(session: Session, kind: str) -> list[str]:
    payload: type[ToolCallEvent | ToolResultEvent] = (
        ToolCallEvent if kind == "tool/call" else ToolResultEvent
    )
    return [e.payload_as(payload).call_id for e in session.events if e.type == kind]


def check_paired(session: Session) -> None:
    """Every call block of every logged message: one tool/call, one tool/result, same id."""
    blocks = [i for ids in logged_message_ids(session) for i in ids]
    assert Counter(blocks) == Counter(logged(session, "tool/call"))
    assert Counter(blocks) == Counter(logged(session, "tool/result"))
    assert all(n == 1 for n in Counter(blocks).values())
    results = [e.payload_as(ToolResultEvent) for e in session.events if e.type == "tool/result"]
    assert all(r.result.call_id == r.call_id for r in results)


async def run(script: list[Any], step_result: Any = None) -> tuple[Session, Any]:
    """Run one prompt; ``step_result`` is an ``agent/step-result`` listener to install."""
    seen_ids.clear()
    async with open_test_harness(script, tools=[note, fetch]) as h:
        if step_result is not None:
            h.ctx.on("agent/step-result", step_result)
        agent = h.agent()
        agent.send("go")
        await agent.wait_idle()
        return agent.session, h.model


async def test_repeated_ids_get_suffixes_and_the_next_request_pairs_them() -> None:
    session, model = await run([calls("c1", "c1", "c1"), text("done")])
    assert logged_message_ids(session)[0] == ["c1", "c1~2", "c1~3"]
    assert logged(session, "tool/call") == ["c1", "c1~2", "c1~3"]
    assert logged(session, "tool/result") == ["c1", "c1~2", "c1~3"]
    assert seen_ids == ["c1", "c1~2", "c1~3"]  # tools run under the rewritten id
    check_paired(session)
    history = model.requests[1].messages
    assert [b.id for b in history[1].tool_calls] == ["c1", "c1~2", "c1~3"]
    assert [m.content[0].tool_call_id for m in history[2:]] == ["c1", "c1~2", "c1~3"]
    assert turn_end_reasons(session) == ["completed"]


async def test_empty_ids_are_named_by_turn_step_and_position() -> None:
    session, _ = await run([calls("", "keep", ""), calls(""), text("done")])
    assert logged_message_ids(session)[:2] == [
        ["call_1_1_0", "keep", "call_1_1_2"],
        ["call_1_2_0"],
    ]
    check_paired(session)


async def test_a_rewritten_id_never_takes_an_id_already_in_the_message() -> None:
    session, _ = await run([calls("a", "a", "a~2", "", "call_1_1_3"), text("done")])
    # "a~2" is the model's own id for the third call, so the repeat of "a" skips to "a~3"; the
    # empty id's name belongs to the last call, so it takes a suffix too.
    assert logged_message_ids(session)[0] == ["a", "a~3", "a~2", "call_1_1_3~2", "call_1_1_3"]
    check_paired(session)


async def test_unique_ids_are_left_alone() -> None:
    returned: list[Message] = []

    async def capture(event: Any, next: Next) -> Any:
        returned.append(await next())
        return returned[-1]

    session, _ = await run([calls("x", "y"), text("done")], capture)
    logged_first = next(e for e in session.events if e.type == "assistant/message")
    assert logged_first.payload_as(AssistantMessageEvent).message is returned[0]  # untouched
    assert logged_message_ids(session)[0] == ["x", "y"]


async def test_ids_are_rewritten_after_step_result_listeners() -> None:
    """A step-result listener sees the model's ids, and whatever it returns is made unique."""
    heard: list[list[str]] = []

    async def duplicate(event: Any, next: Next) -> Any:
        message = await next()
        heard.append([b.id for b in message.tool_calls])
        first = message.tool_calls[0]
        return attrs.evolve(message, content=(*message.content, first))  # a listener's repeat

    session, model = await run([calls("m", "m"), text("done")], duplicate)
    assert heard[0] == ["m", "m"]
    assert logged_message_ids(session)[0] == ["m", "m~2", "m~3"]
    check_paired(session)
    history = model.requests[1].messages
    assert [m.content[0].tool_call_id for m in history[2:]] == ["m", "m~2", "m~3"]


async def test_a_parallel_group_with_repeated_ids_commits_each_once_in_order() -> None:
    session, _ = await run([calls("p", "p", "", "", name="fetch"), text("done")])
    assert logged(session, "tool/result") == ["p", "p~2", "call_1_1_2", "call_1_1_3"]
    assert sorted(seen_ids) == sorted(["p", "p~2", "call_1_1_2", "call_1_1_3"])
    check_paired(session)


async def test_cancel_with_repeated_ids_answers_every_call_once() -> None:
    entered = trio.Event()

    @tool
    async def stuck() -> str:
        """Never finishes."""
        entered.set()
        await trio.sleep_forever()

    script = [tool_call("s", "stuck", "{}") + tool_call("s", "stuck", "{}"), text("after")]
    async with open_test_harness(script, tools=[stuck]) as h:
        agent = h.agent()
        agent.send("go")
        await entered.wait()
        agent.cancel()
        await agent.wait_idle()
    results = [
        e.payload_as(ToolResultEvent).result
        for e in agent.session.events
        if e.type == "tool/result"
    ]
    assert [(r.call_id, r.code) for r in results] == [
        ("s", "ABORTED"),
        ("s~2", "ABORTED_BEFORE_DISPATCH"),
    ]
    check_paired(agent.session)
    assert turn_end_reasons(agent.session) == ["aborted"]


async def test_the_chunks_keep_the_models_raw_ids() -> None:
    session, _ = await run([calls("r", "r"), text("done")])
    ends = [
        chunk.block
        for e in session.events
        if e.type == "assistant/chunk"
        and isinstance(chunk := e.payload_as(AssistantChunk).chunk, BlockEnd)
    ]
    assert [b.id for b in ends if isinstance(b, ToolCallBlock)] == [CallId("r"), CallId("r")]
    assert logged_message_ids(session)[0] == ["r", "r~2"]
