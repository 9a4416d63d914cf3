"""The tools vocabulary: tool definitions, invocations, pipeline payloads and decisions."""

from __future__ import annotations

import copy
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias, TypeGuard, final

import attrs

from .._deprecate import warn_deprecated
from ..ids import CallId
from ..llm import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResult,
    ToolResultBlock,
    ToolSchema,
)
from ..runtime import Context, Scope, ServiceKey
from ._arguments import copy_json_object
from ._errors import ToolDefinitionError

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL",
    "DENIED",
    "INVALID_ARGS",
    "TOOL_ERROR",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "Accept",
    "AgentLike",
    "Allow",
    "ApprovalAnswer",
    "ApprovalNotice",
    "ApprovalRequest",
    "ApprovalService",
    "Approved",
    "Ask",
    "Block",
    "Denied",
    "Deny",
    "PostExecute",
    "PostExecuteDecision",
    "PreExecuteDecision",
    "Tool",
    "ToolBody",
    "ToolCallContext",
    "ToolChange",
    "ToolExecution",
    "ToolInvocation",
    "ToolResultNotice",
    "aborted_result",
    "as_content",
    "error_result",
]

# --- error codes ------------------------------------------------------------------------------

#: The tool is not registered, or not visible to the calling agent (scoped elsewhere, restricted).
UNKNOWN_TOOL = "UNKNOWN_TOOL"
#: The arguments were not a JSON object, or did not validate against the tool's parameters.
INVALID_ARGS = "INVALID_ARGS"
#: A pre-execute policy, the approval service, a guard, or a post-execute ``Block`` refused it.
DENIED = "DENIED"
#: The body raised, or a pipeline listener / guard / approval service failed.
TOOL_ERROR = "TOOL_ERROR"
#: The call was cancelled after its body had started.
ABORTED = "ABORTED"
#: The call was cancelled before its body started.
ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
#: The body overran the tool's ``timeout``.
TOOL_TIMEOUT = "TOOL_TIMEOUT"
#: Crash repair's result for a call of a tool with effects that had started when the process
#: stopped: it may or may not have taken effect (written by
#: :func:`trio_agent.session.repair_closers`, which spells the same code).
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"


# --- the agent, as far as tools care ----------------------------------------------------------


class AgentLike(Protocol):
    """What the tools package needs of an agent: its id and its scoped context.

    Any object with these two attributes works (the loop's agents, or a tiny test double); the
    agent's scope (``agent.ctx.scope``) decides which tools, guards, restrictions and listeners
    apply to its calls.
    """

    @property
    def id(self) -> str:
        """The agent's id."""
        ...

    @property
    def ctx(self) -> Context:
        """The agent's scoped context."""
        ...


# --- tools ------------------------------------------------------------------------------------

#: A tool body: ``await body(arguments, call)``. ``arguments`` is an instance of the tool's
#: ``arguments_type`` (or the parsed JSON object when it has none); the return value is rendered
#: into the result's content (see :meth:`ToolRegistry.execute`).
ToolBody: TypeAlias = Callable[[Any, "ToolCallContext"], Awaitable[object]]

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_name(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or _TOOL_NAME.fullmatch(value) is None:
        raise ToolDefinitionError(
            f"invalid tool name {value!r}: expected 1-64 characters from [A-Za-z0-9_-] "
            "(model APIs reject anything else); pass name=... to choose another"
        )


def _check_timeout(_: object, __: object, value: float | None) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ToolDefinitionError(
            f"invalid tool timeout {value!r}: expected a positive, finite number of seconds, "
            "or None for no timeout"
        )


def _copy_parameters(value: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping) or value.get("type", "object") != "object":
        raise ToolDefinitionError(
            f"invalid tool parameters {value!r}: expected a JSON schema of type 'object' "
            '(for example {"type": "object", "properties": {...}})'
        )
    return copy.deepcopy(dict(value))


@attrs.frozen
class Tool:
    """A tool: what the model sees (name, description, JSON-schema parameters) plus the body.

    Build one with the :func:`tool` decorator, or by hand::

        async def body(arguments, call):
            return arguments["text"].upper()

        shout = Tool("shout", "Upper-case a text.", {"type": "object", ...}, body)

    A hand-made tool without ``arguments_type`` receives the parsed JSON object unvalidated; with
    an attrs class as ``arguments_type`` the arguments are structured into it (strictly) first.

    Attributes:
        timeout: Seconds the body may run before the call ends ``TOOL_TIMEOUT``; None for none.
        concurrency_safe: Whether the loop may run this tool in parallel with other safe calls.
        read_only: Whether the body has no effects outside the call (it only reads). A read-only
            call needs no write-ahead flush before it runs, and crash repair tells the model it
            is safe to run again; any other call is treated as one that may have effects.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    parameters: Mapping[str, Any] = attrs.field(converter=_copy_parameters, hash=False)
    body: ToolBody = attrs.field(repr=False)
    timeout: float | None = attrs.field(default=None, validator=_check_timeout)
    concurrency_safe: bool = False
    arguments_type: type | None = attrs.field(default=None, repr=False)
    read_only: bool = False

    @property
    def schema(self) -> ToolSchema:
        """A fresh :class:`~trio_agent.llm.ToolSchema` (a deep copy of the parameters)."""
        return ToolSchema(self.name, self.description, copy_json_object(self.parameters))


@final
@attrs.define(eq=False)
class ToolCallContext:
    """Per-call handle a tool body can ask for with a keyword-only parameter of this type.

    ``defer_context(message)`` queues a message the loop adds to the conversation after the
    tool result (the result's ``additional_context``); ``conclude_turn()`` asks the loop not to
    make another model request in this turn (the result's ``concludes_turn``).
    """

    call_id: CallId
    name: str
    agent: AgentLike | None = None
    _deferred: list[Message] = attrs.field(factory=list, init=False)
    _concludes: bool = attrs.field(default=False, init=False)

    def defer_context(self, message: Message | str) -> None:
        """Add ``message`` (a str becomes a user message with source ``"context"``)."""
        if isinstance(message, str):
            message = Message.user(message, source="context")
        elif not isinstance(message, Message):
            raise TypeError(
                f"defer_context() takes a Message or a str, got {type(message).__name__}"
            )
        self._deferred.append(message)

    def conclude_turn(self) -> None:
        """Ask the loop to end the turn after this step's tool results."""
        self._concludes = True

    @property
    def deferred(self) -> tuple[Message, ...]:
        """The messages deferred so far, in order."""
        return tuple(self._deferred)

    @property
    def concludes_turn(self) -> bool:
        """Whether :meth:`conclude_turn` was called."""
        return self._concludes


# --- invocations and pipeline payloads --------------------------------------------------------


@attrs.frozen
class ToolInvocation:
    """One call to execute: the model's call id, the tool name, the raw JSON arguments text and
    the agent making it (``None`` for a call outside any agent, which sees only global tools).

    ``before_effects`` is the caller's hook right before the body of a tool that may have
    effects (``read_only=False``) runs: after ``tools/pre-execute``, approval, the guards and
    argument validation allowed the call, with nothing in between. The loop makes the call's
    ``tool/call`` durable there (write-ahead). If it raises, the body does not run,
    ``tools/result`` records ``ABORTED_BEFORE_DISPATCH`` and the exception propagates from
    :meth:`ToolRegistry.execute <trio_agent.tools.ToolRegistry.execute>` (it is the caller's
    failure, not the tool's); ``tools/execute`` listeners cannot turn it into a result.
    """

    call_id: CallId
    name: str
    arguments: str
    agent: AgentLike | None = None
    before_effects: Callable[[], Awaitable[None]] | None = attrs.field(
        default=None, eq=False, repr=False
    )
    #: Called with the ``approval/request`` and ``approval/decision`` notices of this call
    #: (before the body runs); the loop logs them as session events.
    on_approval: Callable[[ApprovalNotice], None] | None = attrs.field(
        default=None, eq=False, repr=False
    )

    @classmethod
    def from_block(cls, block: ToolCallBlock, agent: AgentLike | None = None) -> ToolInvocation:
        """The invocation for a model's :class:`~trio_agent.llm.ToolCallBlock`."""
        return cls(block.id, block.name, block.arguments, agent)


@attrs.frozen
class ToolExecution:
    """The payload of ``tools/pre-execute``, the guards and ``tools/execute``.

    Attributes:
        call_id: The authoritative call id; the final result always carries it.
        name: The tool name the model asked for (it may be unknown).
        arguments: The raw JSON arguments text, as the model wrote it.
        parsed_arguments: The parsed JSON object (a private copy), or None when the text is
            not a JSON object. It is not validated against the tool's schema yet.
        agent: The calling agent, or None.
        tool: The tool visible to that agent under ``name`` when the call began, or None.
    """

    call_id: CallId
    name: str
    arguments: str
    parsed_arguments: Mapping[str, Any] | None = attrs.field(hash=False)
    agent: AgentLike | None
    tool: Tool | None


@attrs.frozen
class PostExecute:
    """The payload of ``tools/post-execute``: the execution and its (call-id-fixed) result."""

    execution: ToolExecution
    result: ToolResult


@attrs.frozen
class ToolResultNotice:
    """The payload of ``tools/result`` (emit): the final result of one call, for the record."""

    execution: ToolExecution
    result: ToolResult


@attrs.frozen
class ToolChange:
    """The payload of ``tools/change`` (emit): a tool was registered or unregistered in a layer
    (``scope`` None for the global layer)."""

    action: Literal["register", "unregister"]
    tool: Tool
    scope: Scope | None


# --- decisions --------------------------------------------------------------------------------


@attrs.frozen
class Allow:
    """Pre-execute decision: let the call proceed (to the guards)."""


@attrs.frozen
class Deny:
    """Pre-execute decision: refuse the call; the result is ``DENIED`` with ``Error: <reason>``."""

    reason: str


@attrs.frozen
class Ask:
    """Pre-execute decision: ask the ``approval`` service. Without one, the call is denied."""

    reason: str | None = None


_BLOCK_TYPES = (TextBlock, ReasoningBlock, ImageBlock, ToolCallBlock, ToolResultBlock)


def is_content_block(value: object) -> TypeGuard[ContentBlock]:
    """Whether ``value`` is one of the :data:`~trio_agent.llm.ContentBlock` classes."""
    return isinstance(value, _BLOCK_TYPES)


def as_content(
    value: str | ContentBlock | tuple[ContentBlock, ...] | list[ContentBlock],
) -> tuple[ContentBlock, ...]:
    """Normalise a str, a content block, or a sequence of blocks into a content tuple."""
    if isinstance(value, str):
        return (TextBlock(value),)
    if is_content_block(value):
        return (value,)
    if isinstance(value, tuple | list) and all(map(is_content_block, value)):
        return tuple(value)
    raise TypeError(
        f"expected a str, a content block or a sequence of content blocks, got {value!r}"
    )


def _optional_content(
    value: str | ContentBlock | tuple[ContentBlock, ...] | list[ContentBlock] | None,
) -> tuple[ContentBlock, ...] | None:
    return None if value is None else as_content(value)


@attrs.frozen
class Accept:
    """Post-execute decision: keep the result; with ``content``, replace its content (a str, a
    block or blocks). Everything else about the result (error flag, code, context) is kept."""

    content: tuple[ContentBlock, ...] | None = attrs.field(
        default=None, converter=_optional_content
    )


@attrs.frozen
class Block:
    """Post-execute decision: replace the result with an error (code ``DENIED``) whose content is
    ``feedback``; the tool's deferred context and its ``conclude_turn`` request are dropped."""

    feedback: str


#: What a ``tools/pre-execute`` listener returns.
PreExecuteDecision: TypeAlias = Allow | Deny | Ask
#: What a ``tools/post-execute`` listener returns.
PostExecuteDecision: TypeAlias = Accept | Block


@attrs.frozen
class ApprovalRequest:
    """What the ``approval`` service is asked: may this tool call run?

    Attributes:
        agent: The id of the agent making the call (``None`` outside any agent).
        call_id: The call's id.
        tool: The tool name.
        arguments: The raw JSON arguments text, as the model wrote it (untrusted).
        reason: The pre-execute policy's explanation, if any.
        read_only: Whether the tool declares it has no effects.
    """

    agent: str | None
    call_id: CallId
    tool: str
    arguments: str
    reason: str | None = None
    read_only: bool = False


@attrs.frozen
class Approved:
    """An approval answer: the call may run. ``remember="session"`` allows this tool for the
    rest of the session without asking again (recorded in the log, so a resumed session
    remembers it)."""

    remember: Literal["once", "session"] = "once"


@attrs.frozen
class Denied:
    """An approval answer: the call must not run; ``reason`` goes to the model."""

    reason: str | None = None


#: What :meth:`ApprovalService.request` returns.
ApprovalAnswer: TypeAlias = Approved | Denied


class ApprovalService(Protocol):
    """The optional ``approval`` service (key :data:`APPROVAL`) consulted when a pre-execute
    policy answers :class:`Ask`.

    .. note:: A service whose ``request(execution, reason)`` returns a bool keeps working for
       one release, with a deprecation warning (``True`` → ``Approved()``, ``False`` →
       ``Denied()``).
    """

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        """Answer ``request``. Cancellation: the call is cancelled with the turn; the tool
        then records ``ABORTED_BEFORE_DISPATCH``."""
        ...


@attrs.frozen
class ApprovalNotice:
    """The payload of the ``approval/request`` (``answer`` None) and ``approval/decision``
    hooks the registry emits around the approval service, before the tool body runs."""

    request: ApprovalRequest
    answer: Approved | Denied | None = None
    #: Who answered: the approval service's class name (``None`` on the request).
    by: str | None = None


#: The end of the deny reason when a policy answers ``Ask`` and no approval service is mounted.
NO_APPROVAL_SERVICE = (
    "no approval service is mounted; allow it with --yes or --allow TOOL (CLI), "
    "a tools.approval allow entry (config), or mount an approval service (key APPROVAL)"
)


def _legacy_signature(service: object) -> bool:
    """Whether ``service.request`` takes the old ``(execution, reason)`` pair."""
    try:
        params = inspect.signature(service.request).parameters.values()  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


async def request_approval(
    service: ApprovalService, request: ApprovalRequest, execution: ToolExecution
) -> Approved | Denied:
    """Ask ``service`` about ``request`` and return its answer as :class:`Approved` / :class:`Denied`.

    The one place the legacy seam is kept: a service whose ``request`` takes
    ``(execution, reason)`` and/or returns a bool still works, with one
    :class:`~trio_agent.TrioAgentDeprecationWarning` per call.

    Raises:
        TypeError: The service answered something else.
    """
    legacy: Any = service
    old_signature = _legacy_signature(service)
    if old_signature:
        answer: object = await legacy.request(execution, request.reason)
    else:
        answer = await service.request(request)
    if old_signature or isinstance(answer, bool):
        warn_deprecated(
            "an approval service taking (execution, reason) or returning a bool",
            "0.1.0",
            replacement="request(ApprovalRequest) -> Approved() | Denied(reason)",
            issue=14,
            stacklevel=2,
        )
    if isinstance(answer, bool):
        return Approved() if answer else Denied()
    if isinstance(answer, Approved | Denied):
        return answer
    raise TypeError(f"request() returned {answer!r}; expected Approved() or Denied(reason)")


#: The typed key of the optional ``ctx.approval`` service: ``ctx.get(APPROVAL)``.
APPROVAL: ServiceKey[ApprovalService] = ServiceKey("approval")


# --- results ----------------------------------------------------------------------------------


def error_result(
    call_id: CallId,
    code: str,
    message: str,
    *,
    additional_context: tuple[Message, ...] = (),
) -> ToolResult:
    """An error :class:`~trio_agent.llm.ToolResult` whose content is ``Error: <message>``."""
    return ToolResult(
        call_id,
        (TextBlock(f"Error: {message}"),),
        is_error=True,
        code=code,
        additional_context=additional_context,
    )


def aborted_result(call_id: CallId, started: bool) -> ToolResult:
    """The result recorded for a call cancelled after (``ABORTED``) or before
    (``ABORTED_BEFORE_DISPATCH``) its body started. The loop uses it for calls it never ran."""
    if started:
        return error_result(call_id, ABORTED, "tool call aborted")
    return error_result(call_id, ABORTED_BEFORE_DISPATCH, "tool call aborted before dispatch")
