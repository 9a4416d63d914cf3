"""Crash repair: the events that close a turn a crash left open."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

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
)

__all__ = [
    "INTERRUPTED_NOT_STARTED_TEXT",
    "INTERRUPTED_OUTCOME_UNKNOWN_TEXT",
    "Closer",
    "repair_closers",
    "repair_events",
]

#: Payload of a closing event.
Closer: TypeAlias = ToolResultEvent | StepEnd | TurnEnd

#: What the model reads for a call that was logged as started (``tool/call``) but has no result.
INTERRUPTED_OUTCOME_UNKNOWN_TEXT = (
    "Error: the session was interrupted (the process stopped) while this tool call was running, "
    "so its outcome is unknown: it may or may not have taken effect. Do not retry blindly: "
    "retry only if the operation is read-only or idempotent; otherwise first verify external "
    "state or ask the user."
)

#: What the model reads for a call the model asked for that never started.
INTERRUPTED_NOT_STARTED_TEXT = (
    "Error: the session was interrupted before this tool call started, so it did not run. "
    "Call it again if it is still needed."
)


def repair_closers(events: Sequence[SessionEvent]) -> list[tuple[str, Closer]]:
    """The ``(type, payload)`` pairs that close the last turn of ``events`` if it is open.

    In order: one error ``tool/result`` (``code="INTERRUPTED"``) per pending call of the open
    step (a tool-call block of an ``assistant/message`` or a ``tool/call`` with no
    ``tool/result`` yet), in the order the calls appeared; ``step/end`` if a step is open; then
    ``turn/end`` with reason ``"interrupted"``. Empty when the last turn is closed (or there is
    none). Pure: reads only the last turn's events.
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
    # call id -> [step, started]; dicts keep first-appearance order.
    pending: dict[CallId, list[int | bool]] = {}
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
                pending.setdefault(block.id, [message_event.step, False])
        elif kind == "tool/call":
            call = event.payload_as(ToolCallEvent)
            pending.setdefault(call.call_id, [call.step, False])[1] = True
        elif kind == "tool/result":
            pending.pop(event.payload_as(ToolResultEvent).call_id, None)

    closers: list[tuple[str, Closer]] = []
    for call_id, (step, started) in pending.items():
        text = INTERRUPTED_OUTCOME_UNKNOWN_TEXT if started else INTERRUPTED_NOT_STARTED_TEXT
        result = ToolResult(call_id, (TextBlock(text),), is_error=True, code="INTERRUPTED")
        closers.append(
            (
                ToolResultEvent.event_type,
                ToolResultEvent(turn=turn, step=int(step), call_id=call_id, result=result),
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
        event._cache_payload(payload)
        out.append(event)
    return out
