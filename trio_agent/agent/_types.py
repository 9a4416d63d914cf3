"""The ``Agent`` interface every plugin programs against, and its options."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ..ids import AgentId, MessageId, new_message_id
from ..llm import ContentBlock, Message, MessageSource, TextBlock
from ..runtime import Context
from ..session import Session

__all__ = ["Agent", "AgentOptions", "AgentStatus", "MessageContent", "to_user_message"]

AgentStatus: TypeAlias = Literal["idle", "running", "disposed"]

#: What ``send``/``steer``/``inject`` accept: text, content blocks, or a ready user message.
MessageContent: TypeAlias = str | Message | Sequence[ContentBlock]


def _positive_or_none(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and (isinstance(value, bool) or value <= 0):
        raise ValueError(f"{attribute.name} must be a positive integer or None, got {value!r}")


_DEFAULT_MAX_STEPS: int | None = 50


@attrs.frozen
class AgentOptions:
    """Per-agent model choice and durability. ``None`` model fields fall back to the loop's
    configured defaults.

    ``durability`` is when the loop makes the session durable: ``"step"`` (the default) after
    the turn's prompts are accepted, at every step end and right before each tool with effects
    runs, so a crash loses at most the step in flight; ``"turn"`` only at each turn end (fewer
    syncs, and a crash loses the turn in flight). Both also flush at every turn end.

    ``max_steps`` bounds the model requests of one turn (retries inside a step do not count):
    when the step that reaches it asks for more, its tool calls are still answered and the turn
    ends ``max-steps``. ``None`` means unlimited.
    """

    provider: str | None = None
    model: str | None = None
    max_tokens: int | None = attrs.field(default=None, validator=_positive_or_none)
    temperature: float | None = None
    durability: Literal["step", "turn"] = attrs.field(
        default="step", validator=attrs.validators.in_(("step", "turn"))
    )
    max_steps: int | None = attrs.field(default=_DEFAULT_MAX_STEPS, validator=_positive_or_none)


@runtime_checkable
class Agent(Protocol):
    """A live agent: an id, a session log, a status and an inbox.

    Plugins find agents through ``ctx.agents`` and program against this protocol only; the
    concrete loop (``trio_agent.loop.ReactLoopAgent``) is one swappable implementation.
    """

    @property
    def id(self) -> AgentId:
        """The agent's id (unique among live agents)."""
        ...

    @property
    def session(self) -> Session:
        """The append-only log this agent writes."""
        ...

    @property
    def status(self) -> AgentStatus:
        """``"idle"``, ``"running"`` (a turn is in progress) or ``"disposed"``."""
        ...

    @property
    def options(self) -> AgentOptions:
        """The frozen options the agent was created with."""
        ...

    @property
    def ctx(self) -> Context:
        """The agent scope: registrations made through it apply to this agent only."""
        ...

    def send(self, content: MessageContent, *, source: MessageSource | None = None) -> MessageId:
        """Queue a prompt; starts a turn when idle."""
        ...

    def steer(self, content: MessageContent) -> MessageId:
        """Inject a message between steps of the running turn; like :meth:`send` when idle."""
        ...

    def inject(self, content: MessageContent) -> MessageId:
        """Add context without starting a turn; the next model request sees it."""
        ...

    def cancel(self, reason: str | None = None) -> None:
        """Stop the running turn (it ends ``aborted``) and drop queued and steering messages."""
        ...

    async def wait_idle(self) -> None:
        """Wait until no turn is running and nothing is queued (or the agent is disposed)."""
        ...


def to_user_message(content: MessageContent, source: MessageSource) -> Message:
    """Build the user-role message ``send``/``steer``/``inject`` queue for ``content``."""
    if isinstance(content, Message):
        if content.role != "user":
            raise ValueError(
                f"only user messages can be sent to an agent, got role {content.role!r}"
            )
        return content
    blocks = (TextBlock(content),) if isinstance(content, str) else tuple(content)
    if not blocks:
        raise ValueError("cannot send an empty message: give text or at least one content block")
    return Message(new_message_id(), "user", blocks, source)
