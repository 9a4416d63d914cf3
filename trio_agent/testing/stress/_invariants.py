"""The invariants: named checks over a session log or a whole :class:`RunRecord`.

Each ``check_*`` function returns the :class:`Violation` values it found (an empty list when the
invariant holds) and can be used on its own, on any session::

    assert check_tool_calls_answered(agent.session.events) == []

``complete=False`` checks a log that may still grow (a turn or a step may be open at its end).
Every check reads only the session log and the public ``agent/*`` events the probes recorded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

from ...session import (
    AssistantMessageEvent,
    Session,
    SessionEvent,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
)
from ._records import QueuedPrompt, RunRecord, Violation

__all__ = [
    "PROMPT_EVENTS",
    "UserCheck",
    "check_cancel_drops_queued_prompts",
    "check_cancel_ends_turn",
    "check_cancel_not_swallowed",
    "check_no_child_process_left",
    "check_no_hang",
    "check_no_scope_misnesting",
    "check_no_task_left",
    "check_no_unhandled_error",
    "check_prompts_logged_once",
    "check_run",
    "check_seq_contiguous",
    "check_session",
    "check_status_transitions",
    "check_steps_balanced",
    "check_streams_closed",
    "check_tool_calls_answered",
    "check_turns_closed",
]

#: A check of your own: called with the run's record; it fails by raising (``assert``) or by
#: returning messages (an iterable of str), and is reported as ``user:<function name>``.
UserCheck: TypeAlias = Callable[[RunRecord], Any]

#: The event types that log a prompt (by its message id).
PROMPT_EVENTS = ("user/message", "steering/message", "prompt/blocked")

_MISNESTING = "Cancel scope stack corrupted"

Events: TypeAlias = Session | Sequence[SessionEvent]


def _events(log: Events) -> Sequence[SessionEvent]:
    return log.events if isinstance(log, Session) else log


def prompt_ids(events: Iterable[SessionEvent]) -> list[str]:
    """The message id of every prompt the log holds (user, steering or blocked), in order."""
    return [
        str(event.data.get("message", {}).get("id"))
        for event in events
        if event.type in PROMPT_EVENTS
    ]


# --- the log ----------------------------------------------------------------------------------


def check_seq_contiguous(log: Events) -> list[Violation]:
    """``seq-contiguous``: event ``i`` of the log has ``seq == i`` (from 0, no gap, no repeat)."""
    for index, event in enumerate(_events(log)):
        if event.seq != index:
            return [
                Violation("seq-contiguous", f"event #{index} ({event.type}) has seq {event.seq}")
            ]
    return []


def check_turns_closed(log: Events, *, complete: bool = True) -> list[Violation]:
    """``turns-closed``: turns are numbered 1, 2, ... in order, never nest, and each
    ``turn/start`` is closed by exactly one ``turn/end`` of the same turn."""
    out: list[Violation] = []
    open_turn: int | None = None
    last = 0
    for event in _events(log):
        if event.type == TurnStart.event_type:
            turn = event.payload_as(TurnStart).turn
            if open_turn is not None:
                out.append(
                    Violation("turns-closed", f"turn {turn} started inside open turn {open_turn}")
                )
            if turn != last + 1:
                out.append(
                    Violation("turns-closed", f"turn {turn} follows turn {last} (seq {event.seq})")
                )
            open_turn = last = turn
        elif event.type == TurnEnd.event_type:
            turn = event.payload_as(TurnEnd).turn
            if open_turn != turn:
                out.append(
                    Violation(
                        "turns-closed",
                        f"turn/end of turn {turn} at seq {event.seq}, but the open turn is "
                        f"{open_turn}",
                    )
                )
            open_turn = None
    if complete and open_turn is not None:
        out.append(Violation("turns-closed", f"turn {open_turn} never ended"))
    return out


def check_steps_balanced(log: Events, *, complete: bool = True) -> list[Violation]:
    """``steps-balanced``: steps open and close inside their turn, never nest, and are numbered
    1, 2, ... within each turn."""
    out: list[Violation] = []
    in_turn = False
    open_step: int | None = None
    last = 0
    for event in _events(log):
        kind = event.type
        if kind == TurnStart.event_type:
            in_turn, open_step, last = True, None, 0
        elif kind == TurnEnd.event_type:
            if open_step is not None:
                out.append(Violation("steps-balanced", f"turn ended inside open step {open_step}"))
            in_turn, open_step = False, None
        elif kind == StepStart.event_type:
            step = event.payload_as(StepStart).step
            if not in_turn:
                out.append(Violation("steps-balanced", f"step {step} started outside a turn"))
            if open_step is not None:
                out.append(
                    Violation("steps-balanced", f"step {step} started inside step {open_step}")
                )
            if step != last + 1:
                out.append(Violation("steps-balanced", f"step {step} follows step {last}"))
            open_step = last = step
        elif kind == StepEnd.event_type:
            step = event.payload_as(StepEnd).step
            if open_step != step:
                out.append(
                    Violation(
                        "steps-balanced",
                        f"step/end of step {step} at seq {event.seq}, but the open step is "
                        f"{open_step}",
                    )
                )
            open_step = None
    if complete and open_step is not None:
        out.append(Violation("steps-balanced", f"step {open_step} never ended"))
    return out


def check_tool_calls_answered(log: Events, *, complete: bool = True) -> list[Violation]:
    """``tool-calls-answered``: the tool-call blocks of a logged assistant message have distinct,
    non-empty ids, and each gets exactly one ``tool/call`` and then exactly one ``tool/result``
    in its step; nothing answers a call that was never asked for; an interrupted message holds
    no tool call."""
    out: list[Violation] = []
    wanted: list[str] = []
    calls: Counter[str] = Counter()
    results: Counter[str] = Counter()
    where = ""

    def close_step() -> None:
        for call_id in wanted:
            if calls[call_id] != 1 or results[call_id] != 1:
                out.append(
                    Violation(
                        "tool-calls-answered",
                        f"tool call {call_id!r} ({where}) got {calls[call_id]} tool/call and "
                        f"{results[call_id]} tool/result events (expected 1 each)",
                    )
                )

    for event in _events(log):
        kind = event.type
        if kind == StepStart.event_type:
            wanted, calls, results = [], Counter(), Counter()
            started = event.payload_as(StepStart)
            where = f"turn {started.turn} step {started.step}"
        elif kind == AssistantMessageEvent.event_type:
            message = event.payload_as(AssistantMessageEvent)
            ids = [block.id for block in message.message.tool_calls]
            if message.interrupted and ids:
                out.append(
                    Violation(
                        "tool-calls-answered", f"interrupted message ({where}) holds tool calls"
                    )
                )
            for call_id, count in Counter(ids).items():
                if count > 1 or not call_id:
                    out.append(
                        Violation(
                            "tool-calls-answered",
                            f"assistant message ({where}) logs tool-call id {call_id!r} "
                            f"{count} time(s); every logged call needs a distinct, non-empty id",
                        )
                    )
            wanted.extend(ids)
        elif kind == ToolCallEvent.event_type:
            call_id = event.payload_as(ToolCallEvent).call_id
            if call_id not in wanted:
                out.append(
                    Violation(
                        "tool-calls-answered",
                        f"tool/call {call_id!r} ({where}) matches no tool-call block",
                    )
                )
            calls[call_id] += 1
        elif kind == ToolResultEvent.event_type:
            answer = event.payload_as(ToolResultEvent)
            if results[answer.call_id] >= calls[answer.call_id]:
                out.append(
                    Violation(
                        "tool-calls-answered",
                        f"tool/result {answer.call_id!r} ({where}) answers no pending tool/call",
                    )
                )
            if answer.result.call_id != answer.call_id:
                out.append(
                    Violation(
                        "tool-calls-answered",
                        f"tool/result {answer.call_id!r} carries a result for "
                        f"{answer.result.call_id!r}",
                    )
                )
            results[answer.call_id] += 1
        elif kind == StepEnd.event_type:
            close_step()
            wanted = []
    if complete:
        close_step()
    return out


def check_prompts_logged_once(log: Events, queued: Sequence[QueuedPrompt] = ()) -> list[Violation]:
    """``prompts-once-in-order``: every prompt (by message id) is logged at most once as
    ``user/message``, ``steering/message`` or ``prompt/blocked``; with ``queued`` (what
    ``agent/queued`` announced), sends are logged in the order they were sent, and so are
    steering messages."""
    out: list[Violation] = []
    order = prompt_ids(_events(log))
    for message_id, count in Counter(order).items():
        if count > 1:
            out.append(
                Violation("prompts-once-in-order", f"prompt {message_id} was logged {count} times")
            )
    position = {message_id: i for i, message_id in reversed(list(enumerate(order)))}
    for steering in (False, True):
        sent = [p.message_id for p in queued if p.steering is steering]
        logged = sorted(position[m] for m in sent if m in position)
        expected = [position[m] for m in sent if m in position]
        if logged != expected:
            kind = "steering messages" if steering else "sends"
            out.append(Violation("prompts-once-in-order", f"{kind} were logged out of order"))
    return out


def check_status_transitions(statuses: Sequence[str], *, complete: bool = True) -> list[Violation]:
    """``status-transitions``: ``agent/status`` goes idle ⇄ running (starting from idle, each a
    real change), then ``disposed`` once, and nothing after it."""
    out: list[Violation] = []
    previous = "idle"
    disposed = False
    for index, status in enumerate(statuses):
        if previous == "disposed":
            out.append(
                Violation("status-transitions", f"status {status!r} after 'disposed' (#{index})")
            )
        elif status == previous:
            out.append(Violation("status-transitions", f"status {status!r} repeated (#{index})"))
        elif status not in ("idle", "running", "disposed"):
            out.append(Violation("status-transitions", f"unknown status {status!r}"))
        previous = status
        disposed = disposed or status == "disposed"
    if complete and not disposed:
        out.append(
            Violation("status-transitions", f"the agent ended {previous!r}, never 'disposed'")
        )
    return out


def check_session(log: Events, *, complete: bool = True) -> list[Violation]:
    """Every log invariant on one session: seq, turns, steps, tool calls and prompts."""
    return [
        *check_seq_contiguous(log),
        *check_turns_closed(log, complete=complete),
        *check_steps_balanced(log, complete=complete),
        *check_tool_calls_answered(log, complete=complete),
        *check_prompts_logged_once(log),
    ]


# --- the run ----------------------------------------------------------------------------------


def check_no_task_left(record: RunRecord) -> list[Violation]:
    """``no-task-left``: no task spawned during the run is alive once the runtime has closed (a
    task outside its owner's nursery, say in a global or system nursery)."""
    return [
        Violation("no-task-left", f"task {name!r} outlived the runtime")
        for name in record.tasks_left
    ]


def check_no_child_process_left(record: RunRecord) -> list[Violation]:
    """``no-child-process-left``: no child process spawned during the run outlived it."""
    return [
        Violation("no-child-process-left", f"child process {pid} outlived the run")
        for pid in record.children_left or ()
    ]


def _exceptions(exc: BaseException | None) -> Iterable[BaseException]:
    seen: set[int] = set()
    stack = [exc] if exc is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)


def _misnesting(error: BaseException | None, message: str) -> str | None:
    """trio's "Cancel scope stack corrupted" line, if ``message`` or ``error`` holds it."""
    texts = [message, *(str(e) for e in _exceptions(error))]
    for text in texts:
        if _MISNESTING in text:
            return text.strip().splitlines()[0]
    return None


def check_no_scope_misnesting(record: RunRecord) -> list[Violation]:
    """``cancel-scope-misnesting``: no cancel scope was exited by a task other than the one that
    entered it (trio's "Cancel scope stack corrupted"), whether it was raised or logged."""
    out = []
    for error in record.errors:
        line = _misnesting(error.exception, error.message)
        if line is not None:
            text = error.message if line in error.message else f"{line} ({error.message})"
            out.append(Violation("cancel-scope-misnesting", text))
    return out


def check_no_unhandled_error(record: RunRecord, allowed: Sequence[str] = ()) -> list[Violation]:
    """``unhandled-error``: nothing escaped the run (an ``ExceptionGroup`` out of a nursery, a
    crash) and nothing was logged at ERROR level, except messages matching a regex in
    ``allowed``."""
    patterns = [re.compile(p) for p in allowed]
    out: list[Violation] = []
    for error in record.errors:
        if _misnesting(error.exception, error.message) is not None:
            continue  # reported by check_no_scope_misnesting
        if any(p.search(error.message) for p in patterns):
            continue
        where = "escaped the run" if error.logger is None else f"logged by {error.logger}"
        out.append(Violation("unhandled-error", f"{error.message} ({where})"))
    return out


def check_cancel_not_swallowed(record: RunRecord) -> list[Violation]:
    """``cancel-swallowed``: a tool body that ``trio.Cancelled`` reached let it propagate
    (it did not return, or raise something else, while its scope was still cancelled)."""
    return [Violation("cancel-swallowed", message) for message in record.swallowed]


def check_streams_closed(record: RunRecord) -> list[Violation]:
    """``stream-left-open``: the channel a model adapter's ``stream()`` yielded was closed when
    ``stream()`` exited (checked for trio memory channels)."""
    return [Violation("stream-left-open", message) for message in record.open_streams]


def check_no_hang(record: RunRecord) -> list[Violation]:
    """``hang``: the run finished; it never reached a state where every task waits for good."""
    return [] if record.hang is None else [Violation("hang", record.hang)]


def check_cancel_ends_turn(record: RunRecord, deadline: float | None = None) -> list[Violation]:
    """``cancel-ends-turn``: a turn open when the kit cancelled it ends ``aborted`` (``disposed``
    when the agent was closed), within ``deadline`` seconds of trio time when one is given.

    A sub-agent is held only to ending, in time: the kit acts on its parent, and that reaches
    the child through the parent's tool call, which cancels the child when it next runs (and
    closes it after); a child whose turn finishes in between ends it ``completed`` (or
    ``error``), before the cancel arrives.
    """
    out: list[Violation] = []
    for action in record.actions:
        if action.kind == "unload":
            continue
        for seen in action.agents:
            if seen.open_turn is None:
                continue
            end = record.agents[seen.agent_index].turn_ends.get(seen.open_turn)
            expected: tuple[str, ...] | None
            if seen.nested:
                expected = None  # any end (see above)
            elif action.kind == "close":
                expected = ("disposed",)
            else:
                expected = ("aborted", "disposed")
            if end is None:
                out.append(
                    Violation(
                        "cancel-ends-turn",
                        f"agent {seen.agent_id!r}: turn {seen.open_turn} never ended after the "
                        f"{action.kind}",
                    )
                )
                continue
            reason, when = end
            if expected is not None and reason not in expected:
                out.append(
                    Violation(
                        "cancel-ends-turn",
                        f"agent {seen.agent_id!r}: turn {seen.open_turn} ended {reason!r} after "
                        f"the {action.kind} (expected {' or '.join(expected)})",
                    )
                )
            if deadline is not None and when - action.time > deadline + 1e-9:
                out.append(
                    Violation(
                        "cancel-ends-turn",
                        f"agent {seen.agent_id!r}: turn {seen.open_turn} ended "
                        f"{when - action.time:g}s after the {action.kind} (allowed {deadline:g}s)",
                    )
                )
    return out


def check_cancel_drops_queued_prompts(record: RunRecord) -> list[Violation]:
    """``cancel-drops-prompts``: a prompt still queued when its agent was cancelled or closed
    (sent, but not taken by a turn yet), and steering not logged by then, is never logged.

    Sub-agents are not held to it: the kit cancels or closes their parent, and that reaches a
    child through the parent's tool call, which cancels the child only when it next runs. A
    child woken by its task before that may take the task first; its turn then ends
    ``aborted`` (``cancel-ends-turn`` allows it for the same reason).
    """
    out: list[Violation] = []
    for action in record.actions:
        if action.kind == "unload":
            continue
        for seen in action.agents:
            if seen.nested:
                continue
            trace = record.agents[seen.agent_index]
            session = trace.agent.session
            dropped = {
                p.message_id
                for p in trace.queued
                if p.mark < action.mark
                and p.message_id not in seen.logged
                and (p.steering or not any(p.mark < t < action.mark for t in trace.turn_starts))
            }
            out.extend(
                Violation(
                    "cancel-drops-prompts",
                    f"agent {seen.agent_id!r}: prompt {message_id} was still pending at the "
                    f"{action.kind} but was logged later",
                )
                for message_id in prompt_ids(session.events)
                if message_id in dropped
            )
    return out


def _user(invariant: UserCheck, record: RunRecord) -> list[Violation]:
    name = f"user:{getattr(invariant, '__name__', type(invariant).__name__)}"
    try:
        result = invariant(record)
    except AssertionError as exc:
        # First line only: pytest's assertion rewriting appends its explanation.
        return [Violation(name, (str(exc) or "assertion failed").splitlines()[0])]
    except Exception as exc:
        return [Violation(name, f"the check raised {type(exc).__name__}: {exc}")]
    if result is None or isinstance(result, bool):
        return [] if result in (None, True) else [Violation(name, "returned False")]
    return [Violation(name, str(message)) for message in result]


def check_run(
    record: RunRecord,
    *,
    complete: bool = True,
    cancel_deadline: float | None = None,
    allowed_errors: Sequence[str] = (),
    checks: Sequence[UserCheck] = (),
) -> list[Violation]:
    """Every invariant on a run: each session's log, each agent's statuses and prompts, the
    run-level checks and ``checks`` (your own callbacks).

    With ``complete=False`` (a run still going, as between two state-machine steps) open turns,
    steps and agents are allowed and the end-of-run checks (tasks, processes) are skipped.
    """
    out = check_no_hang(record)  # first: a hang explains most of what follows
    for session in record.sessions:
        found = check_session(session, complete=complete)
        out.extend(Violation(v.invariant, f"session {session.id}: {v.message}") for v in found)
    for trace in record.agents:
        found = [
            *check_status_transitions(trace.statuses, complete=complete),
            *check_prompts_logged_once(trace.agent.session, trace.queued),
        ]
        out.extend(Violation(v.invariant, f"agent {trace.id!r}: {v.message}") for v in found)
    out.extend(check_no_scope_misnesting(record))
    out.extend(check_no_unhandled_error(record, allowed_errors))
    out.extend(check_cancel_not_swallowed(record))
    out.extend(check_streams_closed(record))
    out.extend(check_cancel_drops_queued_prompts(record))
    if complete:
        out.extend(check_cancel_ends_turn(record, cancel_deadline))
        out.extend(check_no_task_left(record))
        out.extend(check_no_child_process_left(record))
    for check in checks:
        out.extend(_user(check, record))
    return _unique(out)


def _unique(violations: list[Violation]) -> list[Violation]:
    return list(dict.fromkeys(violations))
