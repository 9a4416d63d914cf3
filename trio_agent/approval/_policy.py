"""``ApprovalPolicy``: the pinned defaults, ``tools.approval`` and remembered answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, final

import attrs

from ..runtime import Context
from ..session import ApprovalDecisionEvent, ApprovalRequestEvent, Session, SessionEvent
from ..tools import Allow, ApprovalNotice, Approved, Ask, Deny, PreExecuteDecision, ToolExecution

__all__ = ["EFFECTFUL_BUILTINS", "ApprovalPolicy"]

#: The built-in tools with effects: asked about everywhere unless configured otherwise.
EFFECTFUL_BUILTINS = frozenset({"write_file", "edit_file", "shell"})


@final
class ApprovalPolicy:
    """Plugin: answer ``tools/pre-execute`` with ``Allow()``, ``Deny(reason)`` or ``Ask(reason)``.

    Order: a ``read_only`` tool is never asked; a tool named in ``deny`` is denied, one in
    ``exempt`` (the sub-agent tools by default) or ``allow`` (or remembered for the agent's session through ``Approved(remember="session")``)
    is allowed; otherwise ``default`` decides. With ``default`` unset the pinned defaults
    apply: ``write_file``, ``edit_file`` and ``shell`` are asked about; any other tool with
    effects is allowed in ``mode="library"`` and asked about in ``mode="cli"``.
    """

    @attrs.frozen
    class Config:
        """``tools.approval``: ``default`` (ask | allow | deny, or unset for the pinned
        defaults), ``allow`` / ``deny`` tool names, and the ``mode`` the defaults are for."""

        default: Literal["ask", "allow", "deny"] | None = None
        allow: tuple[str, ...] = ()
        deny: tuple[str, ...] = ()
        mode: Literal["library", "cli"] = "library"
        #: Tools never asked about (unless in ``deny``): by default the sub-agent tools, whose
        #: own effects are the child's tool calls, each asked about under the child's id.
        exempt: tuple[str, ...] = ("subagent", "subagent_wait", "subagent_status")

    def __init__(self, ctx: Context, config: ApprovalPolicy.Config | None = None) -> None:
        self.config = config or ApprovalPolicy.Config()
        #: (agent id, tool) pairs allowed for the rest of the session.
        self.remembered: set[tuple[str | None, str]] = set()
        #: (agent id, session id) pairs whose logged decisions were read back.
        self._restored: set[tuple[str, str]] = set()
        ctx.on("tools/pre-execute", self._on_pre_execute)
        ctx.on("approval/decision", self._on_decision)

    def remember(self, agent: str | None, tool: str) -> None:
        """Allow ``tool`` for ``agent``'s session without asking (a resumed session's log)."""
        self.remembered.add((agent, tool))

    def restore(self, agent: str | None, events: Iterable[SessionEvent]) -> None:
        """Remember every tool ``events`` (a session's log) records as approved for the session.

        A resumed session (loaded in another process or harness) keeps its
        ``Approved(remember="session")`` answers: each ``approval/decision`` with
        ``remember="session"`` is matched to its ``approval/request`` for the tool name.
        """
        asked: dict[tuple[int, int, str], str] = {}
        for event in events:
            if event.type == ApprovalRequestEvent.event_type:
                request = event.payload_as(ApprovalRequestEvent)
                asked[(request.turn, request.step, request.call_id)] = request.tool
            elif event.type == ApprovalDecisionEvent.event_type:
                decision = event.payload_as(ApprovalDecisionEvent)
                if decision.decision != "approved" or decision.remember != "session":
                    continue
                tool = asked.get((decision.turn, decision.step, decision.call_id))
                if tool is not None:
                    self.remember(agent, tool)

    def decide(self, execution: ToolExecution) -> PreExecuteDecision:
        """The decision for one call (see the class docstring)."""
        name = execution.name
        tool = execution.tool
        if tool is not None and tool.read_only:
            return Allow()
        if name in self.config.deny:
            return Deny(f'tool "{name}" is denied by tools.approval')
        if name in self.config.exempt:
            return Allow()
        agent = execution.agent.id if execution.agent is not None else None
        # A loop agent carries its session (a bare ``AgentLike`` test double need not): read its
        # log back once per agent and session, so a resumed session keeps its answers.
        session = getattr(execution.agent, "session", None)
        if agent is not None and isinstance(session, Session):
            key = (agent, session.id)
            if key not in self._restored:
                self._restored.add(key)
                self.restore(agent, session.events)
        if name in self.config.allow or (agent, name) in self.remembered:
            return Allow()
        default = self.config.default
        if default is None:
            asked = name in EFFECTFUL_BUILTINS or self.config.mode == "cli"
            default = "ask" if asked else "allow"
        if default == "allow":
            return Allow()
        if default == "deny":
            return Deny(f'tool "{name}" is denied by tools.approval (default: deny)')
        return Ask(f"{name} may have effects")

    async def _on_pre_execute(
        self, execution: ToolExecution, next: Callable[[], Awaitable[object]]
    ) -> object:
        decision = self.decide(execution)
        if isinstance(decision, Allow):
            return await next()
        return decision

    def _on_decision(self, notice: ApprovalNotice) -> None:
        answer = notice.answer
        if isinstance(answer, Approved) and answer.remember == "session":
            self.remember(notice.request.agent, notice.request.tool)
