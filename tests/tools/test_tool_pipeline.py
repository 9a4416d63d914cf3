"""The execution pipeline: pre-execute → guards → execute → post-execute → result."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from tools_helpers import echo, invocation, make_agent

from trio_agent.ids import CallId
from trio_agent.llm import Message, TextBlock, ToolResult
from trio_agent.runtime import Context
from trio_agent.testing import count_schedule_points
from trio_agent.tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    DENIED,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    Accept,
    Allow,
    ApprovalRequest,
    Approved,
    Ask,
    Block,
    Denied,
    Deny,
    PostExecute,
    Tool,
    ToolCallContext,
    ToolExecution,
    ToolRegistry,
    ToolResultNotice,
    aborted_result,
    error_result,
    tool,
)

Next = Callable[[], Awaitable[Any]]


def record_results(ctx: Context) -> list[ToolResultNotice]:
    seen: list[ToolResultNotice] = []
    ctx.on("tools/result", seen.append)
    return seen


async def test_stages_run_in_order(ctx: Context, tools: ToolRegistry) -> None:
    log: list[str] = []

    @tool
    async def work(n: int) -> str:
        log.append(f"body {n}")
        return f"worked {n}"

    async def pre(execution: ToolExecution, next: Next) -> Any:
        log.append(f"pre {execution.name} {execution.parsed_arguments}")
        return await next()

    def guard(execution: ToolExecution) -> None:
        log.append("guard")

    async def around(execution: ToolExecution, next: Next) -> Any:
        log.append("execute >")
        result = await next()
        log.append(f"execute < {result.text}")
        return result

    async def post(payload: PostExecute, next: Next) -> Any:
        log.append(f"post {payload.result.text}")
        return await next()

    tools.register(work)
    ctx.on("tools/pre-execute", pre)
    tools.guard(guard)
    ctx.on("tools/execute", around)
    ctx.on("tools/post-execute", post)
    ctx.on("tools/result", lambda notice: log.append(f"result {notice.result.text}"))

    result = await tools.execute(invocation("work", '{"n": 2}'))
    assert result == ToolResult(CallId("call-1"), (TextBlock("worked 2"),))
    assert log == [
        "pre work {'n': 2}",
        "guard",
        "execute >",
        "body 2",
        "execute < worked 2",
        "post worked 2",
        "result worked 2",
    ]


async def test_execution_payload(ctx: Context, tools: ToolRegistry) -> None:
    agent = make_agent(ctx, "A")
    tools.register(echo)
    seen: list[ToolExecution] = []

    async def pre(execution: ToolExecution, next: Next) -> Any:
        seen.append(execution)
        assert execution.parsed_arguments is not None
        execution.parsed_arguments["text"] = "rewritten"  # type: ignore[index]
        return await next()

    ctx.on("tools/pre-execute", pre)
    result = await tools.execute(invocation("echo", '{"text": "hi"}', agent, "c-1"))
    assert result.text == "hi"  # policies cannot rewrite the arguments
    (execution,) = seen
    assert (execution.call_id, execution.name, execution.arguments) == (
        "c-1",
        "echo",
        '{"text": "hi"}',
    )
    assert execution.agent is agent and execution.tool is echo

    await tools.execute(invocation("nope", "not json"))
    assert seen[-1].tool is None and seen[-1].parsed_arguments is None  # unknown names see policy


async def test_stages_see_the_arguments_as_the_call_began(
    ctx: Context, tools: ToolRegistry
) -> None:
    # The payload is built lazily when nobody listens (#17); with a listener it is taken
    # before the body runs, so a body that mutates its (unvalidated) dict changes nothing.
    async def body(arguments: Any, call: Any) -> str:
        arguments["text"] = "mutated by the body"
        return "done"

    tools.register(Tool("mutating", "Mutates its arguments.", {"type": "object"}, body))
    seen: list[PostExecute] = []

    async def post(payload: PostExecute, next: Next) -> Any:
        seen.append(payload)
        return await next()

    ctx.on("tools/post-execute", post)
    await tools.execute(invocation("mutating", '{"text": "hi"}'))
    (payload,) = seen
    assert payload.execution.parsed_arguments == {"text": "hi"}


async def test_deny_skips_guards_and_body_but_not_post_execute(
    ctx: Context, tools: ToolRegistry
) -> None:
    ran: list[str] = []

    @tool
    async def danger() -> str:
        ran.append("body")
        return "boom"

    async def deny(execution: ToolExecution, next: Next) -> Any:
        return Deny("not today")

    async def post(payload: PostExecute, next: Next) -> Any:
        ran.append(f"post {payload.result.code}")
        return await next()

    tools.register(danger)
    tools.guard(lambda execution: ran.append("guard"))
    ctx.on("tools/pre-execute", deny)
    ctx.on("tools/post-execute", post)
    results = record_results(ctx)
    result = await tools.execute(invocation("danger"))
    assert result == error_result(CallId("call-1"), DENIED, "not today")
    assert result.text == "Error: not today"
    assert ran == ["post DENIED"]
    assert [n.result for n in results] == [result]


async def test_empty_deny_reason_gets_a_default(ctx: Context, tools: ToolRegistry) -> None:
    async def deny(execution: ToolExecution, next: Next) -> Any:
        return Deny("")

    ctx.on("tools/pre-execute", deny)
    result = await tools.execute(invocation("x"))
    assert result.text == 'Error: tool "x" was denied by policy'


async def test_ask_without_approval_service_denies(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(echo)

    async def ask(execution: ToolExecution, next: Next) -> Any:
        return Ask("writes files")

    ctx.on("tools/pre-execute", ask)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.code == DENIED
    assert result.text == (
        'Error: tool "echo" requires approval (writes files), but no approval service is '
        "mounted; allow it with --yes or --allow TOOL (CLI), a tools.approval allow entry "
        "(config), or mount an approval service (key APPROVAL)"
    )


@attrs.define
class FakeApproval:
    answer: object = True
    asked: list[tuple[str, str | None]] = attrs.Factory(list)

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        self.asked.append((request.tool, request.reason))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("answer", "code", "text"),
    [
        (Approved(), None, "x"),
        (Denied(), DENIED, 'Error: tool "echo" requires approval and was not approved'),
        (Denied("not today"), DENIED, "Error: not today"),
        (
            "yes",
            TOOL_ERROR,
            "Error: approval service failed: TypeError: request() returned 'yes'; "
            "expected Approved() or Denied(reason)",
        ),
        (OSError("ui gone"), TOOL_ERROR, "Error: approval service failed: OSError: ui gone"),
    ],
)
async def test_ask_with_approval_service(
    ctx: Context, tools: ToolRegistry, answer: object, code: str | None, text: str
) -> None:
    approval = FakeApproval(answer)
    ctx.provide("approval", approval)
    tools.register(echo)

    async def ask(execution: ToolExecution, next: Next) -> Any:
        return Ask()

    ctx.on("tools/pre-execute", ask)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert (result.code, result.text) == (code, text)
    assert approval.asked == [("echo", None)]


async def test_guards_order_first_deny_wins(ctx: Context, tools: ToolRegistry) -> None:
    agent = make_agent(ctx, "A")
    other = make_agent(ctx, "B")
    tools.register(echo)
    calls: list[str] = []

    def guard(label: str, verdict: str | None) -> Callable[[ToolExecution], str | None]:
        def check(execution: ToolExecution) -> str | None:
            calls.append(label)
            return verdict

        return check

    agent.ctx.tools.guard(guard("agent 1", None))
    tools.guard(guard("global 1", None))
    agent.ctx.tools.guard(guard("agent 2", "agent says no"))
    tools.guard(guard("global 2", None))
    agent.ctx.tools.guard(guard("agent 3", "never asked"))

    result = await tools.execute(invocation("echo", '{"text": "x"}', agent))
    assert result == error_result(CallId("call-1"), DENIED, "agent says no")
    assert calls == ["global 1", "global 2", "agent 1", "agent 2"]

    calls.clear()
    assert not (await tools.execute(invocation("echo", '{"text": "x"}', other))).is_error
    assert calls == ["global 1", "global 2"]


async def test_no_guard_can_re_allow(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(echo)
    tools.guard(lambda execution: "first")
    tools.guard(lambda execution: None)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.code == DENIED and result.text == "Error: first"
    off = tools.guard(lambda execution: "")
    assert (await tools.execute(invocation("echo", '{"text": "x"}'))).text == "Error: first"
    off()


async def test_guard_failures(
    ctx: Context, tools: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    tools.register(echo)

    def broken(execution: ToolExecution) -> str | None:
        raise KeyError("oops")

    off = tools.guard(broken)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.code == TOOL_ERROR
    assert result.text == (
        "Error: guard test_guard_failures.<locals>.broken failed: KeyError: 'oops'"
    )
    assert "guard test_guard_failures.<locals>.broken failed" in caplog.text
    off()

    def weird(execution: ToolExecution) -> str | None:
        return 3  # type: ignore[return-value]

    tools.guard(weird)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.text.endswith("failed: it returned 3; expected a deny reason (str) or None")

    async def async_guard(execution: ToolExecution) -> None:
        return None

    with pytest.raises(TypeError, match="synchronous callable"):
        tools.guard(async_guard)  # type: ignore[arg-type]


async def test_guard_returning_an_awaitable_is_closed(ctx: Context, tools: ToolRegistry) -> None:
    async def later() -> None:
        return None

    tools.guard(lambda execution: later())  # type: ignore[arg-type,return-value]
    result = await tools.execute(invocation("echo"))
    assert result.code == TOOL_ERROR  # and no "coroutine was never awaited" warning


async def test_execute_wrapper_can_short_circuit_but_not_change_the_call_id(
    ctx: Context, tools: ToolRegistry
) -> None:
    tools.register(echo)

    async def cached(execution: ToolExecution, next: Next) -> Any:
        return ToolResult(CallId("wrong-id"), (TextBlock("from cache"),))

    ctx.on("tools/execute", cached)
    results = record_results(ctx)
    posts: list[ToolResult] = []

    async def post(payload: PostExecute, next: Next) -> Any:
        posts.append(payload.result)
        return await next()

    ctx.on("tools/post-execute", post)
    result = await tools.execute(invocation("echo", '{"text": "x"}', call_id="right-id"))
    assert result == ToolResult(CallId("right-id"), (TextBlock("from cache"),))
    assert posts[0].call_id == "right-id"
    assert results[0].result.call_id == "right-id"


async def test_execute_wrapper_sees_the_dispatched_result(
    ctx: Context, tools: ToolRegistry
) -> None:
    tools.register(echo)

    async def relabel(execution: ToolExecution, next: Next) -> Any:
        result: ToolResult = await next()
        return attrs.evolve(result, content=(TextBlock(f"[{result.text}]"),), call_id=CallId("x"))

    ctx.on("tools/execute", relabel)
    result = await tools.execute(invocation("echo", '{"text": "hi"}'))
    assert result == ToolResult(CallId("call-1"), (TextBlock("[hi]"),))


async def test_raising_listeners_become_tool_errors(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(echo)
    results = record_results(ctx)
    post_calls: list[object] = []

    async def post(payload: PostExecute, next: Next) -> Any:
        post_calls.append(payload)
        return await next()

    ctx.on("tools/post-execute", post)

    async def explode(payload: object, next: Next) -> Any:
        raise ValueError("listener bug")

    for stage in ("tools/pre-execute", "tools/execute"):
        off = ctx.on(stage, explode)
        result = await tools.execute(invocation("echo", '{"text": "x"}'))
        assert result == error_result(
            CallId("call-1"), TOOL_ERROR, f"{stage} failed: ValueError: listener bug"
        )
        off()
    assert post_calls == []  # a failed stage ends the call; post-execute does not run

    off = ctx.on("tools/post-execute", explode, prepend=True)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.text == "Error: tools/post-execute failed: ValueError: listener bug"
    off()
    assert [n.result.code for n in results] == [TOOL_ERROR] * 3


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ("tools/pre-execute", "a listener returned 'yes'; expected Allow(), Deny(reason) or Ask()"),
        ("tools/execute", "a listener returned 'yes'; expected a ToolResult"),
        ("tools/post-execute", "a listener returned 'yes'; expected Accept() or Block(feedback)"),
    ],
)
async def test_wrong_listener_returns(
    ctx: Context, tools: ToolRegistry, stage: str, message: str
) -> None:
    tools.register(echo)

    async def wrong(payload: object, next: Next) -> Any:
        return "yes"

    ctx.on(stage, wrong)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.text == f"Error: {stage} failed: {message}"


async def test_post_execute_accept_replaces_content(ctx: Context, tools: ToolRegistry) -> None:
    @tool
    async def chatty(*, call: ToolCallContext) -> str:
        call.defer_context("context kept")
        return "a very long output"

    tools.register(chatty)

    async def trim(payload: PostExecute, next: Next) -> Any:
        return Accept(content=payload.result.text[:6])

    ctx.on("tools/post-execute", trim)
    result = await tools.execute(invocation("chatty"))
    assert result.content == (TextBlock("a very"),)
    assert [m.text for m in result.additional_context] == ["context kept"]


async def test_post_execute_accept_keeps_result(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(echo)

    async def keep(payload: PostExecute, next: Next) -> Any:
        return Accept()

    ctx.on("tools/post-execute", keep)
    assert (await tools.execute(invocation("echo", '{"text": "same"}'))).text == "same"


async def test_post_execute_block(ctx: Context, tools: ToolRegistry) -> None:
    @tool
    async def leaky(*, call: ToolCallContext) -> str:
        call.defer_context(Message.user("dropped"))
        call.conclude_turn()
        return "secret=123"

    tools.register(leaky)

    async def block(payload: PostExecute, next: Next) -> Any:
        if "secret" in payload.result.text:
            return Block("output withheld: it contained a secret")
        return await next()

    ctx.on("tools/post-execute", block)
    result = await tools.execute(invocation("leaky"))
    assert result == ToolResult(
        CallId("call-1"),
        (TextBlock("output withheld: it contained a secret"),),
        is_error=True,
        code=DENIED,
    )


async def test_decision_values() -> None:
    assert Accept(content="x").content == (TextBlock("x"),)
    assert Accept(content=[TextBlock("a"), TextBlock("b")]).content == (
        TextBlock("a"),
        TextBlock("b"),
    )
    assert Accept().content is None
    with pytest.raises(TypeError, match="expected a str, a content block"):
        Accept(content=3)  # type: ignore[arg-type]
    assert Allow() == Allow() and Ask().reason is None and Deny("r").reason == "r"
    assert Block("f").feedback == "f"


async def test_result_observers_are_contained(
    ctx: Context, tools: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    tools.register(echo)

    def broken(notice: ToolResultNotice) -> None:
        raise RuntimeError("observer bug")

    seen: list[ToolResultNotice] = []
    ctx.on("tools/result", broken)
    ctx.on("tools/result", seen.append)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.text == "x"
    assert [n.result for n in seen] == [result]
    assert "observer bug" in caplog.text


async def test_raising_body(tools: ToolRegistry, caplog: pytest.LogCaptureFixture) -> None:
    @tool
    async def crash() -> str:
        raise FileNotFoundError("no such file: a.txt")

    @tool
    async def silent_crash() -> str:
        raise ValueError

    tools.register(crash)
    tools.register(silent_crash)
    with caplog.at_level(logging.WARNING, logger="trio_agent.tools"):
        result = await tools.execute(invocation("crash"))
    assert result == error_result(CallId("call-1"), TOOL_ERROR, "no such file: a.txt")
    assert "tool 'crash' raised" in caplog.text
    assert (await tools.execute(invocation("silent_crash"))).text == "Error: ValueError"


async def test_raising_body_exception_group(tools: ToolRegistry) -> None:
    @tool
    async def fan_out() -> str:
        async def fail() -> None:
            raise OSError("one branch failed")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail)
        return "unreachable"

    tools.register(fan_out)
    result = await tools.execute(invocation("fan_out"))
    assert result.code == TOOL_ERROR


async def test_timeout(tools: ToolRegistry, autojump_clock: trio.testing.MockClock) -> None:
    @tool(timeout=2.0)
    async def slow(seconds: float) -> str:
        await trio.sleep(seconds)
        return "finished"

    @tool(timeout=0.25)
    async def slower(*, call: ToolCallContext) -> str:
        call.defer_context("started")
        await trio.sleep_forever()

    tools.register(slow)
    tools.register(slower)
    start = trio.current_time()
    result = await tools.execute(invocation("slow", '{"seconds": 60}'))
    assert result == error_result(CallId("call-1"), TOOL_TIMEOUT, "tool call timed out after 2s")
    assert trio.current_time() - start == pytest.approx(2.0)
    assert (await tools.execute(invocation("slow", '{"seconds": 1.5}'))).text == "finished"
    result = await tools.execute(invocation("slower"))
    assert result.text == "Error: tool call timed out after 0.25s"
    assert [m.text for m in result.additional_context] == ["started"]


async def test_outer_cancel_is_not_a_timeout(
    ctx: Context, tools: ToolRegistry, autojump_clock: trio.testing.MockClock
) -> None:
    @tool(timeout=10.0)
    async def slow() -> str:
        await trio.sleep_forever()

    tools.register(slow)
    results = record_results(ctx)
    with trio.move_on_after(1.0) as outer:
        await tools.execute(invocation("slow"))
    assert outer.cancelled_caught
    assert results[0].result == aborted_result(CallId("call-1"), started=True)


async def test_cancel_while_body_runs(ctx: Context, tools: ToolRegistry) -> None:
    started = trio.Event()
    finalised: list[str] = []

    @tool
    async def wait() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            finalised.append("body cleanup ran")

    tools.register(wait)
    results = record_results(ctx)
    escaped: list[BaseException] = []

    async def run(scope: trio.CancelScope) -> None:
        with scope:
            try:
                await tools.execute(invocation("wait", call_id="c-9"))
            except BaseException as exc:
                escaped.append(exc)
                raise

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, scope)
        await started.wait()
        scope.cancel()
    assert scope.cancelled_caught
    assert len(escaped) == 1 and isinstance(escaped[0], trio.Cancelled)
    assert finalised == ["body cleanup ran"]
    (notice,) = results
    assert notice.result == aborted_result(CallId("c-9"), started=True)
    assert notice.result.code == ABORTED and notice.result.text == "Error: tool call aborted"


async def test_cancel_before_dispatch(ctx: Context, tools: ToolRegistry) -> None:
    tools.register(echo)
    in_policy = trio.Event()

    async def slow_policy(execution: ToolExecution, next: Next) -> Any:
        in_policy.set()
        await trio.sleep_forever()

    ctx.on("tools/pre-execute", slow_policy)
    results = record_results(ctx)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tools.execute, invocation("echo", '{"text": "x"}'))
            await in_policy.wait()
            scope.cancel()
    assert scope.cancelled_caught
    (notice,) = results
    assert notice.result.code == ABORTED_BEFORE_DISPATCH
    assert notice.result.text == "Error: tool call aborted before dispatch"


async def test_already_cancelled_caller(ctx: Context, tools: ToolRegistry) -> None:
    ran: list[str] = []

    @tool
    async def quick() -> str:
        ran.append("body")
        return "done"

    tools.register(quick)
    results = record_results(ctx)
    with trio.CancelScope() as scope:
        scope.cancel()
        await tools.execute(invocation("quick"))
    assert scope.cancelled_caught and ran == []
    assert results[0].result.code == ABORTED_BEFORE_DISPATCH


async def test_execute_is_a_checkpoint(tools: ToolRegistry) -> None:
    with trio.testing.assert_checkpoints():
        await tools.execute(invocation("missing"))


async def test_execute_without_its_checkpoint_yields_only_where_the_body_does(
    tools: ToolRegistry,
) -> None:
    @tool
    async def instant() -> str:
        return "done"

    @tool
    async def yielding() -> str:
        await trio.lowlevel.checkpoint()
        return "done"

    tools.register(instant)
    tools.register(yielding)
    with count_schedule_points() as yields:
        result = await tools.execute(invocation("instant"), checkpoint=False)
    assert yields.steps == 0 and not result.is_error
    with count_schedule_points() as yields_of_slow:
        await tools.execute(invocation("yielding"), checkpoint=False)
    assert yields_of_slow.steps == 1


async def test_events_are_aimed_at_the_agent_scope(ctx: Context, tools: ToolRegistry) -> None:
    a, b = make_agent(ctx, "A"), make_agent(ctx, "B")
    tools.register(echo)
    heard: list[str] = []

    async def deny_for_a(execution: ToolExecution, next: Next) -> Any:
        return Deny("A may not")

    a.ctx.on("tools/pre-execute", deny_for_a)
    a.ctx.on("tools/result", lambda n: heard.append(f"A heard {n.execution.agent.id}"))
    b.ctx.on("tools/result", lambda n: heard.append(f"B heard {n.execution.agent.id}"))
    ctx.on("tools/result", lambda n: heard.append(f"global heard {n.execution.agent.id}"))

    assert (await tools.execute(invocation("echo", '{"text": "x"}', a))).code == DENIED
    assert not (await tools.execute(invocation("echo", '{"text": "x"}', b))).is_error
    assert heard == ["A heard A", "global heard A", "B heard B", "global heard B"]


async def test_unknown_tool_with_bad_arguments_is_unknown(tools: ToolRegistry) -> None:
    result = await tools.execute(invocation("ghost", "{{{"))
    assert result.code == UNKNOWN_TOOL


async def test_tool_unregistered_after_policy_is_unknown_at_dispatch(
    ctx: Context, tools: ToolRegistry
) -> None:
    off = tools.register(echo)

    async def unregister_first(execution: ToolExecution, next: Next) -> Any:
        assert execution.tool is echo
        off()
        return await next()

    ctx.on("tools/pre-execute", unregister_first)
    result = await tools.execute(invocation("echo", '{"text": "x"}'))
    assert result.code == UNKNOWN_TOOL


def test_aborted_result_helper() -> None:
    assert aborted_result(CallId("c"), started=True) == ToolResult(
        CallId("c"), (TextBlock("Error: tool call aborted"),), is_error=True, code=ABORTED
    )
    assert aborted_result(CallId("c"), started=False) == ToolResult(
        CallId("c"),
        (TextBlock("Error: tool call aborted before dispatch"),),
        is_error=True,
        code=ABORTED_BEFORE_DISPATCH,
    )
