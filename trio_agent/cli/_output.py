"""What ``run`` and ``chat`` print while a turn runs, and how a turn's end reads."""

from __future__ import annotations

from typing import TextIO

from ..agent import StreamChunkReceived
from ..llm import TextDelta
from ..session import (
    AssistantMessageEvent,
    LlmRetry,
    Session,
    SessionAppended,
    SessionEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
)


class Printer:
    """Assistant text to stdout, tool activity and retries to stderr.

    ``text`` is ``"live"`` (a terminal: chunks as they stream; a retry ends the line and says
    so on stderr), ``"final"`` (a pipe or file: each step's text once it is final, so a
    retried stream never repeats its partial text) or ``"none"`` (``--json``).
    """

    def __init__(
        self, out: TextIO, err: TextIO, *, text: str = "live", max_attempts: int | None = None
    ) -> None:
        self.out = out
        self.err = err
        self.text = text
        self.max_attempts = max_attempts
        self.line_open = False

    def on_chunk(self, event: StreamChunkReceived) -> None:
        if self.text == "live" and isinstance(event.chunk, TextDelta):
            self.out.write(event.chunk.text)
            self.out.flush()
            self.line_open = not event.chunk.text.endswith("\n")

    def end_line(self) -> None:
        if self.line_open:
            self.out.write("\n")
            self.out.flush()
            self.line_open = False

    def on_session_event(self, event: SessionAppended) -> None:
        logged: SessionEvent = event.event
        if logged.type == ToolCallEvent.event_type:
            call = logged.payload_as(ToolCallEvent)
            self.end_line()
            self.note(f"→ {call.name} {shorten(call.arguments, 120)}")
        elif logged.type == ToolResultEvent.event_type:
            result = logged.payload_as(ToolResultEvent).result
            status = f"error {result.code}" if result.is_error else "ok"
            self.note(f"← {status}: {shorten(result.text, 120)}")
        elif logged.type == LlmRetry.event_type:
            retry = logged.payload_as(LlmRetry)
            if self.line_open:
                self.end_line()
                self.note("(the partial answer above was cut off; the model starts again)")
            of = f"/{self.max_attempts}" if self.max_attempts else ""
            self.note(
                f"retrying in {retry.delay:.1f} s after {retry.failure.code} "
                f"(attempt {retry.attempt + 1}{of})"
            )
        elif logged.type == AssistantMessageEvent.event_type and self.text == "final":
            text = logged.payload_as(AssistantMessageEvent).message.text
            if text.strip():
                self.out.write(text if text.endswith("\n") else text + "\n")
                self.out.flush()

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()


def text_mode(out: TextIO, *, json_output: bool = False) -> str:
    """``"none"`` for ``--json``, ``"live"`` on a terminal, else ``"final"`` (see
    :class:`Printer`)."""
    if json_output:
        return "none"
    try:
        return "live" if out.isatty() else "final"
    except (AttributeError, ValueError):
        return "final"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_turn_end(session: Session, since: int) -> TurnEnd | None:
    """The last ``turn/end`` logged at or after index ``since``."""
    for event in reversed(session.events[since:]):
        if event.type == TurnEnd.event_type:
            return event.payload_as(TurnEnd)
    return None


def last_text(session: Session, since: int) -> str:
    """The last non-blank assistant text logged at or after index ``since``."""
    for event in reversed(session.events[since:]):
        if event.type == AssistantMessageEvent.event_type:
            text = event.payload_as(AssistantMessageEvent).message.text
            if text.strip():
                return text
    return ""


def failure_of(end: TurnEnd | None) -> tuple[str, str] | None:
    """``(code, message)`` of a turn that did not complete; None for a completed one."""
    if end is None:
        return "NO_TURN", "the prompt did not start a turn"
    if end.reason == "completed":
        return None
    if end.reason == "error" and end.error is not None:
        return end.error.code, end.error.message
    messages = {
        "aborted": "the turn was cancelled",
        "disposed": "the agent was shut down during the turn",
        "max-tokens": "the model hit its output token limit before finishing",
        "max-steps": "the turn reached its step limit (max_steps) before a final answer",
        "rejected": "the prompt was blocked by a policy",
        "error": "a plugin failed during the turn (see the log above)",
        "interrupted": "the turn was interrupted",
    }
    return end.reason.upper().replace("-", "_"), messages.get(end.reason, end.reason)
