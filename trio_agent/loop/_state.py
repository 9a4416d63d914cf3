"""Mutable bookkeeping of one turn and one step (package-internal)."""

from __future__ import annotations

from typing import final

import attrs

from ..agent import TurnEndReason
from ..llm import BlockAssembler, LlmFailure, Message, ToolCallBlock, ToolResult

__all__ = ["StepState", "TurnState"]


@final
@attrs.define(eq=False)
class StepState:
    """What the step has done so far: enough to close it correctly however it ends."""

    number: int
    opened: bool = False
    #: The stream of the current attempt, until its message is committed (for the interrupted
    #: anchor a cancel leaves behind).
    assembler: BlockAssembler | None = None
    calls: tuple[ToolCallBlock, ...] = ()
    #: Calls whose ``tool/call`` is logged.
    started: set[str] = attrs.field(factory=set)
    #: Results that finished but may not be committed yet (commits follow model order).
    finished: dict[str, ToolResult] = attrs.field(factory=dict)
    committed: set[str] = attrs.field(factory=set)
    results: list[ToolResult] = attrs.field(factory=list)
    contexts: list[Message] = attrs.field(factory=list)
    concluded: bool = False


@final
@attrs.define(eq=False)
class TurnState:
    """The turn's number and the facts that decide its end reason."""

    number: int
    steps: int = 0
    accepted: int = 0
    max_tokens: bool = False
    rejected: bool = False
    error: BaseException | None = None
    failure: LlmFailure | None = None
    terminal: bool = False
    aborted: bool = False
    disposed: bool = False

    def reason(self) -> TurnEndReason:
        """The end reason, by precedence disposed > aborted > error > max-tokens > completed."""
        if self.disposed:
            return "disposed"
        if self.aborted:
            return "aborted"
        if self.error is not None:
            return "error"
        if self.rejected:
            return "rejected"
        if self.max_tokens:
            return "max-tokens"
        return "completed"
