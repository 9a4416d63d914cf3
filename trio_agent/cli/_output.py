"""What ``run`` and ``chat`` print while a turn runs, and how a turn's end reads."""

from __future__ import annotations

import json
import unicodedata
from typing import TYPE_CHECKING, Any, TextIO

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

if TYPE_CHECKING:  # the CLI imports trio_agent.subagents only when the config mounts it
    from ..subagents import SubagentNotice


class Printer:
    """Assistant text to stdout, tool activity and retries to stderr.

    ``text`` is ``"live"`` (a terminal: chunks as they stream; a retry ends the line and says
    so on stderr), ``"final"`` (a pipe or file: each step's text once it is final, so a
    retried stream never repeats its partial text) or ``"none"`` (``--json``).

    Everything the model wrote (arguments, results, a child's task and error) goes through
    :func:`clean` before it is printed, so it can neither start a line nor reach the terminal
    as an escape sequence.
    """

    def __init__(
        self, out: TextIO, err: TextIO, *, text: str = "live", max_attempts: int | None = None
    ) -> None:
        self.out = out
        self.err = err
        self.text = text
        self.max_attempts = max_attempts
        self.line_open = False
        #: The task of each ``subagent`` call seen in the log, by call id, until its child
        #: starts (the ``started`` line shows it).
        self.tasks: dict[str, str] = {}
        #: One summary per child that ended (:func:`child_summary`), for ``run --json``.
        self.children: list[dict[str, Any]] = []

    def on_chunk(self, event: StreamChunkReceived) -> None:
        if self.text == "live" and isinstance(event.chunk, TextDelta):
            self.out.write(event.chunk.text)
            self.out.flush()
            self.line_open = not event.chunk.text.endswith("\n")

    def line_ended(self) -> None:
        """Something else ended the streamed line (a terminal echoes the line typed into it),
        so :meth:`end_line` has nothing to end."""
        self.line_open = False

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
            self.note(f"→ {clean(call.name, 64)} {clean(call.arguments)}")
            if call.name == "subagent":
                task = _task_of(call.arguments)
                if task is not None:
                    self.tasks[call.call_id] = task
        elif logged.type == ToolResultEvent.event_type:
            result = logged.payload_as(ToolResultEvent).result
            status = f"error {result.code}" if result.is_error else "ok"
            self.note(f"← {status}: {clean(result.text)}")
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

    def on_subagent(self, notice: SubagentNotice) -> None:
        """``agent/subagent``: one status line per child under its tool line,
        ``  ↳ SESSION started: TASK`` and ``  ↳ SESSION ended: REASON (tokens ...): ERROR``
        (``progress`` notices are not printed)."""
        child = clean(notice.session_id, 240)
        if notice.kind == "started":
            task = self.tasks.pop(notice.call_id, None) if notice.call_id else None
            where = " in the background" if notice.background else ""
            self.end_line()
            self.note(f"  ↳ {child} started{where}" + (f": {clean(task, 80)}" if task else ""))
        elif notice.kind == "ended":
            self.children.append(child_summary(notice))
            usage = notice.usage
            tokens = ""
            if usage is not None and (usage.input_tokens or usage.output_tokens):
                tokens = f" (tokens in {usage.input_tokens} / out {usage.output_tokens})"
            error = ""
            if notice.error:
                # The error names the child and its session, which the line starts with.
                named = f'subagent "{notice.definition}" (session {notice.session_id}) '
                error = f": {clean(notice.error.removeprefix(named), 160)}"
            self.end_line()
            self.note(f"  ↳ {child} ended: {clean(notice.reason or 'unknown', 32)}{tokens}{error}")

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


def clean(text: str, limit: int = 120) -> str:
    """``text`` made safe for one terminal line: each run of whitespace (line breaks
    included) becomes one space, every other non-printable character is shown as its Python
    escape (ESC as ``\\x1b``, U+202E as ``\\u202e``), and the result is cut to ``limit``
    characters with an ellipsis (never inside an escape).

    The model controls tool arguments, results, a child's task and its errors; through this
    it can neither start a line of its own nor move the cursor or recolour the terminal.
    """
    text = " ".join(text.split())
    # Only the first limit + 1 characters can show; escaping never shortens a character.
    pieces = [_shown(c) for c in text[: limit + 1]]
    if len(text) <= limit and sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    kept: list[str] = []
    used = 0
    for piece in pieces:
        if used + len(piece) > limit - 1:
            break
        kept.append(piece)
        used += len(piece)
    return "".join(kept) + "…"


def escape_controls(text: str, *, multiline: bool = False) -> str:
    """``text`` complete, with every non-printable character shown as its Python escape (ESC
    as ``\\x1b``, BEL as ``\\x07``, a C1 control as ``\\x9b``, U+202E as ``\\u202e``, a line
    break as ``\\n``), so stored or model-written text cannot drive the terminal.

    ``multiline`` keeps line breaks (``\\n``), tabs and space separators (no-break space ...)
    as they are, for text shown as a block (a transcript); a carriage return is still escaped,
    as it could overwrite what a line shows.
    """
    if multiline:
        return "".join(c if c in "\n\t" or _is_space(c) else _shown(c) for c in text)
    return "".join(map(_shown, text))


def _shown(c: str) -> str:
    """One character as printed: itself, or its Python escape when it is not printable."""
    return c if c.isprintable() else repr(c)[1:-1]


def _is_space(c: str) -> bool:
    return unicodedata.category(c) == "Zs"


def shorten(text: str, limit: int) -> str:
    """:func:`clean` with a required ``limit`` (the name the transcript code uses)."""
    return clean(text, limit)


def child_summary(notice: SubagentNotice) -> dict[str, Any]:
    """An ``ended`` notice as JSON (``run --json``'s ``subagents`` entries)."""
    usage = notice.usage
    return {
        "session_id": notice.session_id,
        "agent_id": notice.child_id,
        "definition": notice.definition,
        "call_id": notice.call_id,
        "background": notice.background,
        "reason": notice.reason,
        "error": notice.error,
        "usage": None
        if usage is None
        else {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }


def _task_of(arguments: str) -> str | None:
    """The ``task`` argument of a ``subagent`` call, if its arguments are a JSON object."""
    try:
        parsed: object = json.loads(arguments)
    except ValueError:
        return None
    task = parsed.get("task") if isinstance(parsed, dict) else None
    return task if isinstance(task, str) else None


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
