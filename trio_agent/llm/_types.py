"""The frozen vocabulary shared by adapters, the session log and the loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from .. import _serde
from ..errors import TrioAgentError
from ..ids import CallId, MessageId, SessionId, new_message_id

__all__ = [
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "ContentBlock",
    "Finish",
    "FinishReason",
    "FrozenMessages",
    "GenerateRequest",
    "ImageBlock",
    "LlmCallConfig",
    "LlmError",
    "LlmFailure",
    "Message",
    "MessageSource",
    "ReasoningBlock",
    "ReasoningDelta",
    "Role",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResult",
    "ToolResultBlock",
    "ToolSchema",
    "Usage",
    "UsageChunk",
    "message_text",
]

Role: TypeAlias = Literal["system", "user", "assistant"]
#: Who wrote a message: ``"user"``, ``"model"``, ``"tool"``, ``"steering"``, ``"context"``,
#: ``"system"``, or ``"plugin:<name>"`` for text a plugin added.
MessageSource: TypeAlias = str
BlockKind: TypeAlias = Literal["text", "reasoning", "tool-call"]
FinishReason: TypeAlias = Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]


# --- content blocks -------------------------------------------------------------------------


@attrs.frozen
class TextBlock:
    """Plain text."""

    text: str


@attrs.frozen
class ReasoningBlock:
    """Model reasoning ("thinking") text; shown to the same provider again, never to users as an answer."""

    text: str


@attrs.frozen
class ImageBlock:
    """An inline image: ``data`` is base64 text of the bytes."""

    media_type: str
    data: str


@attrs.frozen
class ToolCallBlock:
    """A tool call the model asked for; ``arguments`` is the model's raw JSON text, unparsed."""

    id: CallId
    name: str
    arguments: str


@attrs.frozen
class ToolResultBlock:
    """The result of one tool call, paired with its call by ``tool_call_id``."""

    tool_call_id: CallId
    content: tuple[ContentBlock, ...]
    is_error: bool = False


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ImageBlock | ToolCallBlock | ToolResultBlock


@attrs.frozen
class Message:
    """One model-visible message. A tool result is a ``user`` message with one :class:`ToolResultBlock`."""

    id: MessageId
    role: Role
    content: tuple[ContentBlock, ...]
    source: MessageSource

    @classmethod
    def user(
        cls, text: str, *, source: MessageSource = "user", id: MessageId | None = None
    ) -> Message:
        """A user-role message holding one text block."""
        return cls(id or new_message_id(), "user", (TextBlock(text),), source)

    @classmethod
    def assistant(
        cls, *content: ContentBlock, id: MessageId | None = None, source: MessageSource = "model"
    ) -> Message:
        """An assistant-role message holding ``content``."""
        return cls(id or new_message_id(), "assistant", tuple(content), source)

    @classmethod
    def tool_result(
        cls,
        call_id: CallId,
        content: tuple[ContentBlock, ...],
        *,
        is_error: bool = False,
        id: MessageId | None = None,
    ) -> Message:
        """The user-role message that carries one tool result back to the model."""
        block = ToolResultBlock(call_id, content, is_error)
        return cls(id or new_message_id(), "user", (block,), "tool")

    @property
    def text(self) -> str:
        """The concatenated text blocks (reasoning, tool calls and images excluded)."""
        return message_text(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool-call blocks, in model order."""
        return tuple([b for b in self.content if isinstance(b, ToolCallBlock)])


def message_text(content: tuple[ContentBlock, ...]) -> str:
    """Concatenate the text blocks of ``content``."""
    return "".join(b.text for b in content if isinstance(b, TextBlock))


# --- usage, failures, config ----------------------------------------------------------------


@attrs.frozen
class Usage:
    """Token counts for one model call. ``input_tokens`` excludes cached input."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@attrs.frozen
class LlmFailure:
    """Why a model call failed, as plain facts that can be logged and retried on.

    ``code`` is one of ``RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, AUTH, INVALID_REQUEST,
    CONTEXT_WINDOW_EXCEEDED, QUOTA, EMPTY_RESPONSE, MALFORMED_RESPONSE, STREAM_CLOSED,
    NO_ADAPTER, ABORTED`` (adapters may add ``HTTP_<status>`` or ``UNKNOWN``).
    ``retry_after`` is in seconds.
    """

    code: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    request_id: str | None = None


class LlmError(TrioAgentError):
    """A model call failed; ``failure`` holds the facts."""

    def __init__(self, failure: LlmFailure) -> None:
        super().__init__(f"{failure.code}: {failure.message}")
        self.failure = failure


@attrs.frozen
class LlmCallConfig:
    """Which model to call and how; logged in every ``request/header``."""

    provider: str
    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] | None = None
    reasoning_effort: str | None = None


@attrs.frozen
class ToolSchema:
    """What the model sees of a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class ToolResult:
    """The outcome of one tool call.

    ``content`` is what the model sees; ``is_error`` and ``code`` (``UNKNOWN_TOOL``,
    ``INVALID_ARGS``, ``DENIED``, ``TOOL_ERROR``, ``ABORTED``, ``ABORTED_BEFORE_DISPATCH``,
    ``TOOL_TIMEOUT`` ...) say how it ended. ``additional_context`` holds messages the tool or a
    policy asked to add to the conversation (the loop logs them as ``context/message``), and
    ``concludes_turn`` asks the loop not to make another model request for this turn.
    """

    call_id: CallId
    content: tuple[ContentBlock, ...]
    is_error: bool = False
    code: str | None = None
    additional_context: tuple[Message, ...] = ()
    concludes_turn: bool = False

    @property
    def text(self) -> str:
        """The concatenated text blocks of ``content``."""
        return message_text(self.content)


class FrozenMessages(Sequence[Message]):
    """Base for immutable message sequences a :class:`GenerateRequest` may hold without copying
    (the session's ``MessageHistory`` is one: an O(1) view of an append-only history)."""

    __slots__ = ()


#: Classes known to be immutable message sequences: one set lookup per request instead of an
#: isinstance test against the ``Sequence`` ABC (~1 µs, #17).
_FROZEN_CLASSES: set[type] = {tuple}


def _frozen_messages(messages: Sequence[Message]) -> Sequence[Message]:
    cls = type(messages)
    if cls in _FROZEN_CLASSES:
        return messages
    if isinstance(messages, tuple | FrozenMessages):
        _FROZEN_CLASSES.add(cls)
        return messages
    return tuple(messages)


@attrs.frozen
class GenerateRequest:
    """Everything one model call needs."""

    config: LlmCallConfig
    messages: Sequence[Message] = attrs.field(converter=_frozen_messages)
    system: str | None = None
    tools: tuple[ToolSchema, ...] = ()
    session_id: SessionId | None = None


# --- stream chunks --------------------------------------------------------------------------


@attrs.frozen
class BlockStart:
    """A block opens at ``index``."""

    index: int
    kind: BlockKind


@attrs.frozen
class TextDelta:
    """More text for the text block at ``index``."""

    index: int
    text: str


@attrs.frozen
class ReasoningDelta:
    """More reasoning for the reasoning block at ``index``."""

    index: int
    text: str


@attrs.frozen
class ToolCallDelta:
    """More argument text for the tool call at ``index``; ``id``/``name`` once known."""

    index: int
    id: CallId
    name: str
    arguments_delta: str


@attrs.frozen
class BlockEnd:
    """The block at ``index`` is complete; ``block`` is authoritative."""

    index: int
    block: ContentBlock


@attrs.frozen
class UsageChunk:
    """Token usage of the call; at most one per stream, before :class:`Finish`."""

    usage: Usage


@attrs.frozen
class Finish:
    """The last chunk of every stream."""

    reason: FinishReason
    failure: LlmFailure | None = None


StreamChunk: TypeAlias = (
    BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish
)

_serde.register_tagged_union(
    ContentBlock,
    {
        TextBlock: "text",
        ReasoningBlock: "reasoning",
        ImageBlock: "image",
        ToolCallBlock: "tool-call",
        ToolResultBlock: "tool-result",
    },
)
_serde.register_tagged_union(
    StreamChunk,
    {
        BlockStart: "block-start",
        TextDelta: "text-delta",
        ReasoningDelta: "reasoning-delta",
        ToolCallDelta: "tool-call-delta",
        BlockEnd: "block-end",
        UsageChunk: "usage",
        Finish: "finish",
    },
)
