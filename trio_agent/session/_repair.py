"""Crash repair: the events that close a turn a crash left open.

The ledger (docs/design.md, "Durable by the step"): no tool is ever silently re-run on resume.
Every call the crash left without a result gets an error result that says what may have
happened, by what the log shows:

=======================================  ========================  ===========================
the log shows                            code                      the model reads
=======================================  ========================  ===========================
a call block, no ``tool/call``           ``INTERRUPTED``           it did not run
``tool/call`` of a read-only tool        ``INTERRUPTED``           safe to run again
``tool/call`` of a tool with effects     ``TOOL_OUTCOME_UNKNOWN``  verify before retrying
=======================================  ========================  ===========================

A ``tool/call`` logged before ``read_only`` was recorded counts as a call with effects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import attrs

from .. import _serde
from ..ids import CallId
from ..llm import TextBlock, ToolResult
from ._events import (
    AssistantMessageEvent,
    SessionEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    prime_payload,
)

__all__ = [
    "INTERRUPTED_NOT_STARTED_TEXT",
    "INTERRUPTED_OUTCOME_UNKNOWN_TEXT",
    "INTERRUPTED_READ_ONLY_TEXT",
    "Closer",
    "repair_closers",
    "repair_events",
]

#: Payload of a closing event.
Closer: TypeAlias = ToolResultEvent | StepEnd | TurnEnd

# The result codes of repaired calls; trio_agent.tools exports them with the other codes (it
# sits above this layer, so the spelling is repeated, and a test pins that they agree).
INTERRUPTED = "INTERRUPTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"

#: What the model reads for a started call (``tool/call`` logged) of a tool with effects that has
#: no result.
INTERRUPTED_OUTCOME_UNKNOWN_TEXT = (
    "Error: the session was interrupted (the process stopped) while this tool call was running, "
    "so its outcome is unknown: it may or may not have taken effect. Do not retry blindly: "
    "retry only if the operation is read-only or idempotent; otherwise first verify external "
    "state or ask the user."
)

#: What the model reads for a started call of a read-only tool that has no result.
INTERRUPTED_READ_ONLY_TEXT = (
    "Error: the session was interrupted (the process stopped) while this tool call was running, "
    "so it has no result. The tool only reads, so it had no effect and is safe to run again."
)

#: What the model reads for a call the model asked for that never started.
INTERRUPTED_NOT_STARTED_TEXT = (
    "Error: the session was interrupted before this tool call started, so it did not run. "
    "Call it again if it is still needed."
)


@attrs.define
class _Pending:
    """A call of the open step without a result: where it is and what the log says it did."""

    step: int
    started: bool = False
    read_only: bool = False

    def outcome(self) -> tuple[str, str]:
        """The repaired result's code and text (the ledger in the module docs)."""
        if not self.started:
            return INTERRUPTED, INTERRUPTED_NOT_STARTED_TEXT
        if self.read_only:
            return INTERRUPTED, INTERRUPTED_READ_ONLY_TEXT
        return TOOL_OUTCOME_UNKNOWN, INTERRUPTED_OUTCOME_UNKNOWN_TEXT


def repair_closers(events: Sequence[SessionEvent]) -> list[tuple[str, Closer]]:
    """The ``(type, payload)`` pairs that close the last turn of ``events`` if it is open.

    In order: one error ``tool/result`` per pending call of the open step (a tool-call block of
    an ``assistant/message`` or a ``tool/call`` with no ``tool/result`` yet), in the order the
    calls appeared - ``TOOL_OUTCOME_UNKNOWN`` for a started call (``tool/call`` logged) whose
    tool may have effects, ``INTERRUPTED`` for a started read-only call and for a call that
    never started (see the module docs); ``step/end`` if a step is open; then ``turn/end``
    with reason ``"interrupted"``. Empty when the last turn is closed (or there is none). Pure:
    reads only the last turn's events.
    """
    start = None
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind == "turn/end":
            return []
        if kind == "turn/start":
            start = index
            break
    if start is None:
        return []
    turn = events[start].payload_as(TurnStart).turn
    open_step: int | None = None
    # call id -> its state; dicts keep first-appearance order.
    pending: dict[CallId, _Pending] = {}
    for event in events[start + 1 :]:
        kind = event.type
        if kind == "step/start":
            open_step = event.payload_as(StepStart).step
            pending.clear()
        elif kind == "step/end":
            open_step = None
            pending.clear()
        elif kind == "assistant/message":
            message_event = event.payload_as(AssistantMessageEvent)
            for block in message_event.message.tool_calls:
                pending.setdefault(block.id, _Pending(message_event.step))
        elif kind == "tool/call":
            call = event.payload_as(ToolCallEvent)
            state = pending.setdefault(call.call_id, _Pending(call.step))
            state.started = True
            state.read_only = call.read_only
        elif kind == "tool/result":
            pending.pop(event.payload_as(ToolResultEvent).call_id, None)

    closers: list[tuple[str, Closer]] = []
    for call_id, state in pending.items():
        code, text = state.outcome()
        result = ToolResult(call_id, (TextBlock(text),), is_error=True, code=code)
        closers.append(
            (
                ToolResultEvent.event_type,
                ToolResultEvent(turn=turn, step=state.step, call_id=call_id, result=result),
            )
        )
    if open_step is not None:
        closers.append((StepEnd.event_type, StepEnd(turn=turn, step=open_step)))
    closers.append((TurnEnd.event_type, TurnEnd(turn=turn, reason="interrupted")))
    return closers


def repair_events(
    events: Sequence[SessionEvent], *, time: float | None = None
) -> list[SessionEvent]:
    """:func:`repair_closers` as :class:`SessionEvent` s that continue ``events``' seqs.

    ``time`` defaults to the last event's time (the crash left no better clock reading).
    Persistence appends these to a loaded log before seeding a session with it.
    """
    closers = repair_closers(events)
    if not closers:
        return []
    stamp = events[-1].time if time is None else time
    out: list[SessionEvent] = []
    for offset, (kind, payload) in enumerate(closers):
        event = SessionEvent(len(events) + offset, kind, stamp, _serde.unstructure(payload))
        prime_payload(event, payload)
        out.append(event)
    return out
