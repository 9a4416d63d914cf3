"""One child agent for one task: made, given the task, driven to its end, closed.

The child's lifetime is nested in the caller's: :meth:`ChildRun.execute` creates the child
through ``ctx.agents.create`` and holds its :class:`~trio_agent.agent.AgentHandle` in an
``async with``, so when the caller's scope is cancelled (the parent's turn is cancelled, or the
parent is disposed) the child's turn is cancelled (it ends ``aborted``), waited for under the
teardown budget, and the child is closed before the caller's cancellation goes on.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, final

import attrs
import trio

from ..agent import (
    Agent,
    AgentFailed,
    AgentOptions,
    AgentRegistry,
    ContinuationDecision,
    StreamChunkReceived,
    TurnContinuation,
)
from ..ids import AgentId, CallId, SessionId
from ..llm import Usage
from ..prompt import SystemPrompt
from ..runtime import Next
from ..session import (
    AssistantMessageEvent,
    PromptBlocked,
    Session,
    SessionEvent,
    TurnEnd,
)
from ..tools import INVALID_ARGS, TOOL_ERROR, Tool, ToolCallContext, ToolRegistry, error_result
from ._errors import SubagentError
from ._schema import validate
from ._types import (
    START_EVENT,
    SubagentDefinition,
    SubagentMode,
    SubagentNotice,
    SubagentReason,
    SubagentResult,
)

__all__ = ["FINAL_RESULT", "ChildPlan", "ChildRun", "fork_prefix"]

#: The child-only structured-output tool.
FINAL_RESULT = "final_result"
#: The order of the child's own system-prompt section (after the persona, order 0).
_SECTION_ORDER = 50

_REMINDER = (
    "Your task is not finished until you call the final_result tool with your result "
    "(its arguments must match its schema). Call it now."
)


class _Missing(enum.Enum):
    MISSING = "MISSING"


_MISSING = _Missing.MISSING


@attrs.frozen(eq=False)
class ChildPlan:
    """Everything decided before a child exists: who, what, where, and its ids."""

    parent: Agent
    definition: SubagentDefinition
    task: str
    mode: SubagentMode
    schema: Mapping[str, Any] | None
    background: bool
    call_id: CallId | None
    agent_id: AgentId
    session_id: SessionId
    depth: int
    max_depth: int
    options: AgentOptions
    seed: tuple[SessionEvent, ...] | None

    @property
    def meta(self) -> dict[str, Any]:
        """The child session's header metadata (see :func:`~._types.subagent_info`)."""
        parent = self.parent.session
        meta: dict[str, Any] = {
            "subagent": {
                "definition": self.definition.name,
                "parent_agent": self.parent.id,
                "parent_session": parent.id,
                "depth": self.depth,
                "max_depth": self.max_depth,
                "mode": self.mode,
            }
        }
        if parent.header.cwd is not None:
            meta["cwd"] = parent.header.cwd
        if self.mode == "fork":
            meta["parent_session"] = parent.id
        return meta

    def notice(
        self, kind: Literal["started", "progress", "ended"], **fields: Any
    ) -> SubagentNotice:
        """An ``agent/subagent`` payload about this child."""
        return SubagentNotice(
            agent=self.parent,
            kind=kind,
            child_id=self.agent_id,
            session_id=self.session_id,
            definition=self.definition.name,
            mode=self.mode,
            depth=self.depth,
            background=self.background,
            call_id=self.call_id,
            **fields,
        )

    def record_start(self) -> None:
        """Log ``subagent/start`` in the parent's session: the link to the child's session,
        kept even when the call is later aborted. Written inside the parent's call (for a
        background child, when it is started, not when it gets a slot)."""
        session = self.parent.session
        if not session.live:
            return
        session.append(
            START_EVENT,
            {
                "turn": session.last_turn,
                "step": session.open_step,
                "call_id": self.call_id,
                "agent_id": self.agent_id,
                "session_id": self.session_id,
                "definition": self.definition.name,
                "mode": self.mode,
                "background": self.background,
                "depth": self.depth,
            },
        )

    def result(
        self,
        reason: SubagentReason,
        *,
        text: str = "",
        output: object = None,
        usage: Usage | None = None,
        error: str | None = None,
    ) -> SubagentResult:
        """A result about this child (one that never ran, by default: no text, no usage)."""
        return SubagentResult(
            text=text,
            output=output,
            session_id=self.session_id,
            agent_id=self.agent_id,
            definition=self.definition.name,
            reason=reason,
            usage=usage or Usage(),
            error=error,
        )

    def failure(self, what: str) -> str:
        """An error text naming the child and its session."""
        return f'subagent "{self.definition.name}" (session {self.session_id}) {what}'


def fork_prefix(session: Session) -> tuple[SessionEvent, ...]:
    """``session``'s events up to its last closed turn: everything before an open turn's
    ``turn/start`` (all of it when no turn is open)."""
    events = session.events
    boundary = len(events) - 1
    for index in range(boundary, -1, -1):
        kind = events[index].type
        if kind == TurnEnd.event_type:
            break
        if kind == "turn/start":
            boundary = index - 1
            break
    return events[: boundary + 1]


@final
class ChildRun:
    """Runs one :class:`ChildPlan` (package-internal).

    ``agents`` is the registry bound to the sub-agent service's context, so the child is owned
    by that plugin (its scope is a sibling of the parent's: it inherits none of the parent's
    agent-scoped tools, sections or listeners). ``progress`` says whether stream chunks are
    forwarded to the parent as ``agent/subagent`` ``progress`` notices.
    """

    __slots__ = (
        "_agents",
        "_progress",
        "failure",
        "output",
        "plan",
        "reminded",
        "result",
    )

    def __init__(
        self, plan: ChildPlan, agents: AgentRegistry, progress: Callable[[], bool]
    ) -> None:
        self.plan = plan
        self._agents = agents
        self._progress = progress
        #: The accepted ``final_result`` value.
        self.output: object = _MISSING
        #: The step budget ended the turn.
        #: The one reminder to call ``final_result`` was given.
        self.reminded = False
        #: The last ``agent/error`` of the child, for the error text.
        self.failure: BaseException | None = None
        #: Set when the run ends, however it ends (also when it is cancelled).
        self.result: SubagentResult | None = None

    async def execute(self) -> SubagentResult:
        """Create the child, give it the task, wait for the end of its turn, close it.

        Cancellation: the child's turn is cancelled and waited for (shielded, within the
        teardown budget), the child is closed, :attr:`result` says ``aborted``, and the
        cancellation propagates. ``agent/subagent`` ``ended`` is emitted in every case once the
        child exists.

        Raises:
            SubagentError: the child could not be created (the message names its session).
        """
        plan = self.plan
        try:
            handle = await self._agents.create(
                agent_id=plan.agent_id,
                session_id=plan.session_id,
                meta=plan.meta,
                seed=plan.seed,
                agent_options=plan.options,
                setup=self._setup,
            )
        except Exception as exc:
            raise SubagentError(plan.failure(f"could not be started: {exc}")) from exc
        child = handle.agent
        since = len(child.session.events)
        cancelled = False
        try:
            async with handle:
                if not plan.background:
                    plan.record_start()
                plan.parent.ctx.emit("agent/subagent", plan.notice("started"))
                child.send(plan.task)
                try:
                    await child.wait_idle()
                except BaseException:
                    cancelled = True
                    with trio.move_on_after(child.ctx.teardown_timeout) as budget:
                        budget.shield = True
                        child.cancel("the parent's call was cancelled")
                        await child.wait_idle()
                    raise
        finally:
            result = self.result = self._summarise(child.session.events[since:], cancelled)
            plan.parent.ctx.emit(
                "agent/subagent",
                plan.notice("ended", reason=result.reason, usage=result.usage, error=result.error),
            )
        return result

    # --- set-up of the child (before it is published) ----------------------------------------

    def _setup(self, child: Agent) -> None:
        plan, ctx = self.plan, child.ctx
        ctx.require(SystemPrompt).section("subagent", self._section(), order=_SECTION_ORDER)
        tools = ctx.require(ToolRegistry)
        allowed = plan.definition.tools
        if allowed is not None:
            tools.restrict(allow=[name for name in allowed if name != FINAL_RESULT])
        if plan.schema is not None:
            tools.register(self._final_result_tool(plan.schema))
            ctx.on("agent/turn-continuation", self._remind)
        ctx.on("agent/stream-chunk", self._forward)
        ctx.on("agent/error", self._failed)

    def _section(self) -> str:
        plan = self.plan
        parts = [
            f'You are a sub-agent ("{plan.definition.name}") working on one task delegated by '
            "another agent. Your final answer is returned to that agent as the result of its "
            "call, so make it complete and self-contained."
        ]
        if plan.definition.instructions.strip():
            parts.append(plan.definition.instructions.strip())
        if plan.schema is not None:
            parts.append(
                f"Finish by calling the {FINAL_RESULT} tool once, with arguments that match its "
                "schema; your task ends when it is accepted. If it reports a problem, correct "
                "the arguments and call it again."
            )
        return "\n\n".join(parts)

    def _final_result_tool(self, schema: Mapping[str, Any]) -> Tool:
        wrapped = schema.get("type", "object") != "object"
        if wrapped:
            inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
            parameters: dict[str, Any] = {
                "type": "object",
                "properties": {"result": inner},
                "required": ["result"],
                "additionalProperties": False,
            }
            parameters.update((k, v) for k, v in schema.items() if k in ("$defs", "definitions"))
        else:
            parameters = dict(schema)

        async def final_result(arguments: Any, call: ToolCallContext) -> object:
            value = arguments
            if wrapped:
                if not isinstance(arguments, dict) or set(arguments) != {"result"}:
                    return error_result(
                        call.call_id,
                        INVALID_ARGS,
                        f'{FINAL_RESULT} takes exactly one argument, "result"; call it again '
                        "with your result there",
                    )
                value = arguments["result"]
            problems = validate(value, schema)
            if problems:
                return error_result(
                    call.call_id,
                    INVALID_ARGS,
                    f"the result does not match the required schema: {'; '.join(problems)}. "
                    f"Correct it and call {FINAL_RESULT} again.",
                )
            if self.output is not _MISSING:
                return error_result(
                    call.call_id,
                    TOOL_ERROR,
                    f"{FINAL_RESULT} was already accepted in this task; the first result stands",
                )
            self.output = value
            call.conclude_turn()
            return "Result accepted; your task is complete."

        return Tool(
            FINAL_RESULT,
            "Submit the result of your task. Call it once, when you are done; its arguments "
            "are your result and must match this schema.",
            parameters,
            final_result,
        )

    # --- listeners on the child's scope ------------------------------------------------------

    async def _remind(self, payload: TurnContinuation, next: Next) -> object:
        # A model that answers in prose instead of calling final_result gets one reminder.
        decision = await next()
        if (
            isinstance(decision, ContinuationDecision)
            and decision.action == "stop"
            and self.output is _MISSING
            and not self.reminded
        ):
            self.reminded = True
            return ContinuationDecision("continue", reason=_REMINDER)
        return decision

    def _forward(self, payload: StreamChunkReceived) -> None:
        if self._progress():
            self.plan.parent.ctx.emit(
                "agent/subagent", self.plan.notice("progress", chunk=payload.chunk)
            )

    def _failed(self, payload: AgentFailed) -> None:
        self.failure = payload.error

    # --- the outcome --------------------------------------------------------------------------

    def _summarise(self, events: Sequence[SessionEvent], cancelled: bool) -> SubagentResult:
        plan = self.plan
        text = ""
        usage = Usage()
        end: TurnEnd | None = None
        blocked: str | None = None
        for event in events:
            if event.type == AssistantMessageEvent.event_type:
                logged = event.payload_as(AssistantMessageEvent)
                if logged.usage is not None:
                    usage = add_usage(usage, logged.usage)
                if logged.message.text:
                    text = logged.message.text
            elif event.type == TurnEnd.event_type:
                end = event.payload_as(TurnEnd)
            elif event.type == PromptBlocked.event_type:
                blocked = event.payload_as(PromptBlocked).reason
        reason: SubagentReason
        reason = ("aborted" if cancelled else "disposed") if end is None else end.reason
        output = None if self.output is _MISSING else self.output
        error = self._error(reason, end, blocked, missing_output=output is None)
        return plan.result(reason, text=text, output=output, usage=usage, error=error)

    def _error(
        self,
        reason: SubagentReason,
        end: TurnEnd | None,
        blocked: str | None,
        *,
        missing_output: bool,
    ) -> str | None:
        plan = self.plan
        if reason == "completed":
            if plan.schema is not None and missing_output:
                return plan.failure(
                    f"ended its task without calling {FINAL_RESULT}, so it produced no "
                    "structured result"
                )
            return None
        if reason == "max-steps":
            return plan.failure(
                f"stopped after {plan.definition.max_steps} steps (its max_steps) before it "
                "finished"
            )
        if reason == "max-tokens":
            return plan.failure("was cut off by the model's output-token limit")
        if reason == "rejected":
            return plan.failure(f"was refused its task by a prompt policy: {blocked or '?'}")
        if reason == "aborted":
            return plan.failure("was cancelled before it finished")
        if reason == "disposed":
            return plan.failure("was closed before it finished")
        if end is not None and end.error is not None:
            return plan.failure(f"failed: {end.error.code}: {end.error.message}")
        if self.failure is not None:
            detail = f"{type(self.failure).__name__}: {self.failure}"
            return plan.failure(f"failed: {_shorten(detail)}")
        return plan.failure(f"ended {reason}")


def add_usage(a: Usage, b: Usage) -> Usage:
    """The sum of two usages."""
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
        reasoning_tokens=a.reasoning_tokens + b.reasoning_tokens,
    )


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_output(value: object) -> str:
    """Structured output as the JSON text the parent's model reads."""
    return json.dumps(value, ensure_ascii=False)
