"""Compaction's values: its result, its failure notification and its error."""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

from ..agent import Agent
from ..errors import TrioAgentError
from ..llm import LlmFailure
from ..session import SessionEvent
from ..usage import ContextEstimate

__all__ = ["CompactionError", "CompactionFailed", "CompactionResult", "Strategy", "Trigger"]

#: How old history is made smaller: a model-written summary, or tool results stubbed.
Strategy: TypeAlias = Literal["summary", "prune"]
#: What asked for a compaction.
Trigger: TypeAlias = Literal["threshold", "manual", "context-window-exceeded"]


class CompactionError(TrioAgentError):
    """A compaction could not be made; the history is as it was.

    ``failure`` is the summary call's failure when the model call failed (``None`` for other
    causes: no model to call, an empty summary, a range the log refused).
    """

    def __init__(self, message: str, *, failure: LlmFailure | None = None) -> None:
        super().__init__(message)
        self.failure = failure


@attrs.frozen
class CompactionResult:
    """A compaction that was logged: ``event`` (``compaction/summary`` or ``compaction/prune``)
    covers seqs ``first_seq..last_seq``; ``before`` and ``after`` estimate the next request."""

    strategy: Strategy
    event: SessionEvent
    first_seq: int
    last_seq: int
    before: ContextEstimate
    after: ContextEstimate


@attrs.frozen
class CompactionFailed:
    """Payload of ``compaction/failed`` (emit): a compaction of ``agent`` 's history failed or
    was cancelled, and the history is as it was. ``error`` is the :class:`CompactionError` or
    the ``trio.Cancelled`` that ended it."""

    agent: Agent
    trigger: Trigger
    error: BaseException
