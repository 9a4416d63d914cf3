"""The loop driver: one agent's whole life, phase by phase, as seed 000 lays it out.

::

    agent/session-start (once)  →  wait for queued (idle)
    turn/start → each queued: agent/prompt-submit → user/message (+ context) | prompt/blocked
      all blocked → turn/end(rejected), no step
      STEP: drain steering → assemble prompt → session prefix (first step) → agent/pre-step
            → derive_messages → step/start → agent/request → request/header (if changed)
            → llm.stream → assistant/chunk* → agent/step-result → assistant/message
            → tool/call → tools.execute → tool/result (per call) → context/message
            → drain steering → agent/turn-continuation → agent/turn-stop → step/end
    turn/end(reason) → sessions.flush

Cancellation: ``agent.cancel()`` cancels the in-flight *phase scope* (a step, or the prompt
submission) and sets a marker the driver checks right after the idle wait, after the running
flip, before each step and at the continuation gate. Because only the phase scope is cancelled,
the code that closes a step or a turn runs in an uncancelled scope; only an outer cancellation
(the agent being torn down from outside) needs the shielded, budgeted cleanup in ``_close_turn``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, final

import trio

from ..agent import (
    AgentFailed,
    Allow,
    Block,
    ContinuationDecision,
    ContinuationStop,
    PreStep,
    PromptDecision,
    PromptSubmit,
    RequestConfig,
    RequestFailed,
    Retry,
    SessionPrefix,
    SessionStart,
    SteeringInjected,
    StepEnded,
    StepResult,
    StepStarted,
    StreamChunkReceived,
    TurnContinuation,
    TurnEnded,
    TurnStarted,
    TurnStop,
)
from ..llm import (
    BlockAssembler,
    FinishReason,
    GenerateRequest,
    LlmCallConfig,
    LlmError,
    Message,
    ToolSchema,
    Usage,
)
from ..session import (
    AssistantChunk,
    AssistantMessageEvent,
    ContextMessageEvent,
    PromptBlocked,
    RequestHeader,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from ._state import StepState, TurnState
from ._toolcalls import close_tool_calls, run_tool_calls

if TYPE_CHECKING:
    from ._agent import ReactLoopAgent

__all__ = ["Driver"]

logger = logging.getLogger("trio_agent.loop")


#: How long a turn's closing writes and flush may take when the agent is torn down from outside.
CLOSE_BUDGET = 10.0


@final
class Driver:
    """Runs one :class:`ReactLoopAgent` for its whole life (package-internal)."""

    def __init__(self, agent: ReactLoopAgent) -> None:
        self.agent = agent
        self.ctx = agent.ctx
        self.session = agent.session
        self.inbox = agent._inbox
        self.prefix: tuple[Message, ...] | None = None

    # --- lifetime ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve turns until the agent closes."""
        agent = self.agent
        agent.ctx.emit("agent/session-start", SessionStart(agent, agent._source))
        while not agent._close_requested():
            agent._marker = False  # once per iteration: a cancel governs one turn at most
            await self.wait_for_queued()
            if agent._close_requested():
                break
            if agent._cancel_requested():  # cancelled right after the idle wait
                continue
            agent._set_status("running")
            if agent._cancel_requested():  # cancelled by an agent/status("running") listener
                agent._settle()
                continue
            try:
                await self.turn()
            except Exception as exc:
                # Plugin failures end the turn inside turn(); reaching here means the loop's own
                # writes failed (say, the session was detached under it). Never crash the owner.
                logger.error("agent %r: the loop failed", agent.id, exc_info=exc)
                agent.ctx.emit("agent/error", AgentFailed(agent, self.session.last_turn, 0, exc))
                if not self.session.live:
                    agent._request_close()
            agent._settle()

    async def wait_for_queued(self) -> None:
        agent = self.agent
        while not self.inbox.queued and not agent._close_requested():
            agent._parked = True
            agent._notify()
            try:
                await self.inbox.wait()
            finally:
                agent._parked = False

    # --- one turn ---------------------------------------------------------------------------

    async def turn(self) -> None:
        agent = self.agent
        state = TurnState(number=self.session.last_turn + 1)
        self.session.append(TurnStart.event_type, TurnStart(turn=state.number))
        agent.ctx.emit("agent/turn-start", TurnStarted(agent, state.number))
        try:
            await self.submit_prompts(state)
            while not state.rejected:
                if agent._cancel_requested():  # before each step
                    break
                continuing = await self.step(state)
                if agent._cancel_requested() or not continuing:  # the continuation gate
                    break
        except Exception as exc:
            # A failure the cancel (or the close) caused is not an error of the turn: it ends
            # aborted (or disposed), which _close_turn derives from the same flags.
            if not (agent._cancel_requested() or agent._close_requested()):
                self._fail(state, exc)
        except BaseException:
            # Cancelled from outside (the agent is being torn down) or KeyboardInterrupt: close
            # the turn as disposed on the way out, then let it propagate.
            state.disposed = True
            raise
        finally:
            await self._close_turn(state)

    def _fail(self, state: TurnState, exc: Exception) -> None:
        state.error = exc
        if isinstance(exc, LlmError):
            state.failure = exc.failure
        else:
            logger.error(
                "agent %r: turn %d failed; the agent serves the next message",
                self.agent.id,
                state.number,
                exc_info=exc,
            )
        self.agent.ctx.emit("agent/error", AgentFailed(self.agent, state.number, state.steps, exc))

    async def _close_turn(self, state: TurnState) -> None:
        agent = self.agent
        if agent._close_requested():
            state.disposed = True
        elif agent._cancel_requested():
            state.aborted = True
        with trio.move_on_after(CLOSE_BUDGET) as budget:
            budget.shield = True
            self.log_injected(state, step=None)
            reason = state.reason()
            failure = state.failure if reason == "error" else None
            self.session.append(
                TurnEnd.event_type, TurnEnd(turn=state.number, reason=reason, error=failure)
            )
            agent.ctx.emit("agent/turn-end", TurnEnded(agent, state.number, reason))
            try:
                await agent.ctx.sessions.flush(self.session)
            except Exception as exc:
                logger.error(
                    "agent %r: flushing the session after turn %d failed",
                    agent.id,
                    state.number,
                    exc_info=exc,
                )
                agent.ctx.emit("agent/error", AgentFailed(agent, state.number, state.steps, exc))
            # cancel() already dropped the steering it found; what is left arrived later, so
            # only a terminal stop (or the agent going away) discards it.
            if state.terminal or agent._close_requested():
                self.inbox.steering.clear()
            else:
                self.inbox.requeue_steering()
        if budget.cancelled_caught:
            logger.error("agent %r: closing turn %d overran its budget", agent.id, state.number)

    async def submit_prompts(self, state: TurnState) -> None:
        """``agent/prompt-submit`` for every queued prompt, in order."""
        agent = self.agent
        prompts = self.inbox.take_queued()
        with self._phase():
            for message in prompts:

                async def allow() -> PromptDecision:
                    return Allow()

                decision = await self.ctx.waterfall(
                    "agent/prompt-submit", PromptSubmit(agent, state.number, message), allow
                )
                if isinstance(decision, Allow):
                    self.session.append(
                        UserMessageEvent.event_type,
                        UserMessageEvent(turn=state.number, message=message),
                    )
                    for extra in decision.additional_context:
                        self.log_context(state, extra, step=None)
                    state.accepted += 1
                elif isinstance(decision, Block):
                    self.session.append(
                        PromptBlocked.event_type,
                        PromptBlocked(turn=state.number, message=message, reason=decision.reason),
                    )
                else:
                    raise TypeError(
                        f"agent/prompt-submit listener returned {decision!r}; expected "
                        "trio_agent.agent.Allow(...) or Block(reason)"
                    )
        # A cancelled submission ends "aborted" (which outranks "rejected") in _close_turn.
        state.rejected = state.accepted == 0

    # --- one step ---------------------------------------------------------------------------

    async def step(self, turn: TurnState) -> bool:
        """Run one step; return whether the turn continues."""
        turn.steps += 1
        step = StepState(number=turn.steps)
        continuing = False
        try:
            with self._phase():
                continuing = await self.step_body(turn, step)
        finally:
            self.close_step(turn, step)
        return continuing

    async def step_body(self, turn: TurnState, step: StepState) -> bool:
        agent = self.agent
        self.drain_steering(turn, step=None)
        self.log_injected(turn, step=None)
        assembly = await self.ctx.system_prompt.assemble(agent)
        system = self.ctx.system_prompt.render(assembly) or None
        prefix = await self.session_prefix()
        await self.ctx.serial("agent/pre-step", PreStep(agent, turn.number, step.number, prefix))
        history = self.session.derive_messages()
        self.session.append(StepStart.event_type, StepStart(turn=turn.number, step=step.number))
        step.opened = True
        agent.ctx.emit("agent/step-start", StepStarted(agent, turn.number, step.number))

        message, usage, finish = await self.request(
            turn, step, system, assembly.tools, prefix, history
        )

        async def keep() -> Message:
            return message

        message = await self.ctx.waterfall(
            "agent/step-result", StepResult(agent, turn.number, step.number, message), keep
        )
        if not isinstance(message, Message):
            raise TypeError(f"agent/step-result listener returned {message!r}; expected a Message")
        self.session.append(
            AssistantMessageEvent.event_type,
            AssistantMessageEvent(
                turn=turn.number,
                step=step.number,
                message=message,
                finish=finish,
                usage=usage,
            ),
        )
        step.assembler = None
        if finish == "max-tokens":
            turn.max_tokens = True
        calls = () if finish == "max-tokens" else message.tool_calls
        if calls:
            await run_tool_calls(self, turn, step, calls)
        self.log_step_contexts(turn, step)
        return await self.continuation(turn, step, message, finish)

    async def session_prefix(self) -> tuple[Message, ...]:
        """``agent/session-prefix``, once per agent instance; frozen afterwards."""
        if self.prefix is None:

            async def empty() -> tuple[Message, ...]:
                return ()

            prefix = await self.ctx.waterfall(
                "agent/session-prefix", SessionPrefix(self.agent), empty
            )
            self.prefix = tuple(prefix)
        return self.prefix

    async def request(
        self,
        turn: TurnState,
        step: StepState,
        system: str | None,
        tools: tuple[ToolSchema, ...],
        prefix: tuple[Message, ...],
        history: Sequence[Message],
    ) -> tuple[Message, Usage | None, FinishReason]:
        """Call the model, retrying in the same step while ``agent/request-error`` says so."""
        agent = self.agent
        attempt = 0
        while True:
            seed = self.agent._seed_config()

            async def keep_seed(seed: LlmCallConfig = seed) -> LlmCallConfig:
                return seed

            config = await self.ctx.waterfall(
                "agent/request", RequestConfig(agent, turn.number, step.number, seed), keep_seed
            )
            if not isinstance(config, LlmCallConfig):
                raise TypeError(
                    f"agent/request listener returned {config!r}; expected an LlmCallConfig"
                )
            self.log_header(turn, step, config, system, tools, prefix)
            request = GenerateRequest(
                config=config,
                messages=prefix + tuple(history) if prefix else history,
                system=system,
                tools=tools,
                session_id=self.session.id,
            )
            assembler = BlockAssembler()
            step.assembler = assembler
            async with self.ctx.llm.stream(request) as chunks:
                async for chunk in chunks:
                    self.session.append(
                        AssistantChunk.event_type,
                        AssistantChunk(turn=turn.number, step=step.number, chunk=chunk),
                    )
                    agent.ctx.emit(
                        "agent/stream-chunk",
                        StreamChunkReceived(agent, turn.number, step.number, chunk),
                    )
                    assembler.feed(chunk)
            finish = assembler.finish
            if finish.reason not in ("error", "aborted"):
                return assembler.message(), assembler.usage, finish.reason
            # A failed attempt leaves its chunks in the log but no message.
            step.assembler = None
            attempt += 1
            failure = finish.failure
            assert failure is not None

            async def give_up() -> Retry | None:
                return None

            decision = await self.ctx.waterfall(
                "agent/request-error",
                RequestFailed(agent, turn.number, step.number, config, failure, attempt),
                give_up,
            )
            if isinstance(decision, Retry) and not agent._cancel_requested():
                continue
            if decision is not None and not isinstance(decision, Retry):
                raise TypeError(
                    f"agent/request-error listener returned {decision!r}; expected Retry() or None"
                )
            raise LlmError(failure)

    async def continuation(
        self, turn: TurnState, step: StepState, message: Message, finish: str
    ) -> bool:
        """Steering drain, ``agent/turn-continuation`` and ``agent/turn-stop``."""
        agent = self.agent
        steered = self.drain_steering(turn, step=step.number)
        wants_more = bool(step.results) and not step.concluded and finish != "max-tokens"
        default = ContinuationDecision("continue" if wants_more else "stop")

        async def keep_default() -> ContinuationDecision:
            return default

        decision = await self.ctx.waterfall(
            "agent/turn-continuation",
            TurnContinuation(
                agent, turn.number, step.number, message, tuple(step.results), default
            ),
            keep_default,
        )
        if not isinstance(decision, ContinuationDecision):
            raise TypeError(
                f"agent/turn-continuation listener returned {decision!r}; expected a "
                "ContinuationDecision"
            )
        if decision.action == "continue" and decision.reason:
            note = Message.user(decision.reason, source="steering")
            self.session.append(
                SteeringMessageEvent.event_type,
                SteeringMessageEvent(turn=turn.number, step=step.number, message=note),
            )
        continuing = decision.action == "continue" or steered > 0 or bool(self.inbox.steering)
        stop = await self.ctx.serial(
            "agent/turn-stop", TurnStop(agent, turn.number, step.number, continuing)
        )
        if stop is not None:
            if not isinstance(stop, ContinuationStop):
                raise TypeError(
                    f"agent/turn-stop listener returned {stop!r}; expected ContinuationStop or None"
                )
            turn.terminal = True
            return False
        return continuing

    def close_step(self, turn: TurnState, step: StepState) -> None:
        """Balance the log however the step ended (synchronous: safe under any cancellation)."""
        if not step.opened:
            return
        cancelled = self.agent._cancel_requested() or self.agent._close_requested()
        if step.assembler is not None and cancelled:
            partial = step.assembler.interrupted_message()
            if partial is not None:
                self.session.append(
                    AssistantMessageEvent.event_type,
                    AssistantMessageEvent(
                        turn=turn.number,
                        step=step.number,
                        message=partial,
                        finish="aborted",
                        usage=step.assembler.usage,
                        interrupted=True,
                    ),
                )
        step.assembler = None
        close_tool_calls(self, turn, step)
        self.log_step_contexts(turn, step)
        self.session.append(StepEnd.event_type, StepEnd(turn=turn.number, step=step.number))
        self.agent.ctx.emit("agent/step-end", StepEnded(self.agent, turn.number, step.number))

    # --- logging helpers --------------------------------------------------------------------

    def drain_steering(self, turn: TurnState, *, step: int | None) -> int:
        """Log every pending steering message; return how many there were."""
        messages = self.inbox.take_steering()
        for message in messages:
            self.session.append(
                SteeringMessageEvent.event_type,
                SteeringMessageEvent(turn=turn.number, step=step, message=message),
            )
            self.agent.ctx.emit("agent/steering", SteeringInjected(self.agent, message))
        return len(messages)

    def log_injected(self, turn: TurnState, *, step: int | None) -> None:
        for message in self.inbox.take_injected():
            self.log_context(turn, message, step=step)

    def log_step_contexts(self, turn: TurnState, step: StepState) -> None:
        """Log the context the step's tool results asked for (once: the buffer is emptied)."""
        for message in step.contexts:
            self.log_context(turn, message, step=step.number)
        step.contexts.clear()

    def log_context(self, turn: TurnState, message: Message, *, step: int | None) -> None:
        self.session.append(
            ContextMessageEvent.event_type,
            ContextMessageEvent(turn=turn.number, step=step, message=message),
        )

    def log_header(
        self,
        turn: TurnState,
        step: StepState,
        config: LlmCallConfig,
        system: str | None,
        tools: tuple[ToolSchema, ...],
        prefix: tuple[Message, ...],
    ) -> None:
        """Log ``request/header`` when it differs from the latest one in the session."""
        last = self.session.request_header
        if last is not None and (last.config, last.system, last.tools, last.prefix) == (
            config,
            system,
            tools,
            prefix,
        ):
            return
        self.session.append(
            RequestHeader.event_type,
            RequestHeader(
                turn=turn.number,
                step=step.number,
                config=config,
                system=system,
                tools=tools,
                prefix=prefix,
            ),
        )

    # --- cancellation -----------------------------------------------------------------------

    def _phase(self) -> trio.CancelScope:
        """A fresh cancel scope for one phase of a turn; ``agent.cancel()`` cancels it."""
        scope = trio.CancelScope()
        self.agent._phase_scope = scope
        if self.agent._cancel_requested():
            scope.cancel()
        return scope
