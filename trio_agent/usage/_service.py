"""``ctx.usage``: token totals per step, turn and session, and the next request's size."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any, final

from ..agent import Agent
from ..llm import LlmCallConfig, LlmService, Usage
from ..runtime import Context, Service
from ..session import (
    AssistantMessageEvent,
    CompactionPrune,
    CompactionSummary,
    Session,
    SessionEvent,
)
from ._estimate import estimate_messages_tokens, estimate_request_tokens
from ._types import ContextEstimate, UsageReport, UsageTotals

__all__ = ["UsageService", "tally"]

_ZERO = UsageTotals()
_ASSISTANT = AssistantMessageEvent.event_type


@final
class _Counts:
    """Running sums (mutable, so folding an answer allocates nothing)."""

    __slots__ = ("cache_write", "cached", "input", "output", "reasoning", "requests")

    def __init__(self) -> None:
        self.input = self.output = self.cached = self.cache_write = 0
        self.reasoning = self.requests = 0

    def add(self, usage: Usage) -> None:
        self.input += usage.input_tokens
        self.output += usage.output_tokens
        self.cached += usage.cache_read_tokens
        self.cache_write += usage.cache_write_tokens
        self.reasoning += usage.reasoning_tokens
        self.requests += 1

    def totals(self) -> UsageTotals:
        return UsageTotals(
            self.input, self.output, self.cached, self.cache_write, self.reasoning, self.requests
        )


@final
class _Tally:
    """Totals folded from ``assistant/message`` events, per session, turn and step."""

    __slots__ = ("session", "steps", "turns")

    def __init__(self) -> None:
        self.session = _Counts()
        self.turns: dict[int, _Counts] = {}
        self.steps: dict[tuple[int, int], _Counts] = {}

    def add(self, turn: int, step: int, usage: Usage) -> None:
        self.session.add(usage)
        counts = self.turns.get(turn)
        if counts is None:
            counts = self.turns[turn] = _Counts()
        counts.add(usage)
        counts = self.steps.get((turn, step))
        if counts is None:
            counts = self.steps[turn, step] = _Counts()
        counts.add(usage)

    def report(self) -> UsageReport:
        return UsageReport(
            self.session.totals(),
            MappingProxyType({turn: c.totals() for turn, c in self.turns.items()}),
            MappingProxyType({key: c.totals() for key, c in self.steps.items()}),
        )


def tally(events: Iterable[SessionEvent], *, seed_length: int | None = None) -> UsageReport:
    """The usage of a log that is not a live session (a stored one, for ``sessions show``).

    Counts the ``usage`` of every ``assistant/message`` at or after seq ``seed_length`` (pass
    the header's: a fork's copied prefix was paid for by its parent), as
    :meth:`UsageService.report` does for a live session.
    """
    result = _Tally()
    start = seed_length or 0
    for event in events:
        if event.type == _ASSISTANT and event.seq >= start:
            payload = event.payload_as(AssistantMessageEvent)
            if payload.usage is not None:
                result.add(payload.turn, payload.step, payload.usage)
    return result.report()


@final
class _Tracker:
    """One session's usage, folded incrementally from its ``assistant/message`` events."""

    __slots__ = (
        "answers",
        "cursor",
        "full_compactions",
        "full_length",
        "full_tokens",
        "header",
        "header_tokens",
        "last_context",
        "last_seq",
        "prunes",
        "seed",
        "seen",
        "since_length",
        "since_seq",
        "since_tokens",
        "summaries",
        "tally",
    )

    # It holds no reference to its session: the service maps sessions to trackers weakly, and
    # a tracker that held its key would keep every session it ever saw alive.
    def __init__(self, session: Session) -> None:
        self.tally = _Tally()
        self.seed = session.header.seed_length or 0
        # Live views: following them costs nothing per event of another type.
        self.answers = session.events_of_type(_ASSISTANT)
        self.summaries = session.events_of_type(CompactionSummary.event_type)
        self.prunes = session.events_of_type(CompactionPrune.event_type)
        #: How many answers are folded into the totals, and looked at for the latest report.
        self.cursor = 0
        self.seen = 0
        #: Seq of the latest answer that reported usage, and its prompt + output tokens.
        self.last_seq: int | None = None
        self.last_context = 0
        #: The estimate of the messages after ``last_seq``, kept up to date.
        self.since_seq: int | None = None
        self.since_length = 0
        self.since_tokens = 0
        #: The from-scratch estimate, kept up to date while no compaction intervenes.
        self.full_compactions = -1
        self.full_length = 0
        self.full_tokens = 0
        #: The estimate of the latest ``request/header`` (system prompt, tools, prefix).
        self.header: object = None
        self.header_tokens = 0

    def fold(self) -> None:
        """Fold every new answer into the totals (for ``of`` and ``report``)."""
        answers = self.answers
        count = len(answers)
        for index in range(self.cursor, count):
            event = answers[index]
            payload = event.payload_as(AssistantMessageEvent)
            if payload.usage is not None and event.seq >= self.seed:
                self.tally.add(payload.turn, payload.step, payload.usage)
        self.cursor = count

    def latest_report(self) -> None:
        """Find the latest answer that reported usage (for ``estimate``): a backward scan over
        the answers since the previous look, which stops at the first one that reported."""
        answers = self.answers
        count = len(answers)
        for index in range(count - 1, self.seen - 1, -1):
            event = answers[index]
            usage = event.payload_as(AssistantMessageEvent).usage
            if usage is not None:
                self.last_seq = event.seq
                self.last_context = (
                    usage.input_tokens
                    + usage.cache_read_tokens
                    + usage.cache_write_tokens
                    + usage.output_tokens
                )
                break
        self.seen = count

    def estimate(self, session: Session) -> tuple[int, int]:
        """(reported, estimated) tokens of ``session`` 's next request (this tracker's)."""
        self.latest_report()
        history = session.derive_messages()
        summaries, prunes = self.summaries, self.prunes
        last_seq = self.last_seq
        if (
            last_seq is not None
            and (not summaries or summaries[-1].seq < last_seq)
            and (not prunes or prunes[-1].seq < last_seq)
        ):
            # Only the messages new since the previous call are estimated.
            if self.since_seq != last_seq or self.since_length > len(history):
                self.since_seq = last_seq
                self.since_length = session.history_index(last_seq)
                self.since_tokens = 0
            self.since_tokens += estimate_messages_tokens(history[self.since_length :])
            self.since_length = len(history)
            return self.last_context, self.since_tokens
        # Nothing reported, or a compaction since: estimate the whole request, incrementally.
        compactions = len(summaries) + len(prunes)
        if compactions != self.full_compactions or len(history) < self.full_length:
            self.full_compactions = compactions
            self.full_length = 0
            self.full_tokens = 0
        self.full_tokens += estimate_messages_tokens(history[self.full_length :])
        self.full_length = len(history)
        header = session.request_header
        if header is not self.header:
            self.header = header
            self.header_tokens = (
                0
                if header is None
                else estimate_request_tokens(header.system, header.tools, header.prefix)
            )
        return 0, self.full_tokens + self.header_tokens


def _session_of(target: Agent | Session) -> Session:
    if isinstance(target, Session):
        return target
    session = getattr(target, "session", None)
    if not isinstance(session, Session):
        raise TypeError(
            f"ctx.usage expects an agent or a Session, got {type(target).__name__}; pass "
            "agent or agent.session"
        )
    return session


@final
class UsageService(Service, name="usage"):
    """``ctx.usage``: what a session's model calls cost, and how big its next request is.

    Totals come from the ``usage`` every ``assistant/message`` records, so they are rebuilt
    from the log wherever the log goes (resume, another process): nothing is kept outside it.
    Each session's figures are folded incrementally, following only its ``assistant/message``
    events (:meth:`Session.events_of_type`), so asking every step costs O(new answers).
    Needs ``ctx.llm`` (for the models' context windows).
    A failed attempt that was retried logged no answer and is not counted; a seeded session's
    (a fork's) copied prefix is not counted either: its parent paid for it.
    """

    inject = ("llm",)

    def __init__(self, ctx: Context, config: Any = None) -> None:
        super().__init__(ctx, config)
        self._llm = ctx.require(LlmService)
        self._trackers: weakref.WeakKeyDictionary[Session, _Tracker] = weakref.WeakKeyDictionary()
        # The last session asked about (weakly) and its tracker: an agent asks every step,
        # and a weak dictionary lookup builds a weak reference each time. A list, because a
        # service's views share its attributes (a rebound one would stay with one view).
        self._last: list[tuple[weakref.ref[Session], _Tracker]] = []

    def _tracker(self, session: Session) -> _Tracker:
        last = self._last
        if last and last[0][0]() is session:
            return last[0][1]
        tracker = self._trackers.get(session)
        if tracker is None:
            tracker = self._trackers[session] = _Tracker(session)
        last[:] = [(weakref.ref(session), tracker)]
        return tracker

    def of(
        self, target: Agent | Session, *, turn: int | None = None, step: int | None = None
    ) -> UsageTotals:
        """Totals of ``target`` (an agent or a session): the whole session, one ``turn``, or
        one ``step`` of a turn (zeros where nothing was reported).

        Raises:
            TypeError: ``target`` is neither, or ``step`` is given without ``turn``.
        """
        tracker = self._tracker(_session_of(target))
        tracker.fold()
        tally = tracker.tally
        if turn is None:
            if step is not None:
                raise TypeError("usage.of(step=...) needs the turn too: of(agent, turn=t, step=s)")
            return tally.session.totals()
        counts = tally.turns.get(turn) if step is None else tally.steps.get((turn, step))
        return _ZERO if counts is None else counts.totals()

    def report(self, target: Agent | Session) -> UsageReport:
        """Every total of ``target`` at once: the session, each turn and each step."""
        tracker = self._tracker(_session_of(target))
        tracker.fold()
        return tracker.tally.report()

    def estimate(
        self, target: Agent | Session, *, config: LlmCallConfig | None = None
    ) -> ContextEstimate:
        """How many tokens ``target`` 's next request will carry, and the model's window.

        The provider's report for the latest answer (its prompt plus its output) plus the
        estimator's guess (:mod:`~trio_agent.usage`) for every message logged since; with no
        report, or a compaction since the last one, the whole request is estimated (system
        prompt and tools from the latest ``request/header``). ``config`` names the model whose
        window applies; by default the latest ``request/header`` 's, else the agent's options'.
        O(messages since the last report) per call.
        """
        session = _session_of(target)
        reported, estimated = self._tracker(session).estimate(session)
        window = self._window(session, target, config)
        return ContextEstimate(reported + estimated, reported, estimated, window)

    def fraction(
        self, target: Agent | Session, *, config: LlmCallConfig | None = None
    ) -> float | None:
        """``estimate(target, config=config).fraction`` without building the estimate: the
        share of the model's window ``target`` 's next request would fill, ``None`` when the
        window is unknown (then nothing is estimated). What a gate asking every step calls."""
        session = _session_of(target)
        window = self._window(session, target, config)
        if window is None:
            return None
        reported, estimated = self._tracker(session).estimate(session)
        return (reported + estimated) / window

    def window_for(
        self, target: Agent | Session, config: LlmCallConfig | None = None
    ) -> int | None:
        """The context window of the model ``target`` calls next (see :meth:`estimate`)."""
        return self._window(_session_of(target), target, config)

    def _window(
        self, session: Session, target: Agent | Session, config: LlmCallConfig | None
    ) -> int | None:
        if config is None:
            header = session.request_header
            if header is not None:
                config = header.config
            elif target is not session:
                options = getattr(target, "options", None)
                provider = getattr(options, "provider", None)
                model = getattr(options, "model", None)
                if provider is None or model is None:
                    return None
                return self._llm.context_window(provider, model)
            else:
                return None
        return self._llm.context_window(config.provider, config.model)

    def context_window(self, provider: str, model: str) -> int | None:
        """The configured context window of ``model`` on ``provider`` (``None``: unknown)."""
        return self._llm.context_window(provider, model)
