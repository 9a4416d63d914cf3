"""The sub-agent vocabulary: definitions, requests, results and the ``agent/subagent`` payload."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ..agent import Agent, TurnEndReason
from ..ids import AgentId, CallId, SessionId
from ..llm import StreamChunk, Usage
from ..session import Session, SessionEvent
from ._errors import SubagentConfigError, SubagentError, SubagentSchemaError
from ._schema import check_schema

__all__ = [
    "START_EVENT",
    "SubagentDefinition",
    "SubagentInfo",
    "SubagentLink",
    "SubagentMode",
    "SubagentNotice",
    "SubagentReason",
    "SubagentRequest",
    "SubagentResult",
    "SubagentState",
    "SubagentStatus",
    "subagent_info",
    "subagent_links",
]

#: The session event a parent's log records when it starts a child (the link to its session).
START_EVENT = "subagent/start"

#: ``"spawn"``: the child starts on a fresh session; ``"fork"``: it starts from a copy of the
#: parent's log up to the parent's last closed turn.
SubagentMode: TypeAlias = Literal["spawn", "fork"]

#: How a child's run ended: its turn's end reason, ``"max-steps"`` when its step budget stopped
#: it, or ``"running"`` for a background child that was just started.
SubagentReason: TypeAlias = TurnEndReason | Literal["max-steps", "running"]

#: A background child's state: waiting for a slot, running, or done (its result is kept).
SubagentState: TypeAlias = Literal["pending", "running", "done"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _check_name(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise SubagentConfigError(
            f"got {value!r}; expected 1-64 characters from [A-Za-z0-9_-], starting with a letter "
            "or digit (it becomes part of the child's agent and session ids)",
            key=attribute.name,
        )


def _check_text(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise SubagentConfigError(f"got {value!r}; expected a non-empty string", key=attribute.name)


def _check_instructions(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise SubagentConfigError(
            f"got {type(value).__name__}; expected a string", key=attribute.name
        )


def _check_optional_text(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        _check_text(_, attribute, value)


def _tool_names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise SubagentConfigError(
            f"got the string {value!r}; expected a list of tool names", key="tools"
        )
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or _TOOL_NAME.fullmatch(name) is None:
            raise SubagentConfigError(
                f"got {name!r}; expected tool names of 1-64 characters from [A-Za-z0-9_-]",
                key="tools",
            )
    return names


def _check_steps(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SubagentConfigError(f"got {value!r}; expected a positive integer", key=attribute.name)


def output_schema(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A private, checked copy of an output schema (``None`` stays ``None``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SubagentSchemaError(
            f"an output schema must be a JSON schema object, got {type(value).__name__}"
        )
    copied = copy.deepcopy(dict(value))
    check_schema(copied)
    return copied


def _definition_schema(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    try:
        return output_schema(value)
    except SubagentSchemaError as exc:
        raise SubagentConfigError(str(exc), key="output_schema") from None


@attrs.frozen
class SubagentDefinition:
    """A kind of child agent the parent can delegate to.

    Attributes:
        name: Part of the child's ids (``<parent id>.<name>-<n>``); the ``agent`` argument of
            the ``subagent`` tool.
        description: What it is for; listed in the ``subagent`` tool's description.
        instructions: The child's own system-prompt section (the persona stays the
            deployment's, shared by every agent).
        tools: The global tools the child may use (``None``: all of them, including
            ``subagent`` while the depth limit allows). Names are checked when a child starts.
        provider, model: The child's model; unset, it uses the parent's.
        max_steps: The child's step budget for its task (default 25).
        output_schema: A JSON schema: the child must answer by calling ``final_result`` with
            arguments matching it (a request's own ``output_schema`` wins).
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_text)
    instructions: str = attrs.field(validator=_check_instructions)
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_tool_names)
    provider: str | None = attrs.field(default=None, validator=_check_optional_text)
    model: str | None = attrs.field(default=None, validator=_check_optional_text)
    max_steps: int = attrs.field(default=25, validator=_check_steps)
    output_schema: dict[str, Any] | None = attrs.field(
        default=None, converter=_definition_schema, hash=False
    )


@attrs.frozen(eq=False)
class SubagentRequest:
    """One task for a child of ``parent``: ``await ctx.subagents.run(SubagentRequest(...))``.

    Attributes:
        parent: The agent delegating (its session is forked in ``"fork"`` mode; it owns
            background children).
        task: What the child is asked to do (its first prompt).
        agent: The definition's name; may be omitted when exactly one is registered.
        mode: ``"spawn"`` (fresh session) or ``"fork"`` (the parent's log up to its last
            closed turn).
        output_schema: A JSON schema for structured output (see
            :attr:`SubagentDefinition.output_schema`).
        background: Return at once with a handle instead of waiting for the child.
        call_id: The parent's tool call this request serves, if any (carried in events and in
            the parent's ``subagent/start`` log record).
    """

    parent: Agent
    task: str
    agent: str | None = None
    mode: SubagentMode = "spawn"
    output_schema: Mapping[str, Any] | None = None
    background: bool = False
    call_id: CallId | None = None


@attrs.frozen
class SubagentResult:
    """How a child's task ended.

    Attributes:
        text: The child's last answer text (partial when it was cut off).
        output: The validated ``final_result`` arguments with structured output, else None.
        session_id: The child's session (kept, and loadable on its own when persisted).
        agent_id: The child agent's id (also the background handle).
        definition: The definition's name.
        reason: See :data:`SubagentReason`.
        usage: The child's token usage over its task, summed over its model calls.
        error: What went wrong, or None when the child completed its task.
    """

    text: str
    output: Any = attrs.field(hash=False)
    session_id: SessionId
    agent_id: AgentId
    definition: str
    reason: SubagentReason
    usage: Usage = attrs.field(factory=Usage)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the child completed its task (and gave its structured output, if asked)."""
        return self.error is None and self.reason == "completed"


@attrs.frozen
class SubagentStatus:
    """One background child of a parent, as ``ctx.subagents.status`` reports it."""

    handle: str
    definition: str
    session_id: SessionId
    state: SubagentState
    result: SubagentResult | None = None


@attrs.frozen(eq=False)
class SubagentNotice:
    """Payload of ``agent/subagent`` (emit), dispatched through the *parent's* ``agent.ctx``.

    ``kind`` is ``"started"`` (the child is live and about to get its task), ``"progress"`` (one
    of the child's stream chunks, forwarded only while someone holds
    ``ctx.subagents.forward_progress()``) or ``"ended"`` (the child is closed; ``reason``,
    ``usage`` and ``error`` say how it went).
    """

    agent: Agent
    kind: Literal["started", "progress", "ended"]
    child_id: AgentId
    session_id: SessionId
    definition: str
    mode: SubagentMode
    depth: int
    background: bool = False
    call_id: CallId | None = None
    reason: SubagentReason | None = None
    usage: Usage | None = None
    error: str | None = None
    chunk: StreamChunk | None = None


@attrs.frozen
class SubagentInfo:
    """What a child's session header records about it (``meta["subagent"]``)."""

    definition: str
    parent_agent: str
    parent_session: str
    depth: int
    max_depth: int
    mode: SubagentMode


def subagent_info(of: Agent | Session) -> SubagentInfo | None:
    """The sub-agent record in the header of ``of``'s session, or None for a top-level agent.

    The depth limit is enforced from this record, so it holds for a resumed child too.

    Raises:
        SubagentError: the header has a ``subagent`` record that is not one this package
            wrote (so the depth of the agent is unknown).
    """
    session = of if isinstance(of, Session) else of.session
    if "subagent" not in session.header.meta:
        return None
    record = session.header.meta["subagent"]
    try:
        depth, max_depth, mode = record["depth"], record["max_depth"], record["mode"]
        names = (record["definition"], record["parent_agent"], record["parent_session"])
        counts = (depth, max_depth)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts):
            raise TypeError("depth and max_depth must be non-negative integers")
        if mode not in ("spawn", "fork") or not all(isinstance(n, str) for n in names):
            raise TypeError("mode, definition and the parent ids must be strings")
    except (KeyError, TypeError) as exc:
        raise SubagentError(
            f"session {session.id!r}: the sub-agent record in its header (meta.subagent) is "
            f"malformed ({exc}); it was not written by trio_agent.subagents, so the agent's "
            "depth is unknown and it may not spawn children"
        ) from None
    return SubagentInfo(*names, depth=depth, max_depth=max_depth, mode=mode)


@attrs.frozen
class SubagentLink:
    """One child a session started: its ``subagent/start`` record (see :func:`subagent_links`)."""

    call_id: str | None
    agent_id: str
    session_id: str
    definition: str
    mode: str
    background: bool


def subagent_links(session: Session | Iterable[SessionEvent]) -> tuple[SubagentLink, ...]:
    """The children a parent's log started, in order, from its ``subagent/start`` records.

    Each record is written into the parent's log when the child is created, so it is there
    even when the call was later aborted; ``trio-agent sessions show`` follows these links.
    """
    events = session.events if isinstance(session, Session) else session
    links = []
    for event in events:
        if event.type != START_EVENT:
            continue
        data = event.data
        try:
            link = SubagentLink(
                call_id=data.get("call_id"),
                agent_id=data["agent_id"],
                session_id=data["session_id"],
                definition=data["definition"],
                mode=data["mode"],
                background=bool(data.get("background", False)),
            )
        except (KeyError, TypeError):
            continue
        links.append(link)
    return tuple(links)
