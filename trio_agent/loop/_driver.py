"""The loop driver: one agent's whole life, phase by phase, as seed 000 lays it out.

::

    agent/session-start (once)  →  wait for queued (idle)
    turn/start → each queued: agent/prompt-submit → user/message (+ context) | prompt/blocked
      all blocked → turn/end(rejected), no step
      [flush: the prompts are durable]
      STEP: drain steering → assemble prompt → session prefix (first step) → agent/pre-step
            → derive_messages → step/start → agent/request → request/header (if changed)
            → llm.stream → assistant/chunk* → agent/step-result → unique call ids
            → assistant/message → tool/call → tools.execute → tool/result (per call)
              (tools.execute: pre-execute, approval, guards → [flush: write-ahead] → body)
            → context/message
            → drain steering → agent/turn-continuation → agent/turn-stop → step/end
            [flush, when another step follows]
    turn/end(reason) → sessions.flush

The bracketed flushes are the durability points of ``AgentOptions.durability == "step"`` (see
``_durability.py``); with ``"turn"`` only the turn-end flush runs. A failed durability-point
flush ends the turn ``error``; a failed turn-end flush is reported (``agent/error``, the log).

Cancellation: ``agent.cancel()`` cancels the in-flight *phase scope* (the prompt submission, or
the steps: consecutive steps share one scope while no flush runs between them) and sets a marker
the driver checks right after the idle wait, after the running flip, before each step and at the
continuation gate. Because only the phase scope is cancelled, the code that closes an interrupted
step or a turn runs in an uncancelled scope (a step that ended by itself is closed inside its
scope, synchronously); only an outer cancellation (the agent being torn down from outside) needs
the shielded, budgeted cleanup in ``close_turn``.

The driver owns no agent state: it reads and moves it through :class:`~._control.AgentControl`,
and reaches the services once, when the agent is built: the model and the sessions through
views bound to the agent's context, the prompt and the tools through the loop's own views
(:class:`SharedServices`). The loop's ``inject`` keeps them alive, and the loop closes its agents
when it unloads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal, final

import attrs
import trio

from ..agent import (
    Agent,
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
    Finish,
    FinishReason,
    GenerateRequest,
    LlmCallConfig,
    LlmError,
    LlmService,
    Message,
    ToolSchema,
    Usage,
)
from ..prompt import SystemPrompt
from ..session import (
    AssistantMessageEvent,
    ContextMessageEvent,
    PromptBlocked,
    RequestHeader,
    SessionStore,
    SteeringMessageEvent,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from ..tools import ToolRegistry
from ._callids import unique_call_ids
from ._control import AgentControl
from ._durability import Durability
from ._state import StepState, TurnState, continues
from ._toolcalls import ToolCallRunner

__all__ = ["Driver", "SharedServices"]

logger = logging.getLogger("trio_agent.loop")

#: The default continuation decisions (frozen: one of each serves every step).
_CONTINUE = ContinuationDecision("continue")
_STOP = ContinuationDecision("stop")


@final
@attrs.frozen
class SharedServices:
    """What every agent of one loop reaches through the loop's own views (package-internal):
    none of the calls the driver makes on them reads the caller, so one view serves all the
    loop's agents instead of one per agent (#17's memory per agent). The model and the sessions
    stay bound to the agent's context: ``llm/stream`` is aimed at the caller's scope."""

    prompt: SystemPrompt
    tools: ToolRegistry


@final
class Driver:
    """Runs one agent for its whole life (package-internal).

    ``seed_config`` gives the call config each request starts from (before ``agent/request``).
    """

    def __init__(
        self,
        agent: Agent,
        control: AgentControl,
        *,
        source: Literal["startup", "resume"],
        seed_config: Callable[[], LlmCallConfig],
        max_parallel_tool_calls: int,
        shared: SharedServices,
    ) -> None:
        ctx = agent.ctx
        self.agent = agent
        self.control = control
        self.ctx = ctx
        self.session = agent.session
        self.inbox = control.inbox
        self.source: Literal["startup", "resume"] = source
        self.seed_config = seed_config
        self.prompt = shared.prompt
        self.llm = ctx.require(LlmService)
        self.sessions = ctx.require(SessionStore)
        #: The runtime's listener table (``ctx.hears`` is ``name in listening``): the hot
        #: paths test it in place, without a method call each (#17).
        self.listening = ctx.runtime.bus.table
        self.durability = Durability(
            self.sessions, self.session, agent.options.durability, self.listening.__contains__
        )
        self.tools = ToolCallRunner(
            agent,
            shared.tools,
            limit=max_parallel_tool_calls,
            write_ahead=self.durability.write_ahead,
        )
        self.prefix: tuple[Message, ...] | None = None
        #: The session's latest ``request/header`` payload when this driver last found it equal
        #: to what it sends, and what it sent (see ``log_header``).
        self.logged_header: RequestHeader | None = None
        self.logged_key: tuple[object, ...] | None = None

    # --- lifetime ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve turns until the agent closes."""
        control = self.control
        self.ctx.emit("agent/session-start", SessionStart(self.agent, self.source))
        while True:
            control.begin_iteration()  # a cancel governs one turn at most
            if not await control.wait_for_prompts():
                break
            if not control.begin_turn():  # cancelled after the idle wait or the running flip
                continue
            try:
                await self.turn()
            except Exception as exc:
                # Plugin failures end the turn inside turn(); reaching here means the loop's own
                # writes failed (say, the session was detached under it). Never crash the owner.
                logger.error("agent %r: the loop failed", self.agent.id, exc_info=exc)
                self.ctx.emit(
                    "agent/error", AgentFailed(self.agent, self.session.last_turn, 0, exc)
                )
                if not self.session.live:
                    control.request_close()
            control.settle()

    # --- one turn ---------------------------------------------------------------------------

    async def turn(self) -> None:
        state = TurnState(number=self.session.last_turn + 1)
        self.session.append(TurnStart(turn=state.number))
        self.ctx.emit("agent/turn-start", TurnStarted(self.agent, state.number))
        try:
            await self.submit_prompts(state)
            if self.durability.by_step and not state.rejected:
                await self.durability.flush()  # the turn and its prompts are on disk
            await self.steps(state)
        except Exception as exc:
            # Raised while the turn was being cancelled (or closed): the turn still ends aborted
            # (or disposed), which close_turn derives from the same flags, but the error is
            # reported, never dropped (a clean-up that raised during the unwind is a bug).
            if self.control.stopping:
                self._report_unwind_error(state, exc)
            else:
                self._fail(state, exc)
        except BaseException:
            # Cancelled from outside (the agent is being torn down) or KeyboardInterrupt: close
            # the turn as disposed on the way out, then let it propagate.
            state.disposed = True
            raise
        finally:
            await self.close_turn(state)

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
        self.ctx.emit("agent/error", AgentFailed(self.agent, state.number, state.steps, exc))

    def _report_unwind_error(self, state: TurnState, exc: Exception) -> None:
        """Log and announce (``agent/error``) an error that replaced the cancel of a turn; the
        turn's end reason stays the cancel's."""
        what = "closed" if self.control.closing else "cancelled"
        logger.error(
            "agent %r: %s raised while turn %d was being %s",
            self.agent.id,
            type(exc).__name__,
            state.number,
            what,
            exc_info=exc,
        )
        self.ctx.emit("agent/error", AgentFailed(self.agent, state.number, state.steps, exc))

    async def close_turn(self, state: TurnState) -> None:
        """``turn/end`` and the flush (shielded under the teardown budget)."""
        control = self.control
        if control.closing:
            state.disposed = True
        elif control.cancel_requested:
            state.aborted = True
        self.log_injected(state, step=None)
        reason = state.reason()
        failure = state.failure if reason == "error" else None
        self.session.append(TurnEnd(turn=state.number, reason=reason, error=failure))
        self.ctx.emit("agent/turn-end", TurnEnded(self.agent, state.number, reason))
        if self.durability.flushes:
            # The flush is the one await here: shielded under the teardown budget, so a cancel
            # from outside cannot cut it short. With nothing to flush there is nothing to shield
            # (#17: no scope, and no deadline left in trio's heap, per turn).
            with trio.move_on_after(self.ctx.teardown_timeout) as budget:
                budget.shield = True
                await self.flush(state)
            if budget.cancelled_caught:
                logger.error(
                    "agent %r: closing turn %d overran its budget", self.agent.id, state.number
                )
        # cancel() already dropped the steering it found; what is left arrived later.
        if state.keeps_late_steering(closing=control.closing):
            self.inbox.requeue_steering()
        else:
            self.inbox.drop_steering()

    async def flush(self, state: TurnState) -> None:
        """The turn-end flush; a failure is reported (logged, ``agent/error``), not raised."""
        try:
            await self.durability.flush()
        except Exception as exc:
            logger.error(
                "agent %r: flushing the session after turn %d failed",
                self.agent.id,
                state.number,
                exc_info=exc,
            )
            self.ctx.emit("agent/error", AgentFailed(self.agent, state.number, state.steps, exc))

    async def submit_prompts(self, state: TurnState) -> None:
        """``agent/prompt-submit`` for every queued prompt, in order."""
        prompts = self.inbox.take_queued()
        with self.control.phase():
            for message in prompts:

                async def allow() -> PromptDecision:
                    return Allow()

                decision = await self.ctx.waterfall(
                    "agent/prompt-submit", PromptSubmit(self.agent, state.number, message), allow
                )
                if isinstance(decision, Allow):
                    self.session.append(UserMessageEvent(turn=state.number, message=message))
                    for extra in decision.additional_context:
                        self.log_context(state, extra, step=None)
                    state.accepted += 1
                elif isinstance(decision, Block):
                    self.session.append(
                        PromptBlocked(turn=state.number, message=message, reason=decision.reason)
                    )
                else:
                    raise TypeError(
                        f"agent/prompt-submit listener returned {decision!r}; expected "
                        "trio_agent.agent.Allow(...) or Block(reason)"
                    )
        # A cancelled submission ends "aborted" (which outranks "rejected") in close_turn.
        state.rejected = state.accepted == 0

    # --- one step ---------------------------------------------------------------------------

    async def steps(self, turn: TurnState) -> None:
        """Run steps until one says stop or a cancel lands, each step closed however it ends.

        Consecutive steps share one phase scope while nothing between them awaits: with no
        flush to make there, a cancel can only land inside a step, so one scope per run of
        steps behaves as one per step, minus trio's scope enter and exit (#17). A flush that
        has work runs between two phases, where a cancel does not interrupt it (the step
        that ended stays ended; the last one goes out with the turn-end flush).
        """
        control, durability = self.control, self.durability
        # Checked before each step, which is also the continuation gate of the one before.
        while not turn.rejected and not control.cancel_requested:
            flush = False
            step: StepState | None = None
            try:
                with control.phase():
                    while True:
                        turn.steps += 1
                        step = StepState(number=turn.steps)
                        continuing = await self.step_body(turn, step)
                        ended, step = step, None
                        self.close_step(turn, ended)
                        if not continuing or control.cancel_requested:
                            break
                        if durability.by_step and durability.flushes:
                            flush = True
                            break
            finally:
                # A step that raised (a cancel included) is closed outside the scope.
                if step is not None:
                    self.close_step(turn, step)
            if not flush:
                return
            await durability.flush()

    async def step_body(self, turn: TurnState, step: StepState) -> bool:
        agent = self.agent
        self.drain_steering(turn, step=None)
        self.log_injected(turn, step=None)
        # The model stream below is the step's next checkpoint (#17: one schedule point less);
        # the loop only reads the tool schemas, so it takes the registry's shared snapshots.
        assembly = await self.prompt.assemble(agent, checkpoint=False, fresh=False)
        system = self.prompt.render(assembly) or None
        prefix = self.prefix
        if prefix is None:
            prefix = await self.session_prefix()
        ctx = self.ctx
        # Unheard hooks cost their cancellation point only: no payload, no closure (#17).
        if "agent/pre-step" in self.listening:
            await ctx.serial("agent/pre-step", PreStep(agent, turn.number, step.number, prefix))
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        history = self.session.derive_messages()
        self.session.append(StepStart(turn=turn.number, step=step.number))
        step.opened = True
        if "agent/step-start" in self.listening:
            ctx.emit("agent/step-start", StepStarted(agent, turn.number, step.number))

        message, usage, finish = await self.request(
            turn, step, system, assembly.tools, prefix, history
        )
        if "agent/step-result" in self.listening:
            message = await self.step_result(turn, step, message)
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        message = unique_call_ids(message, turn=turn.number, step=step.number)
        self.session.append(
            AssistantMessageEvent(
                turn=turn.number, step=step.number, message=message, finish=finish, usage=usage
            )
        )
        step.assembler = None
        if finish == "max-tokens":
            turn.max_tokens = True
        elif calls := message.tool_calls:
            await self.tools.run(turn, step, calls)
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
        attempt = 0
        while True:
            if "agent/request" in self.listening:
                config = await self.request_config(turn, step)
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
                config = self.seed_config()
            self.log_header(turn, step, config, system, tools, prefix)
            request = GenerateRequest(
                config=config,
                messages=prefix + tuple(history) if prefix else history,
                system=system,
                tools=tools,
                session_id=self.session.id,
            )
            assembler = await self.stream(turn, step, request)
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
                RequestFailed(self.agent, turn.number, step.number, config, failure, attempt),
                give_up,
            )
            if isinstance(decision, Retry) and not self.control.cancel_requested:
                # A listener may have changed the history (a compaction): send what it is now.
                history = self.session.derive_messages()
                continue
            if decision is not None and not isinstance(decision, Retry):
                raise TypeError(
                    f"agent/request-error listener returned {decision!r}; expected Retry() or None"
                )
            raise LlmError(failure)

    async def request_config(self, turn: TurnState, step: StepState) -> LlmCallConfig:
        """``agent/request`` on the seed config (heard: ``request`` takes the seed itself when
        nobody listens)."""
        seed = self.seed_config()

        async def keep_seed() -> LlmCallConfig:
            return seed

        config = await self.ctx.waterfall(
            "agent/request", RequestConfig(self.agent, turn.number, step.number, seed), keep_seed
        )
        if not isinstance(config, LlmCallConfig):
            raise TypeError(
                f"agent/request listener returned {config!r}; expected an LlmCallConfig"
            )
        return config

    async def stream(
        self, turn: TurnState, step: StepState, request: GenerateRequest
    ) -> BlockAssembler:
        """``llm.stream``: log and announce every chunk, and fold them into a message."""
        assembler = BlockAssembler()
        step.assembler = assembler
        async with self.llm.stream(request) as chunks:
            ctx = self.ctx
            append = self.session.append_chunk
            feed = assembler.feed
            number, step_number = turn.number, step.number
            receive = chunks.receive
            listening = self.listening
            while True:
                try:
                    chunk = await receive()
                except trio.EndOfChannel:  # never, while ctx.llm keeps its contract
                    break
                append(number, step_number, chunk)
                # Build the notification only when someone listens (#17).
                if "agent/stream-chunk" in listening:
                    ctx.emit(
                        "agent/stream-chunk",
                        StreamChunkReceived(self.agent, number, step_number, chunk),
                    )
                feed(chunk)
                if isinstance(chunk, Finish):
                    # Nothing follows a Finish (ctx.llm's contract): leave without the
                    # end-of-channel receive and its schedule point (#17).
                    break
        return assembler

    async def step_result(self, turn: TurnState, step: StepState, message: Message) -> Message:
        """``agent/step-result`` (heard: ``step_body`` takes the message as it is when nobody
        listens); the caller then makes the tool-call ids unique (what the log records)."""

        async def keep() -> Message:
            return message

        result = await self.ctx.waterfall(
            "agent/step-result", StepResult(self.agent, turn.number, step.number, message), keep
        )
        if not isinstance(result, Message):
            raise TypeError(f"agent/step-result listener returned {result!r}; expected a Message")
        return result

    async def continuation(
        self, turn: TurnState, step: StepState, message: Message, finish: str
    ) -> bool:
        """Steering drain, ``agent/turn-continuation`` and ``agent/turn-stop``."""
        agent, ctx = self.agent, self.ctx
        steered = self.drain_steering(turn, step=step.number)
        default = _CONTINUE if step.wants_more(finish) else _STOP
        if "agent/turn-continuation" in self.listening:

            async def keep_default() -> ContinuationDecision:
                return default

            decision = await ctx.waterfall(
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
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
            decision = default
        if decision.action == "continue" and decision.reason:
            note = Message.user(decision.reason, source="steering")
            self.session.append(
                SteeringMessageEvent(turn=turn.number, step=step.number, message=note)
            )
        continuing = continues(
            decision.action, steered=steered, pending_steering=bool(self.inbox.steering)
        )
        limit = agent.options.max_steps
        if continuing and limit is not None and step.number >= limit:
            # The step's tool calls are answered already; the turn ends max-steps.
            turn.max_steps = True
            continuing = False
        if "agent/turn-stop" not in self.listening:
            await trio.lowlevel.checkpoint_if_cancelled()
            return continuing
        stop = await ctx.serial(
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
        if step.assembler is not None and self.control.stopping:
            partial = step.assembler.interrupted_message()
            if partial is not None:
                self.session.append(
                    AssistantMessageEvent(
                        turn=turn.number,
                        step=step.number,
                        message=partial,
                        finish="aborted",
                        usage=step.assembler.usage,
                        interrupted=True,
                    )
                )
        step.assembler = None
        self.tools.close(turn, step)
        self.log_step_contexts(turn, step)
        self.session.append(StepEnd(turn=turn.number, step=step.number))
        if "agent/step-end" in self.listening:
            self.ctx.emit("agent/step-end", StepEnded(self.agent, turn.number, step.number))

    # --- logging helpers --------------------------------------------------------------------

    def drain_steering(self, turn: TurnState, *, step: int | None) -> int:
        """Log every pending steering message; return how many there were."""
        messages = self.inbox.take_steering()
        for message in messages:
            self.session.append(SteeringMessageEvent(turn=turn.number, step=step, message=message))
            self.ctx.emit("agent/steering", SteeringInjected(self.agent, message))
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
        self.session.append(ContextMessageEvent(turn=turn.number, step=step, message=message))

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
        key = (config, system, tools, prefix)
        if last is not None:
            if last is self.logged_header and key == self.logged_key:
                # The session's latest header is the one this driver logged from ``key``: the
                # shared tool schemas compare by identity, not by walking their JSON (#17).
                return
            if (last.config, last.system, last.tools, last.prefix) == key:
                self.logged_header, self.logged_key = last, key
                return
        self.session.append(
            RequestHeader(
                turn=turn.number,
                step=step.number,
                config=config,
                system=system,
                tools=tools,
                prefix=prefix,
            )
        )
