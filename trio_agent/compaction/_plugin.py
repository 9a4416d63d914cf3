"""``ctx.compaction``: keep a long session under its model's context window.

Three ways in, one way through (:meth:`Compaction.compact`):

* ``agent/pre-step`` - before each step's history is derived, when the next request is
  estimated at ``threshold`` of the model's window or more (``ctx.usage.estimate``);
* ``agent/request-error`` - the provider answered ``CONTEXT_WINDOW_EXCEEDED``: compact once and
  answer :class:`~trio_agent.agent.Retry`, so the step repeats on the smaller history (the loop
  derives the history again for a retry); a second overflow in the same step fails the turn;
* by hand - ``await ctx.compaction.compact(agent)`` (``/compact`` in chat).

A compaction covers the oldest closed turns, keeping the latest ``keep_turns`` closed turns
and the open turn verbatim, and appends one event: ``compaction/summary`` (a model-written
summary, ``strategy: summary``) or ``compaction/prune`` (tool results stubbed, no model call,
``strategy: prune``). The session's projection honours it; the log is never rewritten.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, final

import attrs
import trio

from ..agent import Agent, PreStep, RequestFailed, Retry
from ..llm import BlockAssembler, GenerateRequest, LlmCallConfig, LlmService, Message
from ..lowlevel import Next
from ..runtime import Context, Service
from ..session import (
    COMPACTION_SOURCE,
    CompactionPrune,
    CompactionRangeError,
    CompactionSummary,
    Session,
    SessionError,
    TurnEnd,
    would_prune,
)
from ..usage import CHARS_PER_TOKEN, UsageService, estimate_tokens
from ._transcript import render_transcript
from ._types import CompactionError, CompactionFailed, CompactionResult, Strategy, Trigger

__all__ = ["DEFAULT_PROMPT", "PRUNE_STUB", "SUMMARY_HEADING", "Compaction"]

logger = logging.getLogger("trio_agent.compaction")

#: The system prompt of the summary call (``compaction.prompt`` replaces it).
DEFAULT_PROMPT = (
    "You compact the history of a conversation between a user and an AI agent that uses "
    "tools, so that the agent can carry on without it. Read the transcript and write the "
    "notes the agent needs to continue: the user's goals, requests and constraints; what was "
    "decided and why; the files, commands and tool results that matter, with exact names, "
    "paths, values and error messages; what is done and what is still open. Be concise and "
    "factual, invent nothing, and write notes for the agent, not a reply to the user."
)
#: The line the summary message starts with, before the model's summary.
SUMMARY_HEADING = "[The earlier part of this conversation was compacted; this is its summary.]"
#: What a pruned tool result reads as.
PRUNE_STUB = "[This tool result was pruned to save context; call the tool again if you need it.]"
#: Share of the summarising model's window the transcript may fill (the rest is for the
#: prompt and the summary itself).
TRANSCRIPT_BUDGET = 0.75


def _current_turn(session: Session) -> int:
    open_turn = session.open_turn
    return session.last_turn if open_turn is None else open_turn


def _fraction(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not 0 < value <= 1:
        raise ValueError(f"threshold must be a fraction of the window in (0, 1], got {value!r}")


def _count(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or value < 0:
        raise ValueError(f"keep_turns must be an int >= 0, got {value!r}")


@final
class Compaction(Service, name="compaction"):
    """The compaction plugin (``ctx.compaction``); see the module docstring.

    Needs ``ctx.llm`` and ``ctx.usage`` (:class:`~trio_agent.usage.UsageService`). A failed or
    cancelled compaction leaves the history as it was and is reported: a warning in the log,
    ``compaction/failed`` (:class:`CompactionFailed`, emitted through the agent's context) and a
    ``compaction/failed {trigger, error}`` session event. Compactions of one session run one at
    a time.
    """

    inject = ("llm", "usage")

    @attrs.frozen(kw_only=True)
    class Config:
        """``threshold``: compact when the next request is estimated at this share of the
        model's context window; ``keep_turns``: closed turns always kept verbatim (besides the
        open one); ``provider`` / ``model``: who writes the summary (default: the agent's
        current model); ``prompt``: the summary call's system prompt; ``strategy``:
        ``summary`` or ``prune``."""

        threshold: float = attrs.field(default=0.8, validator=_fraction)
        keep_turns: int = attrs.field(default=4, validator=_count)
        provider: str | None = None
        model: str | None = None
        prompt: str = DEFAULT_PROMPT
        strategy: Strategy = "summary"

    def __init__(self, ctx: Context, config: Compaction.Config | None = None) -> None:
        super().__init__(ctx, config)
        self.settings = config or Compaction.Config()
        self._llm = ctx.require(LlmService)
        self._usage = ctx.require(UsageService)
        self._locks: weakref.WeakKeyDictionary[Session, trio.Lock] = weakref.WeakKeyDictionary()
        #: The (turn, step) of each session's latest forced compaction.
        self._forced: weakref.WeakKeyDictionary[Session, tuple[int, int]] = (
            weakref.WeakKeyDictionary()
        )
        ctx.on("agent/pre-step", self._on_pre_step)
        ctx.on("agent/request-error", self._on_request_error)

    # --- public -----------------------------------------------------------------------------

    async def compact(
        self, agent: Agent, *, strategy: Strategy | None = None
    ) -> CompactionResult | None:
        """Compact ``agent`` 's history now, whatever its size; return what was logged.

        ``None`` when there is nothing to compact (no closed turn beyond ``keep_turns``, or
        only an earlier summary there). Safe while the agent runs a turn: only closed turns are
        covered. Cancellation (the caller's scope) leaves the history as it was.

        Raises:
            CompactionError: the summary could not be made (the model call failed, returned
                nothing, or no model is configured); the history is as it was.
        """
        return await self._run(agent, "manual", strategy or self.settings.strategy)

    # --- triggers ---------------------------------------------------------------------------

    async def _on_pre_step(self, event: PreStep) -> None:
        fraction = self._usage.fraction(event.agent)
        if fraction is None or fraction < self.settings.threshold:
            return
        try:
            await self._run(event.agent, "threshold", self.settings.strategy)
        except CompactionError:
            pass  # reported; the step goes on with the history as it was

    async def _on_request_error(self, event: RequestFailed, next: Next) -> Any:
        if event.failure.code != "CONTEXT_WINDOW_EXCEEDED":
            return await next()
        session = event.agent.session
        key = (event.turn, event.step)
        if self._forced.get(session) == key:
            logger.error(
                "agent %r: turn %d step %d still exceeds the context window of %s/%s after a "
                "compaction; giving up (keep fewer turns, or use a model with a larger window)",
                event.agent.id,
                event.turn,
                event.step,
                event.config.provider,
                event.config.model,
            )
            return await next()
        self._forced[session] = key
        try:
            result = await self._run(event.agent, "context-window-exceeded", self.settings.strategy)
        except CompactionError:
            return await next()
        if result is None:
            self._report(
                event.agent,
                "context-window-exceeded",
                CompactionError(
                    f"the request exceeds the context window of {event.config.provider}/"
                    f"{event.config.model} and there is nothing left to compact (the latest "
                    f"{self.settings.keep_turns} closed turns and the open turn are kept "
                    "verbatim); lower compaction.keep_turns or use a larger window"
                ),
            )
            return await next()
        return Retry()

    # --- the work ---------------------------------------------------------------------------

    async def _run(
        self, agent: Agent, trigger: Trigger, strategy: Strategy
    ) -> CompactionResult | None:
        session = agent.session
        lock = self._locks.get(session)
        if lock is None:
            lock = self._locks[session] = trio.Lock()
        async with lock:
            try:
                return await self._compact(agent, strategy)
            except CompactionError as exc:
                self._report(agent, trigger, exc)
                raise
            except trio.Cancelled as exc:
                self._report(agent, trigger, exc)
                raise

    async def _compact(self, agent: Agent, strategy: Strategy) -> CompactionResult | None:
        session = agent.session
        before = self._usage.estimate(agent)
        ends = self._range_ends(session)
        if not ends:
            return None
        history = session.derive_messages()
        if strategy == "prune":
            last = ends[-1]
            covered = history[: session.history_index(last)]
            if not any(would_prune(message, PRUNE_STUB) for message in covered):
                return None
            payload: CompactionSummary | CompactionPrune = CompactionPrune(
                first_seq=0,
                last_seq=last,
                stub=PRUNE_STUB,
                turn=_current_turn(session),
                step=session.open_step,
            )
        else:
            config = self._summary_config(agent)
            last = self._fitting_end(session, ends, config)
            covered = history[: session.history_index(last)]
            if all(message.source == COMPACTION_SOURCE for message in covered):
                return None
            summary = await self._summarise(session, config, render_transcript(covered))
            payload = CompactionSummary(
                first_seq=0,
                last_seq=last,
                summary=f"{SUMMARY_HEADING}\n\n{summary}",
                turn=_current_turn(session),
                step=session.open_step,
            )
        try:
            logged = session.append(payload)
        except (CompactionRangeError, SessionError) as exc:
            raise CompactionError(f"the session refused the compaction: {exc}") from exc
        after = self._usage.estimate(agent)
        logger.info(
            "agent %r: compacted seqs 0..%d (%s): next request ~%d -> ~%d tokens",
            agent.id,
            last,
            strategy,
            before.tokens,
            after.tokens,
        )
        return CompactionResult(strategy, logged, 0, last, before, after)

    def _range_ends(self, session: Session) -> list[int]:
        """Seqs a compaction may end at: the ``turn/end`` of each closed turn that is older
        than the latest ``keep_turns``, oldest first."""
        ends = session.events_of_type(TurnEnd.event_type)
        eligible = len(ends) - self.settings.keep_turns
        return [ends[index].seq for index in range(max(eligible, 0))]

    def _fitting_end(self, session: Session, ends: list[int], config: LlmCallConfig) -> int:
        """The latest end whose transcript fits the summarising model (the earliest if none
        does: the call may still succeed, and a failure is reported)."""
        window = self._usage.context_window(config.provider, config.model)
        if window is None:
            return ends[-1]
        budget = window * TRANSCRIPT_BUDGET - estimate_tokens(self.settings.prompt)
        history = session.derive_messages()
        chosen = ends[0]
        chars = covered = 0
        for end in ends:
            stop = session.history_index(end)
            chars += len(render_transcript(history[covered:stop])) + 2
            covered = stop
            if -(-chars // CHARS_PER_TOKEN) > budget:
                break
            chosen = end
        return chosen

    def _summary_config(self, agent: Agent) -> LlmCallConfig:
        settings = self.settings
        header = agent.session.request_header
        current = header.config if header is not None else None
        provider = settings.provider or (current.provider if current else agent.options.provider)
        model = settings.model
        if model is None:
            if current is not None and current.provider == provider:
                model = current.model
            elif agent.options.provider in (None, provider):
                model = agent.options.model
        if provider is None or model is None:
            raise CompactionError(
                "no model to write the summary with: set compaction.provider and "
                "compaction.model (or let the agent make a request first)"
            )
        return LlmCallConfig(provider=provider, model=model)

    async def _summarise(self, session: Session, config: LlmCallConfig, transcript: str) -> str:
        request = GenerateRequest(
            config=config,
            messages=(Message.user(transcript, source=COMPACTION_SOURCE),),
            system=self.settings.prompt,
            session_id=session.id,
        )
        assembler = BlockAssembler()
        async with self._llm.stream(request) as chunks:
            async for chunk in chunks:
                assembler.feed(chunk)
        finish = assembler.finish
        if finish.reason in ("error", "aborted"):
            failure = finish.failure
            detail = f"{failure.code}: {failure.message}" if failure else finish.reason
            raise CompactionError(
                f"the summary call to {config.provider}/{config.model} failed ({detail})",
                failure=failure,
            )
        text = assembler.message().text.strip()
        if not text:
            raise CompactionError(
                f"the summary call to {config.provider}/{config.model} returned no text"
            )
        if finish.reason == "max-tokens":
            logger.warning(
                "session %r: the summary hit the model's output limit and may be cut short",
                session.id,
            )
        return text

    def _report(self, agent: Agent, trigger: Trigger, error: BaseException) -> None:
        """Say that a compaction did not happen (the history is unchanged)."""
        what = "was cancelled" if isinstance(error, trio.Cancelled) else f"failed: {error}"
        logger.warning(
            "agent %r: compaction (%s) %s; the history is unchanged", agent.id, trigger, what
        )
        agent.ctx.emit("compaction/failed", CompactionFailed(agent, trigger, error))
        session = agent.session
        try:
            session.append(
                "compaction/failed",
                {
                    "trigger": trigger,
                    "error": "cancelled" if isinstance(error, trio.Cancelled) else str(error),
                    "turn": _current_turn(session),
                    "step": session.open_step,
                },
            )
        except SessionError as exc:
            logger.warning("agent %r: could not log the compaction failure: %s", agent.id, exc)
