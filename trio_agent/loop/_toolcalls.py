"""Tool calls of one assistant message: scheduling, ordered commits, cancellation.

Calls run in model order. Consecutive calls to concurrency-safe tools form a group whose bodies
overlap (at most ``max_parallel_tool_calls`` at once, started in model order, as many as the
bound allows in one go); any other call is a barrier that runs alone. ``tool/call`` is logged
when a call starts (with the tool's ``read_only``), ``tool/result`` strictly in model order, so
the log may read ``call c1, call c2, result c1, call c3, result c2 ...``.
Every ``tool/call`` gets exactly one ``tool/result``, whose ``call_id`` is the call's id in the
logged assistant message (seed 002) whatever a ``tools/execute`` listener returned. The
bookkeeping is a slot per position in the message (:class:`~._state.CallSlot`), so it holds
even for ids a model repeated.

Write-ahead: each invocation carries the driver's durability hook as ``before_effects``, which
the pipeline awaits right before a body with effects runs; the calls of a group started together
share one flush (:mod:`~._durability`). If that flush fails, the body does not run, the group's
other calls are cancelled, and the failure propagates to the driver (the turn ends ``error``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import final

import attrs
import trio

from ..agent import Agent
from ..llm import ToolCallBlock, ToolResult
from ..redaction import Redactor
from ..session import (
    ApprovalDecisionEvent,
    ApprovalRequestEvent,
    Session,
    ToolCallEvent,
    ToolResultEvent,
)
from ..tools import (
    ApprovalNotice,
    Approved,
    Denied,
    ToolInvocation,
    ToolRegistry,
    aborted_result,
)
from ._state import CallSlot, StepState, TurnState

__all__ = ["ToolCallRunner"]


@final
class ToolCallRunner:
    """Runs the tool calls of one agent's steps (package-internal).

    ``tools`` is the loop's view of the registry (shared by its agents: the loop's ``inject``
    keeps it alive as long as them; every call names its agent explicitly); ``write_ahead`` is
    the hook awaited before a body with effects runs (``None``: no write-ahead).
    """

    __slots__ = ("_agent", "_limit", "_redactor", "_session", "_tools", "_write_ahead")

    def __init__(
        self,
        agent: Agent,
        tools: ToolRegistry,
        *,
        limit: int,
        write_ahead: Callable[[], Awaitable[None]] | None,
    ) -> None:
        self._agent = agent
        self._session: Session = agent.session
        self._tools = tools
        self._limit = limit
        self._write_ahead = write_ahead
        self._redactor = agent.ctx.get(Redactor)

    async def run(self, turn: TurnState, step: StepState, calls: tuple[ToolCallBlock, ...]) -> None:
        """Execute ``calls`` and commit their results in model order.

        Raises:
            Exception: the write-ahead flush failed (the call's body did not run).
        """
        step.calls = [self._slot(call) for call in calls]
        slots = step.calls
        index = 0
        while index < len(slots):
            group = [slots[index]]
            if self._limit > 1 and slots[index].concurrency_safe:
                while (
                    index + len(group) < len(slots) and slots[index + len(group)].concurrency_safe
                ):
                    group.append(slots[index + len(group)])
            index += len(group)
            if len(group) == 1:
                slot = group[0]
                self._start(turn, step, slot)
                # The model's stream has just checkpointed: the message's first call need not.
                result = await self._execute(turn, step, slot, checkpoint=slot is not slots[0])
                self._commit(turn, step, slot, result)
            else:
                await self._run_group(turn, step, group)

    def close(self, turn: TurnState, step: StepState) -> None:
        """Give every call of the step exactly one result, in model order (synchronous).

        After a cancel or an error: a finished call commits its real result, a started one gets
        ``ABORTED``, and one that never started gets a ``tool/call`` plus
        ``ABORTED_BEFORE_DISPATCH``.
        """
        for slot in step.calls:
            if slot.committed:
                continue
            result = slot.result
            if result is None:
                started = slot.started
                if not started:
                    self._start(turn, step, slot)
                result = aborted_result(slot.call.id, started=started)
            self._commit(turn, step, slot, result)

    def _slot(self, call: ToolCallBlock) -> CallSlot:
        tool = self._tools.get(call.name, self._agent)
        if tool is None:  # unknown: it will not run, and nobody vouches that it only reads
            return CallSlot(call)
        return CallSlot(call, read_only=tool.read_only, concurrency_safe=tool.concurrency_safe)

    async def _run_group(self, turn: TurnState, step: StepState, group: list[CallSlot]) -> None:
        limiter = trio.CapacityLimiter(self._limit)
        done = [trio.Event() for _ in group]
        failures: list[Exception] = []

        async def run_one(position: int, token: object) -> None:
            try:
                await self._execute(turn, step, group[position])
            except Exception as exc:
                failures.append(exc)
                nursery.cancel_scope.cancel()
            finally:
                limiter.release_on_behalf_of(token)
                done[position].set()

        async def commit_in_order() -> None:
            for position, slot in enumerate(group):
                await done[position].wait()
                if slot.result is not None:
                    self._commit(turn, step, slot, slot.result)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit_in_order)
            for position, slot in enumerate(group):
                token = object()  # each call its own borrower identity
                # Start what the bound allows without yielding, so the calls started together
                # are all logged before any of them reaches its write-ahead flush.
                try:
                    limiter.acquire_on_behalf_of_nowait(token)
                except trio.WouldBlock:
                    await limiter.acquire_on_behalf_of(token)
                self._start(turn, step, slot)
                nursery.start_soon(run_one, position, token)
        if failures:
            raise failures[0]

    async def _execute(
        self, turn: TurnState, step: StepState, slot: CallSlot, *, checkpoint: bool = True
    ) -> ToolResult:
        """Run the slot's call and keep its result there.

        Raises:
            Exception: what the write-ahead hook raised (the only thing ``execute`` lets out);
                the body never ran, so the slot's result is ``ABORTED_BEFORE_DISPATCH``.
        """
        call = slot.call
        invocation = ToolInvocation(
            call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            agent=self._agent,
            before_effects=self._write_ahead,
            on_approval=functools.partial(self._log_approval, turn.number, step.number),
        )
        try:
            slot.result = await self._tools.execute(invocation, checkpoint=checkpoint)
        except Exception:
            slot.result = aborted_result(call.id, started=False)
            raise
        return slot.result

    def _log_approval(self, turn: int, step: int, notice: ApprovalNotice) -> None:
        request, answer = notice.request, notice.answer
        if answer is None:
            self._session.append(
                ApprovalRequestEvent(
                    turn=turn,
                    step=step,
                    call_id=request.call_id,
                    tool=request.tool,
                    arguments=request.arguments,
                    reason=request.reason,
                )
            )
            return
        approved = isinstance(answer, Approved)
        self._session.append(
            ApprovalDecisionEvent(
                turn=turn,
                step=step,
                call_id=request.call_id,
                decision="approved" if approved else "denied",
                by=notice.by or "unknown",
                remember=answer.remember if isinstance(answer, Approved) else None,
                reason=answer.reason if isinstance(answer, Denied) else None,
            )
        )

    def _start(self, turn: TurnState, step: StepState, slot: CallSlot) -> None:
        call = slot.call
        self._session.append(
            ToolCallEvent(
                turn=turn.number,
                step=step.number,
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                read_only=slot.read_only,
            )
        )
        slot.started = True

    def _commit(self, turn: TurnState, step: StepState, slot: CallSlot, result: ToolResult) -> None:
        if slot.committed:
            return
        call_id = slot.call.id
        if result.call_id == call_id and result.additional_context == ():
            logged = result  # frozen, and already what is logged (evolve costs µs per call)
        else:
            logged = attrs.evolve(result, call_id=call_id, additional_context=())
        if self._redactor is not None:
            logged = self._redactor.redact_result(logged)
        self._session.append(
            ToolResultEvent(turn=turn.number, step=step.number, call_id=call_id, result=logged)
        )
        slot.committed = True
        step.results.append(logged)
        step.contexts.extend(result.additional_context)
        if result.concludes_turn:
            step.concluded = True
