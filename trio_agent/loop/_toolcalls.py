"""Tool calls of one assistant message: scheduling, ordered commits, cancellation.

Calls run in model order. Consecutive calls to concurrency-safe tools form a group whose bodies
overlap (at most ``max_parallel_tool_calls`` at once, started in model order); any other call is
a barrier that runs alone. ``tool/call`` is logged when a call starts, ``tool/result`` strictly
in model order, so the log may read ``call c1, call c2, result c1, call c3, result c2 ...``.
Every ``tool/call`` gets exactly one ``tool/result``, whose ``call_id`` is the model's call id
(seed 002) whatever a ``tools/execute`` listener returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from ..ids import CallId
from ..llm import ToolCallBlock, ToolResult
from ..session import ToolCallEvent, ToolResultEvent
from ..tools import ToolInvocation, ToolRegistry, aborted_result

if TYPE_CHECKING:
    from ._driver import Driver
    from ._state import StepState, TurnState

__all__ = ["close_tool_calls", "run_tool_calls"]


async def run_tool_calls(
    driver: Driver, turn: TurnState, step: StepState, calls: tuple[ToolCallBlock, ...]
) -> None:
    """Execute ``calls`` and commit their results in model order."""
    step.calls = calls
    tools = driver.ctx.tools
    agent = driver.agent
    limit = driver.agent._max_parallel_tool_calls
    index = 0
    while index < len(calls):
        group = [calls[index]]
        if limit > 1 and tools.is_concurrency_safe(calls[index].name, agent):
            while index + len(group) < len(calls) and tools.is_concurrency_safe(
                calls[index + len(group)].name, agent
            ):
                group.append(calls[index + len(group)])
        index += len(group)
        if len(group) == 1:
            call = group[0]
            _start(driver, turn, step, call)
            step.finished[call.id] = await _execute(driver, call)
            _commit(driver, turn, step, call, step.finished[call.id])
        else:
            await _run_group(driver, turn, step, group, limit)


async def _run_group(
    driver: Driver, turn: TurnState, step: StepState, group: list[ToolCallBlock], limit: int
) -> None:
    limiter = trio.CapacityLimiter(limit)
    done = {call.id: trio.Event() for call in group}

    async def run_one(call: ToolCallBlock, token: object) -> None:
        try:
            step.finished[call.id] = await _execute(driver, call)
        finally:
            limiter.release_on_behalf_of(token)
            done[call.id].set()

    async def commit_in_order() -> None:
        for call in group:
            await done[call.id].wait()
            if call.id in step.finished:
                _commit(driver, turn, step, call, step.finished[call.id])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(commit_in_order)
        for call in group:
            token = object()  # a borrower identity of its own, even if the model repeated an id
            await limiter.acquire_on_behalf_of(token)
            _start(driver, turn, step, call)
            nursery.start_soon(run_one, call, token)


async def _execute(driver: Driver, call: ToolCallBlock) -> ToolResult:
    tools: ToolRegistry = driver.ctx.tools
    return await tools.execute(
        ToolInvocation(
            call_id=call.id, name=call.name, arguments=call.arguments, agent=driver.agent
        )
    )


def _start(driver: Driver, turn: TurnState, step: StepState, call: ToolCallBlock) -> None:
    driver.session.append(
        ToolCallEvent.event_type,
        ToolCallEvent(
            turn=turn.number,
            step=step.number,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
        ),
    )
    step.started.add(call.id)


def _commit(
    driver: Driver, turn: TurnState, step: StepState, call: ToolCallBlock, result: ToolResult
) -> None:
    if call.id in step.committed:
        return
    logged = attrs.evolve(result, call_id=CallId(call.id), additional_context=())
    driver.session.append(
        ToolResultEvent.event_type,
        ToolResultEvent(turn=turn.number, step=step.number, call_id=call.id, result=logged),
    )
    step.committed.add(call.id)
    step.results.append(logged)
    step.contexts.extend(result.additional_context)
    if result.concludes_turn:
        step.concluded = True


def close_tool_calls(driver: Driver, turn: TurnState, step: StepState) -> None:
    """Give every call of the step exactly one result, in model order (synchronous).

    After a cancel or an error: a finished call commits its real result, a started one gets
    ``ABORTED``, and one that never started gets a ``tool/call`` plus ``ABORTED_BEFORE_DISPATCH``.
    """
    for call in step.calls:
        if call.id in step.committed:
            continue
        result = step.finished.get(call.id)
        if result is None:
            started = call.id in step.started
            if not started:
                _start(driver, turn, step, call)
            result = aborted_result(call.id, started=started)
        _commit(driver, turn, step, call, result)
