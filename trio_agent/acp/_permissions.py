"""Permissions: ``session/request_permission`` as trio-agent's approval service.

Two parts, so the core's approval protocol can change without touching the ACP side:

* :class:`PermissionBridge` asks the client one :class:`PermissionQuestion` and returns a
  :class:`PermissionAnswer`. It offers *allow once*, *allow always* and *reject*, remembers an
  *allow always* for that tool in that session, and treats a cancelled or failed request as a
  rejection. A cancelled turn cancels the wait (trio), and a late answer is ignored.
* :class:`AcpApprovalService` is the object provided as ``ctx.approval``: it adapts the core's
  approval seam to the bridge. Today that seam is ``request(execution, reason) -> bool``; when it
  becomes ``request(ApprovalRequest) -> Approved | Denied`` only this adapter changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, final

import attrs

from ..tools import ApprovalRequest, Approved, Denied
from ._errors import ConnectionClosedError, RpcError
from ._jsonrpc import JsonRpcPeer

__all__ = ["AcpApprovalService", "PermissionAnswer", "PermissionBridge", "PermissionQuestion"]

logger = logging.getLogger("trio_agent.acp")

_OPTIONS = (
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow this tool", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
)


@attrs.frozen
class PermissionQuestion:
    """One tool call waiting for the user's permission."""

    agent_id: str
    call_id: str
    tool: str
    arguments: str
    reason: str | None = None


@attrs.frozen
class PermissionAnswer:
    """The user's answer: ``allowed``; ``remember`` when it holds for the rest of the session;
    ``reason`` says why a call was not allowed."""

    allowed: bool
    remember: bool = False
    reason: str | None = None


class AskingSession(Protocol):
    """What the bridge needs of an ACP session."""

    @property
    def session_id(self) -> str:
        """The ACP ``sessionId``."""
        ...

    def describe_call(self, call_id: str, tool: str, arguments: str) -> dict[str, Any]:
        """The ``toolCall`` fields of a permission request for this call."""
        ...


@final
class PermissionBridge:
    """Asks the ACP client for permission, per session (found by agent id with ``lookup``)."""

    def __init__(self, peer: JsonRpcPeer, lookup: Callable[[str], AskingSession | None]) -> None:
        self._peer = peer
        self._lookup = lookup
        self._always: set[tuple[str, str]] = set()

    def forget(self, session_id: str) -> None:
        """Drop what was remembered for ``session_id`` (it closed)."""
        self._always = {key for key in self._always if key[0] != session_id}

    async def ask(self, question: PermissionQuestion) -> PermissionAnswer:
        """Ask the client about ``question``; never raises for a client-side problem."""
        session = self._lookup(question.agent_id)
        if session is None:
            return PermissionAnswer(
                False, reason=f"agent {question.agent_id!r} has no ACP session to ask"
            )
        if (session.session_id, question.tool) in self._always:
            return PermissionAnswer(True, remember=True)
        params = {
            "sessionId": session.session_id,
            "toolCall": session.describe_call(question.call_id, question.tool, question.arguments),
            "options": [dict(option) for option in _OPTIONS],
        }
        try:
            result = await self._peer.request("session/request_permission", params)
        except (RpcError, ConnectionClosedError) as exc:
            logger.warning(
                "permission request for tool call %s failed (%s); the call is rejected",
                question.call_id,
                exc,
            )
            return PermissionAnswer(False, reason=f"the client could not be asked: {exc}")
        return self._answer(session.session_id, question, result)

    def _answer(
        self, session_id: str, question: PermissionQuestion, result: Any
    ) -> PermissionAnswer:
        outcome = result.get("outcome") if isinstance(result, dict) else None
        kind = outcome.get("outcome") if isinstance(outcome, dict) else None
        if kind == "cancelled":
            return PermissionAnswer(False, reason="the permission request was cancelled")
        option = (
            outcome.get("optionId") if isinstance(outcome, dict) and kind == "selected" else None
        )
        if option == "allow_once":
            return PermissionAnswer(True)
        if option == "allow_always":
            self._always.add((session_id, question.tool))
            return PermissionAnswer(True, remember=True)
        if option != "reject_once":
            logger.warning(
                "the client answered the permission request for %s with %.200r; "
                "treated as a rejection",
                question.call_id,
                result,
            )
        return PermissionAnswer(False, reason="the user rejected the call")


@final
class AcpApprovalService:
    """``ctx.approval`` for an ACP connection: every approval the tool pipeline asks for (a
    ``tools/pre-execute`` policy answering ``Ask``) becomes a ``session/request_permission``."""

    def __init__(self, bridge: PermissionBridge) -> None:
        self._bridge = bridge

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        """Ask the client whether the call may run; ACP ``allow_always`` answers
        ``Approved(remember="session")``."""
        if request.agent is None:
            return Denied("no agent made this call, so there is no ACP session to ask")
        answer = await self._bridge.ask(
            PermissionQuestion(
                agent_id=request.agent,
                call_id=request.call_id,
                tool=request.tool,
                arguments=request.arguments,
                reason=request.reason,
            )
        )
        if answer.allowed:
            return Approved(remember="session" if answer.remember else "once")
        return Denied(answer.reason)
