"""Bookkeeping of one turn and one step, and the rules that decide how they end (package-internal).

The rules are plain functions of this bookkeeping, so they are tested without trio
(``tests/loop/test_loop_rules.py``); the driver only sequences the phases.
"""

from __future__ import annotations

from typing import final

import attrs

from ..agent import TurnEndReason
from ..llm import BlockAssembler, LlmFailure, Message, ToolCallBlock, ToolResult

__all__ = ["CallSlot", "StepState", "TurnState", "continues"]


@final
@attrs.define(eq=False)
class CallSlot:
    """One tool call of the step's message, at its position in model order.

    Slots are keyed by position, never by call id: the id is the model's string, and a model may
    repeat one (the loop rewrites repeats before the calls run, but the bookkeeping does not
    depend on that).
    """

    call: ToolCallBlock
    #: The flags of the tool the agent sees under the call's name when the step's calls begin
    #: (both false for an unknown tool): they decide scheduling and what ``tool/call`` records.
    read_only: bool = False
    concurrency_safe: bool = False
    #: Its ``tool/call`` is logged.
    started: bool = False
    #: The result, once the call finished (it may wait for earlier calls before it is committed).
    result: ToolResult | None = None
    #: Its ``tool/result`` is logged.
    committed: bool = False


@final
@attrs.define(eq=False)
class StepState:
    """What the step has done so far: enough to close it correctly however it ends."""

    number: int
    opened: bool = False
    #: The stream of the current attempt, until its message is committed (for the interrupted
    #: anchor a cancel leaves behind).
    assembler: BlockAssembler | None = None
    calls: list[CallSlot] = attrs.field(factory=list)
    results: list[ToolResult] = attrs.field(factory=list)
    contexts: list[Message] = attrs.field(factory=list)
    concluded: bool = False

    def wants_more(self, finish: str) -> bool:
        """The default continuation: another step when tools answered and none concluded the
        turn (never after a ``max-tokens`` cut)."""
        return bool(self.results) and not self.concluded and finish != "max-tokens"


@final
@attrs.define(eq=False)
class TurnState:
    """The turn's number and the facts that decide its end reason."""

    number: int
    steps: int = 0
    accepted: int = 0
    max_tokens: bool = False
    max_steps: bool = False
    rejected: bool = False
    error: BaseException | None = None
    failure: LlmFailure | None = None
    terminal: bool = False
    aborted: bool = False
    disposed: bool = False

    def reason(self) -> TurnEndReason:
        """The end reason, by precedence disposed > aborted > error > max-steps > max-tokens >
        completed."""
        if self.disposed:
            return "disposed"
        if self.aborted:
            return "aborted"
        if self.error is not None:
            return "error"
        if self.rejected:
            return "rejected"
        if self.max_steps:
            return "max-steps"
        if self.max_tokens:
            return "max-tokens"
        return "completed"

    def keeps_late_steering(self, *, closing: bool) -> bool:
        """Whether steering still pending at ``turn/end`` opens the next turn (it does after an
        ordinary stop; a terminal stop or the agent closing discards it)."""
        return not (self.terminal or closing)


def continues(action: str, *, steered: int, pending_steering: bool) -> bool:
    """The ordinary continuation: ``continue``, or a stop that steering overrides (steering
    drained at this step's end, or steered since)."""
    return action == "continue" or steered > 0 or pending_steering
